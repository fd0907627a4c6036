//! The histograms of one series' rows in a block, exact bin for bin.
//!
//! First the union of every bin the rows use, as dense circllhist keys (a varint count, the
//! first key, then the gaps between keys as varints). Then one bit stream, per row:
//!
//! - 7 bits: 127 for no histogram, 0 for an empty one, else `w`, the bits of its largest count;
//! - 1 bit: it uses the same bins as the previous histogram; if not, one bit per bin of the
//!   union saying which it uses;
//! - its counts, `w` bits each, in key order.
//!
//! A timer whose latencies keep to the same bins pays its counts' bits and a byte a row.

use circllhist::Histogram;

use super::bits::{put_varint, width_of, BitReader, BitWriter, ByteReader};
use super::Corrupt;

const NONE: u64 = 127;

/// Appends the histograms of a column (`None` where a row has none).
pub fn encode(histograms: &[Option<&Histogram>], out: &mut Vec<u8>) {
    let mut union: Vec<u16> = histograms.iter().flatten().flat_map(|h| h.keyed_bins().0.iter().copied()).collect();
    union.sort_unstable();
    union.dedup();
    put_varint(out, union.len() as u64);
    let mut previous = 0u16;
    for &key in &union {
        put_varint(out, u64::from(key - previous));
        previous = key;
    }
    let mut bits = BitWriter::new(out);
    let mut last_keys: &[u16] = &[];
    for histogram in histograms {
        let Some(histogram) = histogram else {
            bits.put(NONE, 7);
            continue;
        };
        let (keys, counts) = histogram.keyed_bins();
        let width = counts.iter().map(|&c| width_of(c)).max().unwrap_or(0);
        bits.put(u64::from(width), 7);
        if width == 0 {
            continue;
        }
        let same = keys == last_keys;
        bits.bit(same);
        if !same {
            let mut used = keys.iter().peekable();
            for key in &union {
                let hit = used.peek() == Some(&key);
                if hit {
                    used.next();
                }
                bits.bit(hit);
            }
            last_keys = keys;
        }
        counts.iter().for_each(|&count| bits.put(count, width));
    }
    bits.finish();
}

/// Reads `count` rows' histograms written by [`encode`].
pub fn decode(input: &mut ByteReader<'_>, count: usize) -> Result<Vec<Option<Histogram>>, Corrupt> {
    let size = input.count(circllhist::Bucket::COUNT)?;
    let mut union = Vec::with_capacity(size);
    let mut key = 0u64;
    for _ in 0..size {
        key = key.saturating_add(input.varint()?);
        if key >= circllhist::Bucket::COUNT as u64 {
            return Err(Corrupt("a histogram bin key out of range"));
        }
        union.push(key as u16);
    }
    let mut bits = BitReader::new(input.rest());
    let mut histograms = Vec::with_capacity(count);
    let mut last_keys: Vec<u16> = Vec::new();
    for _ in 0..count {
        let width = bits.get(7)?;
        if width == NONE {
            histograms.push(None);
            continue;
        }
        if width > 64 {
            return Err(Corrupt("a histogram count wider than 64 bits"));
        }
        if width == 0 {
            histograms.push(Some(Histogram::new()));
            continue;
        }
        if !bits.bit()? {
            last_keys.clear();
            for &key in &union {
                if bits.bit()? {
                    last_keys.push(key);
                }
            }
        }
        let mut counts = Vec::with_capacity(last_keys.len());
        for _ in &last_keys {
            counts.push(bits.get(width as u32)?);
        }
        let histogram = match Histogram::from_sorted_bins(last_keys.clone(), counts) {
            Some(histogram) => histogram,
            None => return Err(Corrupt("a histogram with a zero count")),
        };
        histograms.push(Some(histogram));
    }
    input.take(bits.bytes_used())?;
    Ok(histograms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values: &[(f64, u64)]) -> Histogram {
        let mut h = Histogram::new();
        values.iter().for_each(|&(v, c)| {
            h.insert(v, c);
        });
        h
    }

    #[test]
    fn histograms_round_trip_exactly() {
        let steady: Vec<Histogram> =
            (0..60).map(|i| histogram(&[(12.0, 3 + i % 5), (15.5, 40), (230.0, 1), (-4.0, 2)])).collect();
        let mut rows: Vec<Option<&Histogram>> = steady.iter().map(Some).collect();
        let empty = Histogram::new();
        let huge = histogram(&[(1.0, u64::MAX), (f64::NAN, 7), (0.0, 1)]);
        rows.insert(3, None);
        rows.insert(7, Some(&empty));
        rows.push(Some(&huge));
        let mut out = Vec::new();
        encode(&rows, &mut out);
        let mut input = ByteReader::new(&out);
        let back = decode(&mut input, rows.len()).unwrap();
        assert_eq!(input.position(), out.len());
        let want: Vec<Option<Histogram>> = rows.iter().map(|h| h.cloned()).collect();
        assert_eq!(back, want);
        // 60 rows of 4 bins reusing their bins: a byte of header and four 6-bit counts a row.
        assert!(out.len() <= 60 * 5, "{} bytes", out.len());
    }

    #[test]
    fn corrupt_input_is_an_error_not_a_panic() {
        let rows = [Some(histogram(&[(1.0, 5), (2.0, 9)]))];
        let mut out = Vec::new();
        encode(&rows.iter().map(Option::as_ref).collect::<Vec<_>>(), &mut out);
        for cut in 0..out.len() {
            let _ = decode(&mut ByteReader::new(&out[..cut]), 1);
        }
        let _ = decode(&mut ByteReader::new(&[2, 0xff, 0xff, 0x7f, 0, 0xff, 0xff]), 3);
    }
}
