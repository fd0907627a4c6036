//! Untrusted statsd lines (and a mapping file) through the prometheus backend: applied to the
//! cumulative registry, then written as text, OpenMetrics, protobuf and remote write in every
//! histogram mode. Never a panic; every text line is a comment or `name{labels} value` with a
//! valid name, escaped label values and a number Prometheus reads.
//!
//! Input: a mapping file (YAML), a NUL byte, then statsd packets separated by NUL bytes (each
//! one flush).
#![no_main]

use std::sync::Arc;

use histd::prometheus::config::{HistogramMode, DEFAULT_BUCKETS};
use histd::prometheus::encode::{encode, Flush};
use histd::prometheus::exposition::{Exposition, Format};
use histd::prometheus::mapping::Mapper;
use histd::prometheus::samples::Layout;
use histd::prometheus::state::Registry;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let mut parts = bytes.split(|&b| b == 0);
    let mapping = std::str::from_utf8(parts.next().unwrap_or_default()).ok().and_then(|t| Mapper::from_yaml(t).ok());
    let mut registry = Registry::new(true, Some(3), mapping.map(Arc::new));
    let config = agg::AggConfig::default();
    let mut aggregator = agg::Aggregator::new(config.clone());
    for (flush, packet) in parts.take(4).enumerate() {
        let mut table = agg::Table::new(config.key_name_sanitize, 64);
        table.insert_packet(1, packet);
        aggregator.absorb(table);
        registry.apply(&aggregator.flush(1_000_000 + flush as u64 * 10_000));
        registry.expire(1_000 + flush as u64 * 10, Some(15));
    }
    for mode in [HistogramMode::Classic, HistogramMode::Vmrange, HistogramMode::Native] {
        let layout = Layout::new(mode, &DEFAULT_BUCKETS);
        let flush = Flush { layout: &layout, timestamp_ms: 1_040_000, start_ms: 1_030_000, external_labels: &[] };
        for request in encode(&registry, &flush, &[]) {
            assert!(snap::raw::Decoder::new().decompress_vec(&request.body).is_ok());
        }
    }
    for format in [Format::Text, Format::OpenMetrics, Format::Protobuf] {
        let mut out = Exposition::in_format(format);
        let mode = if format == Format::Protobuf { HistogramMode::Native } else { HistogramMode::Classic };
        out.registry(&registry, &Layout::new(mode, &DEFAULT_BUCKETS));
        if format == Format::Protobuf {
            continue;
        }
        for line in out.finish().lines().filter(|l| !l.starts_with('#')) {
            check_line(line);
        }
    }
});

/// `name{label="value",...} number`, as Prometheus' text parser needs it.
fn check_line(line: &str) {
    let name_end = line.find(['{', ' ']).unwrap_or_else(|| panic!("no value: {line:?}"));
    let name = &line[..name_end];
    assert!(!name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit()), "{line:?}");
    assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'), "{line:?}");
    let mut rest = &line[name_end..];
    if let Some(labels) = rest.strip_prefix('{') {
        rest = labels;
        loop {
            let eq = rest.find('=').unwrap_or_else(|| panic!("label without value: {line:?}"));
            assert!(rest[..eq].chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{line:?}");
            rest = rest[eq + 1..].strip_prefix('"').unwrap_or_else(|| panic!("unquoted value: {line:?}"));
            let mut chars = rest.char_indices();
            let close = loop {
                match chars.next() {
                    Some((_, '\\')) => assert!(matches!(chars.next(), Some((_, '\\' | '"' | 'n'))), "{line:?}"),
                    Some((at, '"')) => break at,
                    Some((_, '\n')) | None => panic!("unterminated value: {line:?}"),
                    _ => {}
                }
            };
            rest = &rest[close + 1..];
            match rest.as_bytes().first() {
                Some(b',') => rest = &rest[1..],
                Some(b'}') => {
                    rest = &rest[1..];
                    break;
                }
                _ => panic!("bad label list: {line:?}"),
            }
        }
    }
    let value = rest.strip_prefix(' ').unwrap_or_else(|| panic!("no space before the value: {line:?}"));
    let number = matches!(value, "+Inf" | "-Inf" | "NaN") || value.parse::<f64>().is_ok();
    assert!(number, "{line:?}");
}
