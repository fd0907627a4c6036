//! The flusher's side of a flush for one reader sending every series once per interval: absorb
//! (round 0: a million keys new to the flusher; later rounds: the steady state, values by id)
//! and flush, timed per series.
//! Run: `cargo run --release -p agg --example absorb -- NAMES`
use std::time::Instant;

fn main() {
    let names = std::env::args().nth(1).map_or(1_000_000, |a| a.parse::<usize>().expect("a number"));
    let packets: Vec<Vec<u8>> = (0..names.div_ceil(25))
        .map(|d| (0..25).map(|l| format!("bench.{}:1|c\n", (d * 25 + l) % names)).collect::<String>().into_bytes())
        .collect();
    let mut aggregator = agg::Aggregator::new(agg::AggConfig::default());
    let mut table = agg::Table::new(true, 8192);
    let mut map = agg::ReaderMap::default();
    for round in 0..4 {
        packets.iter().for_each(|p| table.insert_packet(1, p));
        let started = Instant::now();
        aggregator.absorb_taken(&mut map, table.take(false));
        let absorbed = started.elapsed();
        let started = Instant::now();
        let snapshot = aggregator.flush(10_000 * (round + 1));
        let flushed = started.elapsed();
        println!(
            "round {round}: absorb {:.1} ns/series, flush {:.1} ns/series ({} counters)",
            absorbed.as_nanos() as f64 / names as f64,
            flushed.as_nanos() as f64 / names as f64,
            snapshot.counters.len()
        );
    }
}
