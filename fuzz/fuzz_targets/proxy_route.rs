//! A packet through `histd proxy`'s router: every line counted once, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::proxy_route::run(data));
