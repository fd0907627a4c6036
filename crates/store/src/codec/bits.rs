//! The primitives every stored block is made of: LEB128 varints, zigzag, and a stream of
//! values of any width from 0 to 64 bits, least significant bit first.

use super::Corrupt;

/// Appends `value` as an unsigned LEB128 varint (7 bits a byte, low bits first).
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Signed to unsigned so that small magnitudes stay small: 0, -1, 1, -2 → 0, 1, 2, 3.
pub fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// The inverse of [`zigzag`].
pub fn unzigzag(value: u64) -> i64 {
    (value >> 1) as i64 ^ -((value & 1) as i64)
}

/// Bits needed to write `value` (0 for 0).
pub fn width_of(value: u64) -> u32 {
    64 - value.leading_zeros()
}

/// Reads bytes and varints from the front of a slice.
#[derive(Debug, Clone)]
pub struct ByteReader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> ByteReader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        ByteReader { bytes, at: 0 }
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.at
    }

    /// The next byte.
    pub fn byte(&mut self) -> Result<u8, Corrupt> {
        let byte = *self.bytes.get(self.at).ok_or(Corrupt("ends inside a header"))?;
        self.at += 1;
        Ok(byte)
    }

    /// The next `length` bytes.
    pub fn take(&mut self, length: usize) -> Result<&'a [u8], Corrupt> {
        let end = self.at.checked_add(length).filter(|&end| end <= self.bytes.len());
        let end = end.ok_or(Corrupt("a length runs past the end"))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    /// The next unsigned varint.
    pub fn varint(&mut self) -> Result<u64, Corrupt> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(Corrupt("a varint longer than 10 bytes"))
    }

    /// The next varint as a length or count, at most `limit`.
    pub fn count(&mut self, limit: usize) -> Result<usize, Corrupt> {
        let value = self.varint()?;
        usize::try_from(value).ok().filter(|&n| n <= limit).ok_or(Corrupt("a count larger than the data allows"))
    }

    /// The rest of the input.
    pub fn rest(&self) -> &'a [u8] {
        &self.bytes[self.at..]
    }
}

/// Writes values of 0 to 64 bits each at the end of a byte vector.
#[derive(Debug)]
pub struct BitWriter<'a> {
    bytes: &'a mut Vec<u8>,
    pending: u128,
    filled: u32,
}

impl<'a> BitWriter<'a> {
    /// A writer appending to `bytes`.
    pub fn new(bytes: &'a mut Vec<u8>) -> Self {
        BitWriter { bytes, pending: 0, filled: 0 }
    }

    /// Appends the low `width` bits of `value`.
    pub fn put(&mut self, value: u64, width: u32) {
        debug_assert!(width <= 64);
        if width == 0 {
            return;
        }
        let masked = if width == 64 { value } else { value & ((1u64 << width) - 1) };
        self.pending |= u128::from(masked) << self.filled;
        self.filled += width;
        while self.filled >= 8 {
            self.bytes.push(self.pending as u8);
            self.pending >>= 8;
            self.filled -= 8;
        }
    }

    /// One bit.
    pub fn bit(&mut self, set: bool) {
        self.put(u64::from(set), 1);
    }

    /// Writes the last byte, padded with zero bits.
    pub fn finish(self) {
        if self.filled > 0 {
            self.bytes.push(self.pending as u8);
        }
    }
}

/// Reads what a [`BitWriter`] wrote.
#[derive(Debug)]
pub struct BitReader<'a> {
    bytes: &'a [u8],
    /// Bits read so far.
    at: usize,
}

impl<'a> BitReader<'a> {
    /// A reader at the first bit of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        BitReader { bytes, at: 0 }
    }

    /// The next `width` bits.
    pub fn get(&mut self, width: u32) -> Result<u64, Corrupt> {
        if width == 0 {
            return Ok(0);
        }
        let end = self.at + width as usize;
        if end > self.bytes.len() * 8 {
            return Err(Corrupt("a bit field runs past the end"));
        }
        let first = self.at / 8;
        let mut window = [0u8; 16];
        let available = (self.bytes.len() - first).min(16);
        window[..available].copy_from_slice(&self.bytes[first..first + available]);
        let value = (u128::from_le_bytes(window) >> (self.at % 8)) as u64;
        self.at = end;
        Ok(if width == 64 { value } else { value & ((1u64 << width) - 1) })
    }

    /// One bit.
    pub fn bit(&mut self) -> Result<bool, Corrupt> {
        Ok(self.get(1)? == 1)
    }

    /// Bytes touched so far (the last one perhaps in part).
    pub fn bytes_used(&self) -> usize {
        self.at.div_ceil(8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_zigzag_round_trip() {
        for value in [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(ByteReader::new(&out).varint().unwrap(), value);
        }
        for value in [0i64, -1, 1, -2, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(value)), value);
        }
        assert_eq!([zigzag(0), zigzag(-1), zigzag(1), zigzag(-2)], [0, 1, 2, 3]);
        assert!(ByteReader::new(&[0x80; 11]).varint().is_err());
        assert!(ByteReader::new(&[0x80]).varint().is_err());
    }

    #[test]
    fn bit_fields_of_every_width_round_trip() {
        let fields: Vec<(u64, u32)> =
            (0..=64).map(|w| (if w == 0 { 0 } else { u64::MAX >> (64 - w) } ^ (w as u64 * 7), w)).collect();
        let mut out = Vec::new();
        let mut writer = BitWriter::new(&mut out);
        for &(value, width) in &fields {
            writer.put(value, width);
        }
        writer.finish();
        let mut reader = BitReader::new(&out);
        for &(value, width) in &fields {
            let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
            assert_eq!(reader.get(width).unwrap(), value & mask, "width {width}");
        }
        assert!(reader.get(64).is_err(), "past the end");
    }
}
