//! A packet through `histd proxy`'s router: every line counted once, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let sanitize = bytes.first().is_some_and(|b| b & 1 == 1);
    histd::fuzzing::proxy_route(bytes.get(1..).unwrap_or_default(), sanitize);
});
