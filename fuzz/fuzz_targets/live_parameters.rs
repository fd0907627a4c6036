//! `/api/v1/live`'s parameters (`match` regex, `sort`, `limit`, `threshold`, `tables`), read
//! and answered: an error naming the parameter, never a panic.
//!
//! Input: `key=value` lines.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::live_parameters::run(data));
