//! A store of the first format (one SQLite row per series and interval) with rows made of
//! the input, migrated to blocks when histd opens it, then read: an error, never a panic.
//!
//! Input: a byte per series kind (up to 3 series), then rows of 8-byte fields (series, ts,
//! seconds, count, min, max, value) and a histogram blob, cut by 0xff 0xfe.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::store_migration::run(data));
