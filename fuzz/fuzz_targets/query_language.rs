//! Untrusted expression text (the HTTP API's `expr` and `name`): parsing never panics or
//! overflows the stack, and whatever parses nests no deeper than the limit.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::query_language::run(data));
