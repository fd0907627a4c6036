//! Any bytes: the readers' one-pass scanner splits a packet into the same lines as `lines`,
//! and every line it reads itself gives exactly the full parser's one metric and series key
//! (and, when it gives the key in short form, that form is the key's).
#![no_main]

use libfuzzer_sys::fuzz_target;
use proto::{key::push_series_key, lines, parse_line, scan_lines, Line, Scanned};

fuzz_target!(|packet: &[u8]| {
    let scanned: Vec<Scanned<'_>> = scan_lines(packet).collect();
    let split: Vec<&[u8]> = lines(packet).collect();
    assert_eq!(scanned.len(), split.len());
    for (item, line) in scanned.into_iter().zip(split) {
        let simple = match item {
            Scanned::Other(other) => {
                assert_eq!(other, line);
                continue;
            }
            Scanned::Simple(simple) => simple,
        };
        let Line::Metrics(values) = parse_line(line) else { panic!("a simple line is a metric line") };
        let values: Vec<_> = values.collect();
        let [Ok(metric)] = values.as_slice() else { panic!("one good value, got {values:?}") };
        assert_eq!((simple.kind, simple.value, simple.sample_rate), (metric.kind, metric.value, metric.sample_rate));
        assert!(metric.timestamp.is_none());
        let mut fast_key = String::new();
        simple.push_key(&mut fast_key);
        if let Some(short) = simple.short_key {
            assert_eq!(Some(short), proto::ShortKey::new(fast_key.as_bytes()));
        }
        for sanitize in [true, false] {
            let mut key = String::new();
            push_series_key(&mut key, metric.name, metric.tags, sanitize);
            assert_eq!(fast_key, key);
        }
    }
});
