//! A global's journal file: its credential and body, or refused.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::journal_file::run(data));
