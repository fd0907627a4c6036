//! Untrusted bytes and base64: decoding never panics, and what decodes re-encodes to bytes that
//! decode to the same histogram.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::histogram_decode::run(data));
