//! Any bytes: parsing never panics, and every accepted metric encodes to a line that parses
//! back to the same metric.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::parse_round_trip::run(data));
