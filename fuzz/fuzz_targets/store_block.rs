//! Stored blocks read back from disk (a corrupt or truncated file): decoding never panics, and
//! what decodes encodes again to the same rows.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::store_block::run(data));
