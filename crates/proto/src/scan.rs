//! The reader's fast path: a packet's lines read where they lie, nothing copied.
//!
//! Nearly every line statsd clients send is `name:value|type[|@rate][|#tags]` with a plain name,
//! plain tags and plain decimal numbers. [`scan_lines`] first finds the packet's newlines, 64
//! bytes at a time, so each line's end is known before it is read and where the next line
//! starts never waits for this one's parsing. Then the name is checked for characters that need
//! sanitising as it is searched for `:`, sixteen bytes at a time; the most common tail,
//! `digits|type`, is read as one 8-byte word; other tails from their known end, or with a rate
//! and tags in one pass. Every other line goes to the caller unparsed, for
//! [`crate::parse_line`]. Where it reads a line itself it gives exactly what `parse_line` and
//! [`crate::key::push_series_key`] give (a property test and a fuzz target check this), and a
//! name of up to 15 bytes in short form too ([`ShortKey`]).

use crate::key::is_kept_byte;
use crate::{Kind, ShortKey, Value};

/// One non-empty line of a packet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scanned<'a> {
    /// A `name:value|type[|@rate][|#tags]` line whose series key needs no sanitising.
    Simple(SimpleMetric<'a>),
    /// Any other line (no `\n`, no trailing `\r`), for [`crate::parse_line`].
    Other(&'a [u8]),
}

/// A line read by the fast path: one value of a counter, timer, gauge or histogram.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimpleMetric<'a> {
    /// The name, which needs no sanitising; the whole series key when there are no tags.
    pub name: &'a str,
    /// DogStatsD tags as received after `#` (`env:prod,host:a`), empty when none: each non-empty,
    /// with at most one `:` and only characters keys keep (no `;`). See
    /// [`SimpleMetric::push_key`].
    pub tags: &'a str,
    /// The type (never [`Kind::Set`]).
    pub kind: Kind,
    /// [`Value::Number`], or [`Value::GaugeDelta`] for a gauge written with a `-`.
    pub value: Value<'a>,
    /// The sample rate, greater than 0 (1 when not given).
    pub sample_rate: f64,
    /// The series key in short form, when it is the name (no tags) and the name has at most
    /// [`ShortKey::LONGEST`] bytes (and the packet 16 bytes from the line's start); else `None`.
    pub short_key: Option<ShortKey>,
}

impl SimpleMetric<'_> {
    /// Appends the series key: the name, then `;tag` for each tag with its `:` turned into `=`
    /// (what [`crate::key::push_series_key`] gives for these tags, sanitised or not).
    pub fn push_key(&self, out: &mut String) {
        let start = out.len();
        out.push_str(self.name);
        for tag in self.tags.split(',').filter(|_| !self.tags.is_empty()) {
            out.push(';');
            match tag.split_once(':') {
                Some((name, value)) => {
                    out.push_str(name);
                    out.push('=');
                    out.push_str(value);
                }
                None => out.push_str(tag),
            }
        }
        if !self.name.contains(';') {
            crate::key::sort_tags(&mut out[start..]); // as push_series_key: tags in one order
        }
    }
}

/// The lines of `packet` in order: split on `\n`, one `\r` before it dropped, empty lines
/// skipped (as [`crate::lines`]).
pub fn scan_lines(packet: &[u8]) -> ScanLines<'_> {
    ScanLines { packet, position: 0, block: 0, newlines: newline_mask(packet) }
}

/// The iterator of [`scan_lines`]. The packet's `\n`s are found first, 64 bytes at a time,
/// and each line is read between its start and its `\n`: where the next line starts never
/// waits for this one's parsing, so the CPU reads several lines at once.
#[derive(Debug, Clone)]
pub struct ScanLines<'a> {
    packet: &'a [u8],
    /// Where the next line starts.
    position: usize,
    /// Where the 64 bytes `newlines` describes start.
    block: usize,
    /// Bit `i` set for a `\n` at `block + i` not yet returned as a line's end.
    newlines: u64,
}

impl ScanLines<'_> {
    /// The position of the next line's `\n` (the packet's length when it has none).
    #[inline(always)]
    fn next_newline(&mut self) -> usize {
        while self.newlines == 0 {
            self.block += 64;
            match self.packet.get(self.block..) {
                Some(rest) if !rest.is_empty() => self.newlines = newline_mask(rest),
                _ => return self.packet.len(),
            }
        }
        let at = self.block + self.newlines.trailing_zeros() as usize;
        self.newlines &= self.newlines - 1;
        at
    }
}

impl<'a> Iterator for ScanLines<'a> {
    type Item = Scanned<'a>;

    #[inline]
    fn next(&mut self) -> Option<Scanned<'a>> {
        loop {
            let start = self.position;
            let rest = self.packet.get(start..).filter(|rest| !rest.is_empty())?;
            let length = self.next_newline() - start;
            self.position += length + 1;
            if let Some(metric) = scan_simple(rest, length) {
                return Some(Scanned::Simple(metric));
            }
            let line = &rest[..length];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if !line.is_empty() {
                return Some(Scanned::Other(line));
            }
        }
    }
}

/// Bit `i` set where `bytes[i]` is `\n`, for the first 64 bytes.
#[inline(always)]
fn newline_mask(bytes: &[u8]) -> u64 {
    match bytes.first_chunk::<64>() {
        Some(block) => newline_mask_64(block),
        None => {
            let mut block = [0u8; 64];
            block[..bytes.len()].copy_from_slice(bytes);
            newline_mask_64(&block)
        }
    }
}

/// Bit `i` set where `block[i]` is `\n`.
#[inline(always)]
fn newline_mask_64(block: &[u8; 64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        block.chunks_exact(16).enumerate().fold(0, |mask, (at, sixteen)| {
            mask | u64::from(sixteen::equal_mask(sixteen.try_into().expect("16 bytes"), b'\n')) << (16 * at)
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        block.iter().enumerate().fold(0, |mask, (at, &byte)| mask | u64::from(byte == b'\n') << at)
    }
}

/// Reads `name:value|type[|@rate][|#tags]` as the whole of `bytes[..length]` (a line, which
/// may end in `\r`; `bytes` goes on past it); `None` when the line is anything else.
#[inline(always)]
fn scan_simple(bytes: &[u8], length: usize) -> Option<SimpleMetric<'_>> {
    let colon = name_end(bytes)?;
    // SAFETY: `name_end` accepted only ASCII bytes before the colon.
    let name = unsafe { std::str::from_utf8_unchecked(&bytes[..colon]) };
    let end = match bytes.get(..length)? {
        [.., b'\r'] => length - 1,
        _ => length,
    };
    let short_key = bytes.first_chunk::<16>().filter(|_| colon <= ShortKey::LONGEST);
    let short_key = short_key.map(|block| ShortKey::from_prefix(block, colon));
    let short = match integer_tail(bytes, colon + 1, end) {
        Some(found) => Some(found),
        None => short_tail(bytes.get(colon + 1..end)?),
    };
    match short {
        Some((value, kind)) => Some(SimpleMetric { name, tags: "", kind, value, sample_rate: 1.0, short_key }),
        None => scan_tail(bytes, colon, length, short_key),
    }
}

/// The value and type of `bytes[start..end]` when it is `digits|type`, up to 7 digits and no
/// sample rate or tags (most lines): the 8 bytes from `start` read as one word, the digits
/// found and converted without a loop. `None` for anything else, which
/// [`short_tail`] or [`scan_tail`] then reads.
#[inline(always)]
fn integer_tail(bytes: &[u8], start: usize, end: usize) -> Option<(Value<'static>, Kind)> {
    let word = u64::from_le_bytes(*bytes.get(start..)?.first_chunk::<8>()?);
    let digits = leading_digits(word);
    if digits == 0 || digits == 8 || (word >> (8 * digits)) as u8 != b'|' {
        return None;
    }
    let kind = match bytes.get(start + digits + 1..end)? {
        b"c" => Kind::Counter,
        b"ms" => Kind::Timer,
        b"g" => Kind::Gauge,
        b"h" => Kind::Histogram,
        b"d" => Kind::Distribution,
        _ => return None,
    };
    let value = match digits {
        1 => u64::from(word as u8 - b'0'), // a counter's usual `1`
        _ => digits_value(word, digits),
    };
    Some((Value::Number(value as f64), kind))
}

/// How many of the 8 bytes of `word` (first byte lowest) are ASCII digits before the first
/// that is not.
#[inline(always)]
fn leading_digits(word: u64) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    // A digit's byte becomes its value 0-9.
    let offsets = word ^ (0x30 * ONES);
    // High bit of each byte set unless its offset is below 10 (no carry between bytes: the low
    // seven bits plus 0x76 stay under 0x100).
    let not_digits = (((offsets & (0x7F * ONES)) + 0x76 * ONES) | offsets) & (0x80 * ONES);
    (not_digits.trailing_zeros() / 8) as usize
}

/// The integer that the first `digits` bytes of `word` (1 to 7 ASCII digits, first byte
/// lowest and most significant) spell.
#[inline(always)]
fn digits_value(word: u64, digits: usize) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    // The digits' values as the last `digits` of eight, zeros before them.
    let values = (word ^ (0x30 * ONES)) << (8 * (8 - digits));
    // Neighbouring lanes summed, twice as wide each time (what spills past a lane is masked).
    let pairs = values.wrapping_mul(10).wrapping_add(values >> 8) & 0x00FF_00FF_00FF_00FF;
    let quads = pairs.wrapping_mul(100).wrapping_add(pairs >> 16) & 0x0000_FFFF_0000_FFFF;
    quads.wrapping_mul(10_000).wrapping_add(quads >> 32) & 0xFFFF_FFFF
}

/// The value and type of a tail `value|type` with neither a sample rate nor tags, read from
/// its ends, the number known to end where the type's `|` is.
#[inline(always)]
fn short_tail(tail: &[u8]) -> Option<(Value<'static>, Kind)> {
    let (number, kind) = match tail {
        [number @ .., b'|', b'c'] => (number, Kind::Counter),
        [number @ .., b'|', b'm', b's'] => (number, Kind::Timer),
        [number @ .., b'|', b'g'] => (number, Kind::Gauge),
        [number @ .., b'|', b'h'] => (number, Kind::Histogram),
        [number @ .., b'|', b'd'] => (number, Kind::Distribution),
        _ => return None,
    };
    let value = exact_number(number)?;
    let value = match number[0] {
        b'-' if kind == Kind::Timer => return None,
        b'-' if kind == Kind::Gauge => Value::GaugeDelta(value),
        _ => Value::Number(value),
    };
    Some((value, kind))
}

/// `bytes`, all of it, as a plain decimal (what [`plain_number`] reads): its length known, the
/// digits are read without looking for where they end.
#[inline(always)]
fn exact_number(bytes: &[u8]) -> Option<f64> {
    let (negative, unsigned) = match bytes {
        [digit @ b'0'..=b'9'] => return Some(f64::from(digit - b'0')),
        [b'-', rest @ ..] => (true, rest),
        _ => (false, bytes),
    };
    if unsigned.is_empty() || unsigned.len() > 16 {
        return None; // no digit, or more than 15 of them
    }
    let (mut mantissa, mut point) = (0u64, None::<usize>);
    for (at, &byte) in unsigned.iter().enumerate() {
        match byte.wrapping_sub(b'0') {
            digit @ 0..=9 => mantissa = mantissa * 10 + u64::from(digit),
            _ if byte == b'.' && point.is_none() => point = Some(at),
            _ => return None,
        }
    }
    let digits = unsigned.len() - usize::from(point.is_some());
    if digits == 0 || digits > 15 {
        return None;
    }
    let value = decimal(mantissa, digits, point);
    Some(if negative { -value } else { value })
}

/// The rest of [`scan_simple`] for any line after its name (a sample rate, tags).
#[inline]
fn scan_tail(bytes: &[u8], colon: usize, length: usize, short_key: Option<ShortKey>) -> Option<SimpleMetric<'_>> {
    let (number, bar) = plain_number(bytes, colon + 1)?;
    if bytes.get(bar) != Some(&b'|') {
        return None;
    }
    let (kind, after_kind) = kind(bytes, bar + 1)?;
    let (sample_rate, after_rate) = match bytes.get(after_kind..after_kind + 2) {
        Some(b"|@") => plain_number(bytes, after_kind + 2).filter(|&(rate, _)| rate > 0.0)?,
        _ => (1.0, after_kind),
    };
    let (tags, after_tags) = match bytes.get(after_rate..after_rate + 2) {
        Some(b"|#") => plain_tags(bytes, after_rate + 2)?,
        _ => ("", after_rate),
    };
    if after_tags != length && (after_tags + 1 != length || bytes[after_tags] != b'\r') {
        return None;
    }
    let negative = bytes[colon + 1] == b'-';
    let value = match kind {
        Kind::Timer if negative => return None,
        Kind::Gauge if negative => Value::GaugeDelta(number),
        _ => Value::Number(number),
    };
    // SAFETY: `name_end` accepted only ASCII bytes before the colon.
    let name = unsafe { std::str::from_utf8_unchecked(&bytes[..colon]) };
    let short_key = short_key.filter(|_| tags.is_empty());
    Some(SimpleMetric { name, tags, kind, value, sample_rate, short_key })
}

/// Tags from `start` that need no change but `:` to `=`: non-empty, comma-separated, each with
/// at most one `:` and otherwise only characters keys keep, but `;`. The tags and the position
/// after them.
#[inline]
fn plain_tags(bytes: &[u8], start: usize) -> Option<(&str, usize)> {
    let (mut position, mut tag_length, mut colons) = (start, 0usize, 0usize);
    loop {
        match bytes.get(position).copied() {
            Some(b',') if tag_length > 0 => (tag_length, colons) = (0, 0),
            Some(b':') if colons == 0 => (tag_length, colons) = (tag_length + 1, 1),
            Some(byte) if byte != b';' && is_kept_byte(byte) => tag_length += 1,
            _ => break,
        }
        position += 1;
    }
    if tag_length == 0 {
        return None;
    }
    // SAFETY: every byte accepted above is ASCII.
    Some((unsafe { std::str::from_utf8_unchecked(&bytes[start..position]) }, position))
}

/// The position of the `:` ending a non-empty name made only of characters kept as they are.
#[inline]
fn name_end(bytes: &[u8]) -> Option<usize> {
    let colon = first_unkept(bytes)?;
    (colon > 0 && bytes[colon] == b':').then_some(colon)
}

/// The position of the first byte that is not one keys keep as it is (`[A-Za-z0-9_.;=-]`).
/// Sixteen bytes at a time where the bytes allow (a name's end found without a branch per
/// byte, whose last one the CPU mispredicts as names vary in length), then byte by byte.
#[inline]
fn first_unkept(bytes: &[u8]) -> Option<usize> {
    let mut start = 0;
    #[cfg(target_arch = "x86_64")]
    while let Some(block) = bytes.get(start..start + 16) {
        match sixteen::unkept_mask(block.try_into().expect("16 bytes")) {
            0 => start += 16,
            mask => return Some(start + mask.trailing_zeros() as usize),
        }
    }
    bytes[start..].iter().position(|&byte| !is_kept_byte(byte)).map(|at| start + at)
}

/// Sixteen bytes classified at once with SSE2 (every x86-64 CPU has it).
#[cfg(target_arch = "x86_64")]
mod sixteen {
    use std::arch::x86_64::*;

    /// Bit `i` set when `block[i]` is not a byte keys keep (`[A-Za-z0-9_.;=-]`).
    #[inline(always)]
    pub(super) fn unkept_mask(block: &[u8; 16]) -> u32 {
        // SAFETY: SSE2 is part of x86-64; the load reads exactly the 16 bytes of `block`.
        unsafe {
            let bytes = _mm_loadu_si128(block.as_ptr().cast());
            let letters = within(_mm_or_si128(bytes, _mm_set1_epi8(0x20)), b'a', 26);
            let digits = within(bytes, b'0', 10);
            let dash_dot = within(bytes, b'-', 2);
            let underscore = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(b'_' as i8));
            let semicolon = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(b';' as i8));
            let equals = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(b'=' as i8));
            let kept = _mm_or_si128(
                _mm_or_si128(_mm_or_si128(letters, digits), _mm_or_si128(dash_dot, underscore)),
                _mm_or_si128(semicolon, equals),
            );
            !(_mm_movemask_epi8(kept) as u32) & 0xFFFF
        }
    }

    /// Bit `i` set when `block[i]` is `byte`.
    #[inline(always)]
    pub(super) fn equal_mask(block: &[u8; 16], byte: u8) -> u32 {
        // SAFETY: SSE2 is part of x86-64; the load reads exactly the 16 bytes of `block`.
        unsafe {
            let bytes = _mm_loadu_si128(block.as_ptr().cast());
            _mm_movemask_epi8(_mm_cmpeq_epi8(bytes, _mm_set1_epi8(byte as i8))) as u32
        }
    }

    /// All ones in each byte of `bytes` from `low` to `low + count - 1`, compared unsigned.
    #[inline(always)]
    unsafe fn within(bytes: __m128i, low: u8, count: u8) -> __m128i {
        let offset = _mm_sub_epi8(bytes, _mm_set1_epi8(low as i8));
        _mm_cmpeq_epi8(_mm_min_epu8(offset, _mm_set1_epi8((count - 1) as i8)), offset)
    }
}

/// A plain decimal (`-`? digits, at most one `.`, at most 15 digits) from `start`: the value
/// read exactly as JavaScript reads it, and the position of the first byte after it.
#[inline]
fn plain_number(bytes: &[u8], start: usize) -> Option<(f64, usize)> {
    let negative = bytes.get(start) == Some(&b'-');
    let mut position = start + usize::from(negative);
    let (mut mantissa, mut digits, mut point) = (0u64, 0usize, None::<usize>);
    loop {
        match bytes.get(position).copied().unwrap_or(b'\n') {
            byte @ b'0'..=b'9' => {
                // Wrapping: a run of more than 15 digits is rejected below, whatever it wrapped to.
                mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(byte - b'0'));
                digits += 1;
            }
            b'.' if point.is_none() => point = Some(digits),
            _ => break,
        }
        position += 1;
    }
    if digits == 0 || digits > 15 {
        return None;
    }
    let value = decimal(mantissa, digits, point);
    Some((if negative { -value } else { value }, position))
}

/// The value of `digits` decimal digits read as the integer `mantissa` (at most 15 of them),
/// with a point after the first `point` of them when there is one: exactly as JavaScript
/// reads it.
#[inline(always)]
fn decimal(mantissa: u64, digits: usize, point: Option<usize>) -> f64 {
    const POWERS: [f64; 16] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];
    // Both the integer (under 2^53) and 10^places are exact in an f64, so one division
    // rounds correctly; integers need none.
    let whole = mantissa as i64 as f64;
    match point {
        Some(at) if at < digits => whole / POWERS[digits - at],
        _ => whole,
    }
}

/// The type at `start` (never a set) and the position after it.
#[inline]
fn kind(bytes: &[u8], start: usize) -> Option<(Kind, usize)> {
    let (kind, length) = match bytes.get(start..)? {
        [b'm', b's', ..] => (Kind::Timer, 2),
        [b'c', ..] => (Kind::Counter, 1),
        [b'g', ..] => (Kind::Gauge, 1),
        [b'h', ..] => (Kind::Histogram, 1),
        [b'd', ..] => (Kind::Distribution, 1),
        _ => return None,
    };
    Some((kind, start + length))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn simple(name: &'static str, kind: Kind, value: Value<'static>) -> Scanned<'static> {
        sampled(name, kind, value, 1.0)
    }

    fn sampled(name: &'static str, kind: Kind, value: Value<'static>, sample_rate: f64) -> Scanned<'static> {
        Scanned::Simple(SimpleMetric { name, tags: "", kind, value, sample_rate, short_key: None })
    }

    fn tagged(name: &'static str, tags: &'static str, value: f64, sample_rate: f64) -> Scanned<'static> {
        Scanned::Simple(SimpleMetric {
            name,
            tags,
            kind: Kind::Counter,
            value: Value::Number(value),
            sample_rate,
            short_key: None,
        })
    }

    #[test]
    fn finds_the_first_byte_keys_do_not_keep_at_every_place() {
        // Every byte value at every place of names of 0 to 40 kept bytes (one block of 16,
        // two, and the bytes after the last block), against the byte-by-byte table.
        let kept = b"azAZ09_.;=-mM5";
        for length in 0..40 {
            let name: Vec<u8> = (0..length).map(|at| kept[at % kept.len()]).collect();
            assert_eq!(first_unkept(&name), None, "{length} kept bytes");
            for at in 0..length {
                for byte in 0..=255u8 {
                    let mut bytes = name.clone();
                    bytes[at] = byte;
                    let want = bytes.iter().position(|&b| !is_kept_byte(b));
                    assert_eq!(first_unkept(&bytes), want, "byte {byte:#x} at {at} of {length}");
                }
            }
        }
    }

    #[test]
    fn reads_up_to_seven_leading_digits_from_a_word() {
        let cases: &[(&[u8; 8], usize, u64)] = &[
            (b"1|c\nbenc", 1, 1),
            (b"0|ms\nabc", 1, 0),
            (b"42|c\r\nxy", 2, 42),
            (b"007|g\nzz", 3, 7),
            (b"9999999|", 7, 9_999_999),
            (b"1234567|", 7, 1_234_567),
            (b"12345678", 8, 0),
            (b"|1234567", 0, 0),
            (b"-5|g\nabc", 0, 0),
            (b"12.5|ms\n", 2, 12),
            (b"3/|c\n\n\n\n", 1, 3),
            (b"5:|c\n\n\n\n", 1, 5),
            (b"8\xb9|c\n\n\n\n", 1, 8),
            (b"8\xff\xff\xff\xff\xff\xff\xff", 1, 8),
        ];
        for &(word, digits, value) in cases {
            let word64 = u64::from_le_bytes(*word);
            assert_eq!(leading_digits(word64), digits, "{:?}", String::from_utf8_lossy(word));
            if (1..8).contains(&digits) {
                assert_eq!(digits_value(word64, digits), value, "{:?}", String::from_utf8_lossy(word));
            }
        }
        // Every byte after one digit: a digit only when it is one.
        for byte in 0..=255u8 {
            let word = u64::from_le_bytes([b'7', byte, b'|', b'c', b'\n', b'a', b'b', b'c']);
            let want = if byte.is_ascii_digit() { 2 } else { 1 };
            assert_eq!(leading_digits(word), want, "byte {byte:#x}");
        }
    }

    #[test]
    fn reads_simple_lines_and_hands_over_the_rest() {
        let cases: &[(&str, Vec<Scanned<'static>>)] = &[
            ("a:1|c", vec![simple("a", Kind::Counter, Value::Number(1.0))]),
            ("a.b-c_d:12.5|ms\n", vec![simple("a.b-c_d", Kind::Timer, Value::Number(12.5))]),
            (
                "g:-3|g\r\nh:0.25|h",
                vec![
                    simple("g", Kind::Gauge, Value::GaugeDelta(-3.0)),
                    simple("h", Kind::Histogram, Value::Number(0.25)),
                ],
            ),
            ("\n\nd:7|d\n\n", vec![simple("d", Kind::Distribution, Value::Number(7.0))]),
            ("g:+3|g", vec![Scanned::Other(b"g:+3|g")]),
            ("t:-1|ms", vec![Scanned::Other(b"t:-1|ms")]),
            ("a b:1|c", vec![Scanned::Other(b"a b:1|c")]),
            (
                "a:1|c|@0.5\nb:2|c",
                vec![
                    sampled("a", Kind::Counter, Value::Number(1.0), 0.5),
                    simple("b", Kind::Counter, Value::Number(2.0)),
                ],
            ),
            ("t:3|ms|@.25\r\n", vec![sampled("t", Kind::Timer, Value::Number(3.0), 0.25)]),
            ("a:1|c|@0", vec![Scanned::Other(b"a:1|c|@0")]),
            ("a:1|c|@-1", vec![Scanned::Other(b"a:1|c|@-1")]),
            ("a:1|c|@", vec![Scanned::Other(b"a:1|c|@")]),
            ("a:1|c|@0.5|#t", vec![tagged("a", "t", 1.0, 0.5)]),
            ("a:1|c|#env:prod,host:h1\n", vec![tagged("a", "env:prod,host:h1", 1.0, 1.0)]),
            ("a:2|c|#a:,:b,x=y\r\n", vec![tagged("a", "a:,:b,x=y", 2.0, 1.0)]),
            ("a:1|c|#", vec![Scanned::Other(b"a:1|c|#")]),
            ("a:1|c|#t,", vec![Scanned::Other(b"a:1|c|#t,")]),
            ("a:1|c|#,t", vec![Scanned::Other(b"a:1|c|#,t")]),
            ("a:1|c|#a,,b", vec![Scanned::Other(b"a:1|c|#a,,b")]),
            ("a:1|c|#a:b:c", vec![Scanned::Other(b"a:1|c|#a:b:c")]),
            ("a:1|c|#role;x", vec![Scanned::Other(b"a:1|c|#role;x")]),
            ("a:1|c|#a b", vec![Scanned::Other(b"a:1|c|#a b")]),
            ("a:1|c|#t|@0.5", vec![Scanned::Other(b"a:1|c|#t|@0.5")]),
            ("a:1|c|#t|c:abc", vec![Scanned::Other(b"a:1|c|#t|c:abc")]),
            ("a:1", vec![Scanned::Other(b"a:1")]),
            ("a:1|cx\r\n", vec![Scanned::Other(b"a:1|cx")]),
            ("s:1|s", vec![Scanned::Other(b"s:1|s")]),
            (":1|c", vec![Scanned::Other(b":1|c")]),
            ("a:|c", vec![Scanned::Other(b"a:|c")]),
            ("a:1.2.3|c", vec![Scanned::Other(b"a:1.2.3|c")]),
            ("a:1234567890123456|c", vec![Scanned::Other(b"a:1234567890123456|c")]),
            ("a:000000000000000000000000000001|c", vec![Scanned::Other(b"a:000000000000000000000000000001|c")]),
            ("a:99999999999999999999999999999|c", vec![Scanned::Other(b"a:99999999999999999999999999999|c")]),
            ("a:1|c|@99999999999999999999999", vec![Scanned::Other(b"a:1|c|@99999999999999999999999")]),
            ("a:1|c:2|c", vec![Scanned::Other(b"a:1|c:2|c")]),
            ("a:1|c\r", vec![simple("a", Kind::Counter, Value::Number(1.0))]),
            (
                "a:.5|c\nb:5.|c",
                vec![simple("a", Kind::Counter, Value::Number(0.5)), simple("b", Kind::Counter, Value::Number(5.0))],
            ),
            ("\r\n", vec![]),
            ("", vec![]),
        ];
        for (packet, want) in cases {
            let got: Vec<_> = scan_lines(packet.as_bytes()).map(without_short_key).collect();
            assert_eq!(&got, want, "packet {packet:?}");
        }
    }

    /// A scanned line with its short key checked against its name, then dropped.
    fn without_short_key(scanned: Scanned<'_>) -> Scanned<'_> {
        match scanned {
            Scanned::Simple(metric) => {
                if let Some(short) = metric.short_key {
                    assert!(metric.tags.is_empty(), "{metric:?}: a short key only for a name alone");
                    assert_eq!(Some(short), ShortKey::new(metric.name.as_bytes()), "{metric:?}");
                }
                Scanned::Simple(SimpleMetric { short_key: None, ..metric })
            }
            other => other,
        }
    }

    #[test]
    fn lines_across_the_64_byte_blocks_split_as_lines_does() {
        // Names of every length from 1 to 150 (lines within one block, across two, over
        // several), endings `\n`, `\r\n` and empty lines between, and the last line without
        // its newline: the scanner's lines are `lines()`'s, each read as the full parser reads it.
        let mut packet = String::new();
        for length in 1..=150 {
            let name: String = (0..length).map(|at| (b'a' + (at % 26) as u8) as char).collect();
            let ending = ["\n", "\r\n", "\n\n", "\r\n\r\n\n"][length % 4];
            packet.push_str(&format!("{name}:{length}|c{ending}"));
        }
        packet.push_str("last:7|ms");
        let scanned: Vec<_> = scan_lines(packet.as_bytes()).map(without_short_key).collect();
        let split: Vec<&[u8]> = crate::lines(packet.as_bytes()).collect();
        assert_eq!(scanned.len(), split.len());
        for (line, (scanned, text)) in scanned.iter().zip(&split).enumerate() {
            let Scanned::Simple(metric) = scanned else { panic!("line {line}: {scanned:?}") };
            let text = std::str::from_utf8(text).expect("ASCII");
            let (name, rest) = text.split_once(':').expect("a colon");
            assert_eq!(metric.name, name, "line {line}");
            let value: f64 = rest.split('|').next().and_then(|v| v.parse().ok()).expect("a number");
            assert_eq!(metric.value, Value::Number(value), "line {line}");
        }
    }

    #[test]
    fn a_short_name_comes_in_short_form_where_sixteen_bytes_follow() {
        let cases: &[(&str, Option<&str>)] = &[
            ("bench.1:1|c\nbench.2:1|c\n", Some("bench.1")),
            ("a:1|c\n", None), // fewer than 16 bytes from the line's start
            ("fifteen.bytes.x:1|c\n", Some("fifteen.bytes.x")),
            ("sixteen.bytes.xy:1|c\n", None),
            ("a.b:1|c|#env:prod\n", None),
            ("a.b:1|c|@0.5\nbench.2:1|c", Some("a.b")),
            ("a.b:1.5|ms\n\n\n\n\n\n", Some("a.b")),
        ];
        for &(packet, want) in cases {
            let Some(Scanned::Simple(metric)) = scan_lines(packet.as_bytes()).next() else { panic!("{packet:?}") };
            let want = want.and_then(|name| ShortKey::new(name.as_bytes()));
            assert_eq!(metric.short_key, want, "{packet:?}");
        }
    }
}
