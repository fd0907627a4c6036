//! A statsd byte stream in reads of any sizes: only whole lines are handed on, and the
//! partial-line budget is given back.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::stream_framer::run(data));
