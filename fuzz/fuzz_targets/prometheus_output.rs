//! Untrusted statsd lines (and a mapping file) through the prometheus backend: applied to the
//! cumulative registry, then written as text, OpenMetrics, protobuf and remote write in every
//! histogram mode. Never a panic; every text line is a comment or `name{labels} value` with a
//! valid name, escaped label values and a number Prometheus reads.
//!
//! Input: a mapping file (YAML), a NUL byte, then statsd packets separated by NUL bytes (each
//! one flush).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::prometheus_output::run(data));
