//! Any bytes into a table, twice (sanitised and raw keys), then a flush: never panics, and every
//! non-empty line is counted.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::table_insert::run(data));
