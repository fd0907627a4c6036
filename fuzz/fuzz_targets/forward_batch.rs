//! Untrusted forwarded batches (what `POST /api/v1/forward` reads): decoding never panics,
//! neither compressed nor raw; what decodes merges into an aggregator and flushes without a
//! panic.
#![no_main]

use agg::{AggConfig, Aggregator};
use histd::forward::format;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let _ = format::decode(bytes, 1 << 20);
    if let Ok(batch) = format::read_batch(bytes) {
        let mut aggregator = Aggregator::new(AggConfig::default());
        aggregator.absorb_mergeable(batch.interval);
        let snapshot = aggregator.flush(1_000_000);
        assert!(snapshot.timers.iter().all(|t| t.totals.received == 0 || t.stats.len() > 2));
    }
});
