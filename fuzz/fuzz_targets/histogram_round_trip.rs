//! Values read from the input: insert, merge two halves, serialise and read back; the merge
//! equals inserting everything, the bytes round-trip, and statistics never panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::histogram_round_trip::run(data));
