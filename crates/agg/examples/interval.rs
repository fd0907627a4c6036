//! Flush intervals' worth of traffic into one reader's table, timed per line (the take that
//! ends each interval included): a quick check of the reader's steady state.
//! Run: `cargo run --release -p agg --example interval -- NAMES PASSES [LINES_PER_DATAGRAM] [c|ms]`
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().expect("a number"));
    let (names, passes) = (args.next().unwrap_or(100_000), args.next().unwrap_or(40));
    let per_datagram = args.next().unwrap_or(25);
    let kind = std::env::args().nth(4).unwrap_or_else(|| "c".to_string());
    let packets: Vec<Vec<u8>> = (0..names.div_ceil(per_datagram))
        .map(|d| {
            (0..per_datagram)
                .map(|l| {
                    let line = d * per_datagram + l;
                    format!("bench.{}:{}|{kind}\n", line % names, 1 + line * 7919 % 997)
                })
                .collect::<String>()
                .into_bytes()
        })
        .collect();
    // One reader's table across rounds, taken after each: the daemon's steady state (the first
    // round also pays for every key's first insert).
    let mut table = agg::Table::new(true, 8192);
    for round in 0..3 {
        let started = Instant::now();
        for _ in 0..passes {
            packets.iter().for_each(|p| table.insert_packet(1, p));
        }
        drop(table.take(false));
        let lines = (packets.len() * per_datagram * passes) as f64;
        println!("round {round}: {:.1} ns/line", started.elapsed().as_nanos() as f64 / lines);
    }
}
