//! A forward spool file as a local finds it at start: read whole or set aside.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|file: &[u8]| histd::fuzzing::spool_file(file));
