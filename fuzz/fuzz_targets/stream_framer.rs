//! A statsd byte stream in reads of any sizes: only whole lines are handed on, and the
//! partial-line budget is given back.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    // The first 8 bytes say where reads end; the rest is the stream.
    let (cuts, stream) = bytes.split_at(bytes.len().min(8));
    histd::fuzzing::stream_framer(stream, cuts);
});
