//! Flush intervals' worth of traffic into one reader's table, timed per line (the take, absorb
//! and flush that end each interval included, each also apart): a quick check of
//! a reader's and the flusher's steady state on one core.
//! Run: `cargo run --release -p agg --example interval -- NAMES PASSES [LINES_PER_DATAGRAM] [c|ms] [spread]`
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().expect("a number"));
    let (names, passes) = (args.next().unwrap_or(100_000), args.next().unwrap_or(40));
    let per_datagram = args.next().unwrap_or(25);
    let kind = std::env::args().nth(4).unwrap_or_else(|| "c".to_string());
    // "spread": every other pass names the series in a strided order, so that which series
    // comes next is not which came next before (as when many clients interleave), rather than
    // the same order every pass.
    let spread = std::env::args().nth(5).as_deref() == Some("spread");
    let packets_with = |stride: usize| -> Vec<Vec<u8>> {
        (0..names.div_ceil(per_datagram))
            .map(|d| {
                (0..per_datagram)
                    .map(|l| {
                        let line = d * per_datagram + l;
                        format!("bench.{}:{}|{kind}\n", line * stride % names, 1 + line * 7919 % 997)
                    })
                    .collect::<String>()
                    .into_bytes()
            })
            .collect()
    };
    let orders = [packets_with(1), packets_with(if spread { 7919 } else { 1 })];
    // One reader's table across rounds, taken after each and absorbed by the flusher's
    // aggregator, which then flushes: the daemon's steady state on one core (the first round
    // also pays for every key's first insert).
    let mut table = agg::Table::new(true, 8192);
    let mut aggregator = agg::Aggregator::new(agg::AggConfig::default());
    let mut map = agg::ReaderMap::default();
    for round in 0..3 {
        let started = Instant::now();
        for pass in 0..passes {
            orders[pass % 2].iter().for_each(|p| table.insert_packet(1, p));
        }
        let read = started.elapsed();
        aggregator.absorb_taken(&mut map, table.take(false));
        let absorbed = started.elapsed() - read;
        drop(aggregator.flush(10_000 * (round + 1)));
        let flushed = started.elapsed() - read - absorbed;
        let lines = (orders[0].len() * per_datagram * passes) as f64;
        let per_line = |time: std::time::Duration| time.as_nanos() as f64 / lines;
        println!(
            "round {round}: {:.1} ns/line (read {:.1}, take and absorb {:.1}, flush {:.1})",
            per_line(started.elapsed()),
            per_line(read),
            per_line(absorbed),
            per_line(flushed)
        );
    }
}
