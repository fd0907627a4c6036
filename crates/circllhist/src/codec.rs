//! The binary form and its base64 (libcircllhist's `hist_serialize`, `hist_serialize_b64`):
//!
//! ```text
//! u16 big-endian     bins written (bins with count 0 are never written)
//! per bin:  i8 val, i8 exp, u8 t, then the count in t+1 bytes, least significant first,
//!           t minimal (0..=7)
//! ```
//!
//! The reader is defensive: it sorts and merges bins, skips invalid buckets and zero counts
//! (as the C reader does), treats the header as an upper bound (a body cut after a whole bin
//! is accepted), and rejects anything else with an error, never a panic.

use crate::{Bucket, Histogram};

/// Why bytes are not a histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer than the two header bytes.
    TooShort,
    /// A count length byte above 7.
    BadCountLength {
        /// Byte offset of the length byte.
        at: usize,
    },
    /// A bin cut in the middle.
    Truncated {
        /// Byte offset where the bin starts.
        at: usize,
    },
    /// Not base64 (bad character, missing padding, or data after the padding).
    BadBase64,
    /// Decoded bytes left over after the bins the header announced.
    TrailingBytes {
        /// Bytes the histogram used.
        used: usize,
    },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::TooShort => f.write_str("histogram shorter than its 2-byte header"),
            DecodeError::BadCountLength { at } => write!(f, "count length above 8 bytes at byte {at}"),
            DecodeError::Truncated { at } => write!(f, "histogram bin cut short at byte {at}"),
            DecodeError::BadBase64 => f.write_str("not padded standard base64"),
            DecodeError::TrailingBytes { used } => write!(f, "bytes left after the histogram's {used} bytes"),
        }
    }
}

impl std::error::Error for DecodeError {}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

impl Histogram {
    /// Appends the binary form.
    pub fn write_bytes(&self, out: &mut Vec<u8>) {
        let (keys, counts) = self.raw();
        out.extend_from_slice(&(keys.len() as u16).to_be_bytes());
        for (&key, &count) in keys.iter().zip(counts) {
            let bucket = Bucket::from_key(key);
            let length = (8 - count.leading_zeros() as usize / 8).max(1);
            out.extend_from_slice(&[bucket.val() as u8, bucket.exp() as u8, (length - 1) as u8]);
            out.extend_from_slice(&count.to_le_bytes()[..length]);
        }
    }

    /// The binary form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(2 + self.bin_count() * 5);
        self.write_bytes(&mut out);
        out
    }

    /// The binary form in padded standard base64.
    pub fn to_base64(&self) -> String {
        encode_base64(&self.to_bytes())
    }

    /// Reads a histogram from the front of `bytes`; returns it and the bytes it used.
    pub fn read_bytes(bytes: &[u8]) -> Result<(Histogram, usize), DecodeError> {
        let announced = bytes.get(..2).map_or(0, |header| usize::from(u16::from_be_bytes([header[0], header[1]])));
        let mut bins = Vec::with_capacity(announced.min(bytes.len() / 4));
        let used = read_bins(bytes, |key, count| bins.push((key, count)))?;
        Ok((Histogram::from_unsorted(bins), used))
    }

    /// Reads a histogram that is exactly `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> Result<Histogram, DecodeError> {
        let (histogram, used) = Histogram::read_bytes(bytes)?;
        if used != bytes.len() {
            return Err(DecodeError::TrailingBytes { used });
        }
        Ok(histogram)
    }

    /// Checks that `bytes` are exactly one histogram, as [`Histogram::from_bytes`] would read
    /// them, without building it.
    pub fn check_bytes(bytes: &[u8]) -> Result<(), DecodeError> {
        exactly(bytes, read_bins(bytes, |_, _| {})?)
    }

    /// Adds the histogram that is exactly `bytes`: what `self.merge(&Histogram::from_bytes(bytes)?)`
    /// does, without decoding it first (a global merging its locals' histograms of the same
    /// series adds most bins where they are). Bytes that are not a histogram add nothing.
    pub fn merge_bytes(&mut self, bytes: &[u8]) -> Result<(), DecodeError> {
        Histogram::check_bytes(bytes)?;
        self.merge_checked_bytes(bytes);
        Ok(())
    }

    /// [`Histogram::merge_bytes`] of bytes [`Histogram::check_bytes`] accepted, in one pass
    /// over them (of other bytes, the bins before the fault are added). Each bin is added
    /// where it is held, appended past the last, or set aside and merged in at the end with
    /// the others new here.
    pub fn merge_checked_bytes(&mut self, bytes: &[u8]) {
        let mut new: Vec<(u16, u64)> = Vec::new();
        let (mut previous, mut at) = (None, 0);
        let _ = read_bins(bytes, |key, count| {
            if count == 0 {
                return;
            }
            // Bins come in order (as histd and libcircllhist write them): walk forward from
            // the last; else look it up.
            at = match previous < Some(key) {
                true => at + self.keys_from(at).iter().take_while(|&&held| held < key).count(),
                false => self.position(key).unwrap_or_else(|insert_at| insert_at),
            };
            previous = Some(key);
            if at == self.bin_count() {
                self.insert_key(key, count); // past the last: appended
            } else if self.key_at(at) == key {
                self.add_at(at, count);
            } else {
                new.push((key, count));
            }
        });
        if !new.is_empty() {
            self.merge(&Histogram::from_unsorted(new));
        }
    }

    /// Reads padded standard base64 (whitespace ignored) holding exactly one histogram.
    pub fn from_base64(text: &str) -> Result<Histogram, DecodeError> {
        Histogram::from_bytes(&decode_base64(text)?)
    }
}

/// Calls `bin` with the key ([`Bucket::key`]) and count of each valid bin at the front of
/// `bytes`, in the order written (invalid buckets skipped, as the C reader does); the bytes
/// the bins took.
fn read_bins(bytes: &[u8], mut bin: impl FnMut(u16, u64)) -> Result<usize, DecodeError> {
    let header: [u8; 2] = bytes.get(..2).and_then(|h| h.try_into().ok()).ok_or(DecodeError::TooShort)?;
    let announced = u16::from_be_bytes(header);
    let mut at = 2;
    for _ in 0..announced {
        if at == bytes.len() {
            break; // the header is only an upper bound
        }
        let head = bytes.get(at..at + 3).ok_or(DecodeError::Truncated { at })?;
        let length = usize::from(head[2]) + 1;
        if length > 8 {
            return Err(DecodeError::BadCountLength { at: at + 2 });
        }
        let count = match bytes.get(at + 3..at + 11) {
            // Eight bytes there: read at once, the count's own kept (no copy of a length
            // known only now).
            Some(eight) => {
                let word = u64::from_le_bytes(eight.try_into().unwrap_or_else(|_| unreachable!("8 bytes")));
                word & (u64::MAX >> (64 - 8 * length))
            }
            None => {
                let count_bytes = bytes.get(at + 3..at + 3 + length).ok_or(DecodeError::Truncated { at })?;
                let mut count = [0u8; 8];
                count[..length].copy_from_slice(count_bytes);
                u64::from_le_bytes(count)
            }
        };
        if let Some(bucket) = Bucket::new(head[0] as i8, head[1] as i8) {
            bin(bucket.key(), count);
        }
        at += 3 + length;
    }
    Ok(at)
}

/// `Ok` when the histogram used all of `bytes`.
fn exactly(bytes: &[u8], used: usize) -> Result<(), DecodeError> {
    match used == bytes.len() {
        true => Ok(()),
        false => Err(DecodeError::TrailingBytes { used }),
    }
}

/// Padded standard base64.
pub fn encode_base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (index, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            let symbol = if index <= chunk.len() { BASE64[(n >> shift) as usize & 63] } else { b'=' };
            out.push(symbol as char);
        }
    }
    out
}

/// Decodes padded standard base64, skipping ASCII whitespace; unpadded input is refused.
pub fn decode_base64(text: &str) -> Result<Vec<u8>, DecodeError> {
    let symbols: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !symbols.len().is_multiple_of(4) {
        return Err(DecodeError::BadBase64);
    }
    let mut out = Vec::with_capacity(symbols.len() / 4 * 3);
    let quads = symbols.chunks(4).count();
    for (index, quad) in symbols.chunks(4).enumerate() {
        let padding = quad.iter().rev().take_while(|&&b| b == b'=').count();
        if padding > 2 || (padding > 0 && index + 1 != quads) {
            return Err(DecodeError::BadBase64);
        }
        let mut n = 0u32;
        for &symbol in &quad[..4 - padding] {
            let value = BASE64.iter().position(|&b| b == symbol).ok_or(DecodeError::BadBase64)?;
            n = (n << 6) | value as u32;
        }
        n <<= 6 * padding as u32;
        out.extend_from_slice(&n.to_be_bytes()[1..4 - padding]);
    }
    Ok(out)
}
