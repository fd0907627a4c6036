//! A forward spool file as a local finds it at start: read whole or set aside.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::spool_file::run(data));
