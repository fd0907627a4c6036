//! Writing metrics as statsd lines: the inverse of [`crate::parse_line`].

use std::io::Write;

use crate::{Kind, Metric, Value};

/// Appends `metric` to `out` as one line (no newline): `name:value|type[|@rate][|#tags][|Tts]`.
///
/// The line parses back to the same metric. Numbers are written in Rust's shortest round-trip
/// form; infinities as `Infinity`; gauge deltas always with their sign, and a gauge set to a
/// negative value with a leading space (` -1`), the only way statsd can say it.
pub fn encode_metric(metric: &Metric<'_>, out: &mut Vec<u8>) {
    out.extend_from_slice(metric.name);
    out.push(b':');
    match metric.value {
        // A gauge set to a negative value: a leading space keeps the sign from reading as a
        // delta (Etsy looks for the sign on the untrimmed value).
        Value::Number(number) if metric.kind == Kind::Gauge && number.is_sign_negative() => {
            out.push(b' ');
            write_number(out, number);
        }
        Value::Number(number) => write_number(out, number),
        Value::GaugeDelta(delta) => {
            if delta.is_sign_positive() {
                out.push(b'+');
            }
            write_number(out, delta);
        }
        Value::Member(member) => out.extend_from_slice(member),
    }
    out.push(b'|');
    out.extend_from_slice(metric.kind.as_str().as_bytes());
    if metric.sample_rate != 1.0 {
        out.extend_from_slice(b"|@");
        write_number(out, metric.sample_rate);
    }
    if !metric.tags.raw().is_empty() {
        out.extend_from_slice(b"|#");
        out.extend_from_slice(metric.tags.raw());
    }
    if let Some(timestamp) = metric.timestamp {
        // Writing to a Vec cannot fail.
        let _ = write!(out, "|T{timestamp}");
    }
}

fn write_number(out: &mut Vec<u8>, number: f64) {
    if number.is_infinite() {
        out.extend_from_slice(if number > 0.0 { b"Infinity" } else { b"-Infinity" });
    } else {
        // Writing to a Vec cannot fail.
        let _ = write!(out, "{number}");
    }
}
