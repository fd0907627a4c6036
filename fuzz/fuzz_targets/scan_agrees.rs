//! Any bytes: the readers' one-pass scanner splits a packet into the same lines as `lines`,
//! and every line it reads itself gives exactly the full parser's one metric and series key
//! (and, when it gives the key in short form, that form is the key's).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::scan_agrees::run(data));
