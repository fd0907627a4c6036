//! Untrusted forwarded batches (what `POST /api/v1/forward` reads): decoding never panics,
//! neither compressed nor raw; what decodes merges into an aggregator and flushes without a
//! panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::forward_batch::run(data));
