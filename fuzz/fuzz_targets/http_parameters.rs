//! Untrusted query parameters, answered as the HTTP handlers answer them, from a small real
//! store: never a panic, never a 500 (bad input is a 400 naming the parameter).
//!
//! Input: lines `route`, then `key=value` pairs (the route picks series, query, histogram or
//! heatmap by its first byte).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::http_parameters::run(data));
