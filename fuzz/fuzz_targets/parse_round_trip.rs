//! Any bytes: parsing never panics, and every accepted metric encodes to a line that parses
//! back to the same metric.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proto::{encode::encode_metric, lines, parse_line, Line};

fuzz_target!(|packet: &[u8]| {
    for line in lines(packet) {
        let Line::Metrics(values) = parse_line(line) else { continue };
        for metric in values.flatten() {
            let mut encoded = Vec::new();
            encode_metric(&metric, &mut encoded);
            let Line::Metrics(again) = parse_line(&encoded) else { panic!("re-encoded as a non-metric") };
            let again: Vec<_> = again.collect();
            assert_eq!(again, vec![Ok(metric)]);
        }
    }
});
