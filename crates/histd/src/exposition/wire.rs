//! Protobuf's wire format, as much as remote write and the exposition need: varints, zigzag,
//! length-delimited fields, doubles, and native histogram buckets as spans and deltas. Tags are
//! one byte (field numbers below 16), written by the callers beside their schema comments.

use std::collections::BTreeMap;

/// Appends `value` as a varint.
pub fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The bytes of `value` as a varint.
pub fn varint_len(value: u64) -> usize {
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

/// A signed integer as `sint32`/`sint64` encode it.
pub fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// Appends a varint field.
pub fn uint(out: &mut Vec<u8>, tag: u8, value: u64) {
    out.push(tag);
    varint(out, value);
}

/// Appends a `double` field.
pub fn double(out: &mut Vec<u8>, tag: u8, value: f64) {
    out.push(tag);
    out.extend_from_slice(&value.to_le_bytes());
}

/// Appends a `fixed64` (or `sfixed64`) field.
pub fn fixed64(out: &mut Vec<u8>, tag: u8, value: u64) {
    out.push(tag);
    out.extend_from_slice(&value.to_le_bytes());
}

/// Appends a length-delimited field (a string, bytes, a packed list or a message).
pub fn bytes(out: &mut Vec<u8>, tag: u8, content: &[u8]) {
    out.push(tag);
    varint(out, content.len() as u64);
    out.extend_from_slice(content);
}

/// The bytes of a length-delimited field whose content is `len` bytes.
pub fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// Native histogram buckets: spans of consecutive indices (`BucketSpan { sint32 offset = 1;
/// uint32 length = 2; }`, each offset from the previous span's end) under `span_tag`, and the
/// counts as packed deltas from the previous bucket under `delta_tag`.
pub fn native_buckets(out: &mut Vec<u8>, buckets: &BTreeMap<i32, u64>, span_tag: u8, delta_tag: u8) {
    let mut spans: Vec<(i32, u32)> = Vec::new();
    let mut next_index = 0;
    for &index in buckets.keys() {
        match spans.last_mut() {
            Some((_, length)) if index == next_index => *length += 1,
            _ => spans.push((index - next_index, 1)),
        }
        next_index = index + 1;
    }
    for (offset, length) in spans {
        let mut span = Vec::new();
        uint(&mut span, 0x08, zigzag(i64::from(offset)));
        uint(&mut span, 0x10, u64::from(length));
        bytes(out, span_tag, &span);
    }
    if buckets.is_empty() {
        return;
    }
    let mut deltas = Vec::new();
    let mut previous = 0i64;
    for &count in buckets.values() {
        varint(&mut deltas, zigzag(count as i64 - previous));
        previous = count as i64;
    }
    bytes(out, delta_tag, &deltas);
}
