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

/// Enough datagrams of `lines` lines to name each of `names` series at least once, in each of
/// `orders` orders: the first counts up, each next one steps through the names by a larger
/// stride, so that with more than one order which name follows which changes from pass to
/// pass (as when many clients interleave) instead of a reader meeting the names in the same
/// sequence every time, which keeps its tables' next entries in cache.
pub fn pool(names: usize, lines: usize, mix: Mix, orders: usize) -> Pool {
    let per_order = names.div_ceil(lines).max(1024) * lines;
    let strides: Vec<usize> = (0..orders.max(1)).map(|order| stride(names, order)).collect();
    let mut next = 0usize;
    let datagrams = (0..strides.len() * per_order / lines)
        .map(|_| {
            let mut datagram = Vec::with_capacity(lines * 32);
            for line in 0..lines {
                if line > 0 {
                    datagram.push(b'\n');
                }
                let stride = strides[next / per_order];
                let id = (next % per_order % names) * stride % names;
                datagram.extend_from_slice(line_for(id, next, mix).as_bytes());
                next += 1;
            }
            datagram
        })
        .collect();
    Pool { datagrams, lines }
}

/// The step through `names` of order `order`: 1 for the first, then the first of a list of
/// primes spread over the names that shares no factor with their number (so that stepping
/// by it visits every name once).
fn stride(names: usize, order: usize) -> usize {
    if order == 0 || names < 3 {
        return 1;
    }
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let start = names / (order + 1) + names / 7 + 1;
    (start..).find(|&step| gcd(step, names) == 1).expect("a step coprime with the names")
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
            let pool = pool(3000, 25, mix, 1);
            let mut table = agg::Table::new(true, 100);
            pool.datagrams.iter().for_each(|d| table.insert_packet(1, d));
            assert_eq!(table.ingest().bad_lines(), 0, "{mix:?}");
            assert_eq!(table.ingest().lines, (pool.datagrams.len() * 25) as u64);
        }
    }

    /// The names of a pool's lines, in order.
    fn names_sent(pool: &Pool) -> Vec<String> {
        let text =
            pool.datagrams.iter().map(|d| String::from_utf8_lossy(d).into_owned()).collect::<Vec<_>>().join("\n");
        text.lines().map(|line| line.split(':').next().unwrap().to_string()).collect()
    }

    #[test]
    fn each_order_names_every_series_once_per_pass_and_orders_differ() {
        // (names, lines per datagram, orders)
        for (names, lines, orders) in [(100_000, 25, 4), (1000, 25, 3), (30_000, 10, 2), (7, 5, 2)] {
            let pool = pool(names, lines, Mix::Counters, orders);
            let sent = names_sent(&pool);
            let per_order = sent.len() / orders;
            let passes: Vec<&[String]> = sent.chunks(per_order).collect();
            for (order, pass) in passes.iter().enumerate() {
                let distinct: std::collections::HashSet<&String> = pass[..names].iter().collect();
                assert_eq!(distinct.len(), names, "{names} names, order {order}: each once");
            }
            let follows = |pass: &[String]| pass[..names.min(50)].to_vec();
            for pair in passes.windows(2) {
                assert_ne!(follows(pair[0]), follows(pair[1]), "{names} names: the orders differ");
            }
        }
    }
}
