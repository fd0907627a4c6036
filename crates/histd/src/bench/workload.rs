//! Workloads: a pool of prepared datagrams cycling through every name.

/// The kinds of line a workload sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mix {
    /// `bench.<id>:1|c`
    Counters,
    /// `bench.<id>:<ms>|ms`
    Timers,
    /// `bench.<id>:<v>|g`
    Gauges,
    /// `bench.<id>:<member>|s`
    Sets,
    /// `bench.<id>:1|c|#env:prod,host:h<n>`
    Tagged,
    /// Counters, timers, gauges and sets in turn.
    Mixed,
    /// Nine timer lines for each counter line (`ms` and `c`), the timer-heavy load.
    TimerHeavy,
}

/// Datagrams to send in turn, and how many lines each holds.
pub struct Pool {
    /// The datagrams.
    pub datagrams: Vec<Vec<u8>>,
    /// Lines per datagram.
    pub lines: usize,
}

/// Enough datagrams of `lines` lines to name each of `names` series at least once.
pub fn pool(names: usize, lines: usize, mix: Mix) -> Pool {
    let count = names.div_ceil(lines).max(1024);
    let mut next = 0usize;
    let datagrams = (0..count)
        .map(|_| {
            let mut datagram = Vec::with_capacity(lines * 32);
            for line in 0..lines {
                if line > 0 {
                    datagram.push(b'\n');
                }
                datagram.extend_from_slice(line_for(next % names, next, mix).as_bytes());
                next += 1;
            }
            datagram
        })
        .collect();
    Pool { datagrams, lines }
}

/// The first part of every name `histd bench` sends (the web page folds these series away).
pub const NAME_PREFIX: &str = "bench";

fn line_for(id: usize, sequence: usize, mix: Mix) -> String {
    let value = 1 + sequence.wrapping_mul(2_654_435_761) % 997;
    let kind = match mix {
        Mix::Mixed => [Mix::Counters, Mix::Timers, Mix::Gauges, Mix::Sets][sequence % 4],
        Mix::TimerHeavy if sequence % 10 == 9 => Mix::Counters,
        Mix::TimerHeavy => Mix::Timers,
        other => other,
    };
    match kind {
        Mix::Counters | Mix::Mixed | Mix::TimerHeavy => format!("{NAME_PREFIX}.{id}:1|c"),
        Mix::Timers => format!("{NAME_PREFIX}.{id}:{value}|ms"),
        Mix::Gauges => format!("{NAME_PREFIX}.{id}:{value}|g"),
        Mix::Sets => format!("{NAME_PREFIX}.{id}:u{value}|s"),
        Mix::Tagged => format!("{NAME_PREFIX}.{id}:1|c|#env:prod,host:h{}", id % 10),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_parses_and_every_name_appears() {
        for mix in [Mix::Counters, Mix::Timers, Mix::Gauges, Mix::Sets, Mix::Tagged, Mix::Mixed, Mix::TimerHeavy] {
            let pool = pool(3000, 25, mix);
            let mut table = agg::Table::new(true, 100);
            pool.datagrams.iter().for_each(|d| table.insert_packet(1, d));
            assert_eq!(table.ingest().bad_lines(), 0, "{mix:?}");
            assert_eq!(table.ingest().lines, (pool.datagrams.len() * 25) as u64);
        }
    }
}
