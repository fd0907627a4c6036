//! A series key of at most 15 bytes held in one 16-byte value: its bytes, zeros after them,
//! and its length in the last byte. Readers keep their short keys in this form, so finding a
//! short key is one 16-byte comparison, and its hash one multiplication; the scanner gives a
//! line's key in this form straight from the 16 bytes it already read.

use std::num::NonZeroU64;

/// A key of 1 to [`ShortKey::LONGEST`] bytes in 16: bytes 0-7, then bytes 8-15 (never zero:
/// the length byte is not), each half first byte lowest. Two 8-byte halves, not one 16-byte
/// number, so a line that carries one stays 8-aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShortKey {
    low: u64,
    high: NonZeroU64,
}

/// For each length, the bytes of the low half that are the key's.
const LOW_MASKS: [u64; 16] = {
    let mut masks = [0u64; 16];
    let mut length = 0;
    while length < 16 {
        masks[length] = if length >= 8 { u64::MAX } else { (1u64 << (8 * length)) - 1 };
        length += 1;
    }
    masks
};

/// For each length, the bytes of the high half that are the key's (never the last: the
/// length's).
const HIGH_MASKS: [u64; 16] = {
    let mut masks = [0u64; 16];
    let mut length = 9;
    while length < 16 {
        masks[length] = (1u64 << (8 * (length - 8))) - 1;
        length += 1;
    }
    masks
};

impl ShortKey {
    /// The longest key held.
    pub const LONGEST: usize = 15;

    /// `key` in short form, if it has 1 to [`ShortKey::LONGEST`] bytes.
    #[inline]
    pub fn new(key: &[u8]) -> Option<ShortKey> {
        if key.is_empty() || key.len() > Self::LONGEST {
            return None;
        }
        let mut bytes = [0u8; 16];
        // Two overlapping copies of fixed size, not a copy of variable length (a call): the
        // last line of every datagram, with fewer than 16 bytes after its start, is hashed
        // from a key made here (a `memcpy` call slowed the 25-line table bench).
        let (low, high) = match key.len() {
            8.. => (u64_at(key, 0), u64_at(key, key.len() - 8)),
            4.. => (u64::from(u32_at(key, 0)) | u64::from(u32_at(key, key.len() - 4)) << (8 * (key.len() - 4)), 0),
            _ => (key.iter().rev().fold(0u64, |word, &byte| word << 8 | u64::from(byte)), 0),
        };
        bytes[..8].copy_from_slice(&low.to_le_bytes());
        if key.len() >= 8 {
            bytes[key.len() - 8..key.len()].copy_from_slice(&high.to_le_bytes());
        }
        Some(Self::from_prefix(&bytes, key.len()))
    }

    /// The first `length` (1 to 15) bytes of `block` as a key in short form.
    #[inline(always)]
    pub fn from_prefix(block: &[u8; 16], length: usize) -> ShortKey {
        debug_assert!((1..=Self::LONGEST).contains(&length), "a short key has 1 to 15 bytes");
        let (low, high) = (u64_at(block, 0), u64_at(block, 8));
        let length = length & 15;
        let high = high & HIGH_MASKS[length] | (length as u64) << 56;
        ShortKey { low: low & LOW_MASKS[length], high: NonZeroU64::new(high).expect("the length byte is not zero") }
    }

    /// The 16 bytes: the key's, zeros, and its length last.
    #[inline(always)]
    pub fn to_bytes(self) -> [u8; 16] {
        self.get().to_le_bytes()
    }

    /// The 16 bytes as one number (first byte lowest).
    #[inline(always)]
    pub fn get(self) -> u128 {
        u128::from(self.high.get()) << 64 | u128::from(self.low)
    }

    /// True when `bytes` (a key's 16-byte form) is this key.
    #[inline(always)]
    pub fn is(self, bytes: &[u8; 16]) -> bool {
        u64_at(bytes, 0) == self.low && u64_at(bytes, 8) == self.high.get()
    }
}

#[inline(always)]
fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

#[inline(always)]
fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_length_holds_its_bytes_zeros_and_length() {
        let source = b"abcdefghijklmnopqrstuvwxyz";
        assert_eq!(ShortKey::new(b""), None);
        assert_eq!(ShortKey::new(&source[..16]), None);
        for length in 1..=15 {
            let key = &source[..length];
            let short = ShortKey::new(key).expect("short");
            let mut want = [0u8; 16];
            want[..length].copy_from_slice(key);
            want[15] = length as u8;
            assert_eq!(short.to_bytes(), want, "length {length}");
            let mut block = *b"0123456789ABCDEF";
            block[..length].copy_from_slice(key);
            assert_eq!(ShortKey::from_prefix(&block, length), short, "length {length}");
            assert!(short.is(&want), "length {length}");
            want[0] ^= 1;
            assert!(!short.is(&want), "length {length}");
        }
    }
}
