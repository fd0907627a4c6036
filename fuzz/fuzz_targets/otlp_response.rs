//! An OTLP receiver's answer (`ExportMetricsServiceResponse`, any bytes a network peer
//! sends) as the otlp backend reads it: never a panic; a partial success never reports more
//! than the bytes could hold.
#![no_main]

use histd::otlp::{judge, partial_success, Answer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((_, message)) = partial_success(data) {
        assert!(message.len() <= data.len() * 3, "lossy UTF-8 grows at most threefold");
    }
    let status = data.first().map_or(200, |&b| 100 + u16::from(b) * 2);
    let answer = Answer { status, body: bytes::Bytes::copy_from_slice(data), retry_after: None };
    let _ = judge(&answer);
});
