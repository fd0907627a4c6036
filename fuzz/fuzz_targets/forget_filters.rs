//! `DELETE /api/v1/series`' filters against a small real store (nothing deleted): a 400 naming
//! the parameter, never a panic or a 500.
//!
//! Input: `key=value` lines.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::forget_filters::run(data));
