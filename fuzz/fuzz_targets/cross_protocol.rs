//! What a line port (statsd TCP, management) received first: recognised as HTTP or not,
//! never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let _ = histd::fuzzing::cross_protocol(bytes);
});
