//! What a line port (statsd TCP, management) received first: recognised as HTTP or not,
//! never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::cross_protocol::run(data));
