//! A global's journal file: its credential and body, or refused.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|file: &[u8]| histd::fuzzing::journal_file(file));
