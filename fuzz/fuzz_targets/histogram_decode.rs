//! Untrusted bytes and base64: decoding never panics, and what decodes re-encodes to bytes that
//! decode to the same histogram.
#![no_main]

use circllhist::Histogram;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok((histogram, used)) = Histogram::read_bytes(bytes) {
        assert!(used <= bytes.len());
        assert_eq!(Histogram::from_bytes(&histogram.to_bytes()).unwrap(), histogram);
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        let _ = Histogram::from_base64(text);
    }
});
