//! An InfluxDB answer (any bytes a network peer sends, with any status) as the influx backend
//! reads it: never a panic; a partial write's dropped points are only ever read from a body
//! that says `partial write` and `dropped=`.
#![no_main]

use histd::exports::{influx_judge, influx_partial_write};
use histd::otlp::Answer;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if influx_partial_write(data).is_some() {
        let text = std::str::from_utf8(data).expect("read as text");
        assert!(text.contains("partial write") && text.contains("dropped="), "{text:?}");
    }
    let status = data.first().map_or(400, |&b| 100 + u16::from(b) * 2);
    let answer = Answer { status, body: bytes::Bytes::copy_from_slice(data), retry_after: None };
    let _ = influx_judge(&answer);
});
