//! Any bytes into a table, twice (sanitised and raw keys), then a flush: never panics, and every
//! non-empty line is counted.
#![no_main]

use agg::{AggConfig, Aggregator, Table};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|packet: &[u8]| {
    for sanitize in [true, false] {
        let mut table = Table::new(sanitize, 16);
        table.insert_packet(1, packet);
        assert_eq!(table.ingest().lines, proto::lines(packet).count() as u64);
        let mut aggregator = Aggregator::new(AggConfig { key_name_sanitize: sanitize, ..AggConfig::default() });
        aggregator.absorb(table);
        aggregator.flush(10_000);
    }
});
