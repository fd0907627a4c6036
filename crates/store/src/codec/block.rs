//! A block: the rows of a group of series over a span of time, in one blob.
//!
//! ```text
//! version byte (2; 1 before checksums, still read)
//! timestamps    varint count, then a number column (ascending unix seconds)
//! index         varint series count, then per series: varint id gap, varint section bytes
//! sections      per series, in id order:
//!                 presence byte: 0 = a row at every timestamp, 1 = a bitmap of them follows
//!                 field byte: bit i set when field i has a value in some row
//!                   (seconds, count, sum, sum_squares, min, max, value; bit 7: histograms)
//!                 a number column per field set, then the histogram column
//! checksum      (version 2) CRC32C of every byte before it, 4 bytes little-endian
//! ```
//!
//! A block whose checksum does not verify is corrupt, whatever its bytes would decode to: bit
//! rot that keeps a block decodable would otherwise be served as other numbers.
//!
//! Reading one series parses the index (two varints a series) and decodes its section alone.

use circllhist::Histogram;

use super::bits::{put_varint, BitWriter, ByteReader};
use super::{column, hists, Corrupt};
use crate::Row;

/// The version written: with a checksum.
const VERSION: u8 = 2;
/// The version written before checksums, still read.
const UNCHECKED_VERSION: u8 = 1;
/// The checksum's bytes at the end of a version 2 block.
const CHECKSUM_BYTES: usize = 4;
/// The most timestamps a block may have (a ten-minute raw block of 1 s flushes has 600): a
/// bound for what a corrupt block may make a reader allocate, not a size estimate (a column of
/// regular timestamps takes a few bytes whatever its length).
const MAX_TIMESTAMPS: usize = 1 << 16;
const FIELDS: usize = 7;
const HISTOGRAMS: u8 = 1 << 7;

/// The rows of one series, sorted by time, one row a timestamp.
pub type SeriesRows = (i64, Vec<Row>);

/// Encodes series (sorted by id, each one's rows by time) into a block.
pub fn encode<R: AsRef<[Row]>>(series: &[(i64, R)]) -> Vec<u8> {
    let mut timestamps: Vec<i64> = series.iter().flat_map(|(_, rows)| rows.as_ref().iter().map(|r| r.ts)).collect();
    timestamps.sort_unstable();
    timestamps.dedup();
    let mut out = vec![VERSION];
    put_varint(&mut out, timestamps.len() as u64);
    let as_numbers: Vec<f64> = timestamps.iter().map(|&t| t as f64).collect();
    column::encode(&as_numbers, &[], &mut out);
    let mut sections = Vec::new();
    let mut index = Vec::new();
    put_varint(&mut index, series.len() as u64);
    let mut previous = 0i64;
    let mut scratch = Vec::new();
    for (id, rows) in series {
        let before = sections.len();
        put_section(rows.as_ref(), &timestamps, &mut sections, &mut scratch);
        put_varint(&mut index, id.wrapping_sub(previous) as u64);
        put_varint(&mut index, (sections.len() - before) as u64);
        previous = *id;
    }
    out.extend_from_slice(&index);
    out.extend_from_slice(&sections);
    seal(&mut out);
    out
}

/// Appends the checksum of everything before it.
fn seal(block: &mut Vec<u8>) {
    let sum = crc32c::crc32c(block);
    block.extend_from_slice(&sum.to_le_bytes());
}

/// A block's bytes without its checksum, once the checksum verifies (version 2), or as they
/// are (version 1).
fn content(bytes: &[u8]) -> Result<&[u8], Corrupt> {
    match bytes.first() {
        Some(&VERSION) => {
            let split =
                bytes.len().checked_sub(CHECKSUM_BYTES).filter(|&at| at > 0).ok_or(Corrupt("a block cut short"))?;
            let (content, sum) = bytes.split_at(split);
            let written = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
            if crc32c::crc32c(content) != written {
                return Err(Corrupt("a checksum mismatch (the block changed after it was written)"));
            }
            Ok(content)
        }
        Some(&UNCHECKED_VERSION) => Ok(bytes),
        _ => Err(Corrupt("a block of an unknown version")),
    }
}

/// Every series of a block, with its rows.
pub fn decode_all(bytes: &[u8]) -> Result<Vec<SeriesRows>, Corrupt> {
    let mut series: Vec<SeriesRows> = Vec::new();
    decode_each(bytes, |id, row| match series.last_mut() {
        Some((last, rows)) if *last == id => rows.push(row),
        _ => series.push((id, vec![row])),
    })?;
    Ok(series)
}

/// Every row of a block, in series then time order, handed to `visit` with its series id.
pub fn decode_each(bytes: &[u8], mut visit: impl FnMut(i64, Row)) -> Result<(), Corrupt> {
    let (timestamps, entries, mut sections) = read_header(bytes)?;
    let mut scratch = Scratch::default();
    for (id, length) in entries {
        let section = sections.take(length)?;
        read_section(section, &timestamps, &mut scratch, |row| visit(id, row))?;
    }
    Ok(())
}

/// The rows of series `id` in a block (none when the block does not hold it).
pub fn decode_one(bytes: &[u8], id: i64) -> Result<Vec<Row>, Corrupt> {
    let (timestamps, entries, mut sections) = read_header(bytes)?;
    let mut rows = Vec::new();
    for (entry, length) in entries {
        let section = sections.take(length)?;
        if entry == id {
            read_section(section, &timestamps, &mut Scratch::default(), |row| rows.push(row))?;
            break;
        }
    }
    Ok(rows)
}

/// A block with some series taken out: its bytes (`None` when no series is left) and the rows
/// taken out.
#[derive(Debug, PartialEq, Eq)]
pub struct Cut {
    /// The block without them; `None` when nothing is left.
    pub bytes: Option<Vec<u8>>,
    /// Rows of the series taken out.
    pub rows: u64,
}

/// The block without the series `drop` picks, or `None` when it holds none of them. The other
/// sections are copied byte for byte (their timestamps stay the block's).
pub fn without(bytes: &[u8], drop: impl Fn(i64) -> bool) -> Result<Option<Cut>, Corrupt> {
    let (timestamps, entries, mut sections) = read_header(bytes)?;
    if !entries.iter().any(|&(id, _)| drop(id)) {
        return Ok(None);
    }
    let bytes = content(bytes)?;
    let index_start = timestamps_end(bytes)?;
    let kept_count = entries.iter().filter(|&&(id, _)| !drop(id)).count();
    let mut out = bytes[..index_start].to_vec();
    out[0] = VERSION;
    put_varint(&mut out, kept_count as u64);
    let mut kept_sections = Vec::new();
    let (mut previous, mut rows) = (0i64, 0u64);
    for (id, length) in entries {
        let section = sections.take(length)?;
        if drop(id) {
            rows += section_rows(section, timestamps.len())?;
            continue;
        }
        put_varint(&mut out, id.wrapping_sub(previous) as u64);
        put_varint(&mut out, length as u64);
        kept_sections.extend_from_slice(section);
        previous = id;
    }
    out.extend_from_slice(&kept_sections);
    seal(&mut out);
    Ok(Some(Cut { bytes: (kept_count > 0).then_some(out), rows }))
}

/// The ids of the series a block holds, ascending.
pub fn series_ids(bytes: &[u8]) -> Result<Vec<i64>, Corrupt> {
    let (_, entries, _) = read_header(bytes)?;
    Ok(entries.into_iter().map(|(id, _)| id).collect())
}

/// Where a block's index starts (after its version and timestamps).
fn timestamps_end(bytes: &[u8]) -> Result<usize, Corrupt> {
    let mut input = ByteReader::new(bytes);
    input.byte()?;
    let count = input.count(MAX_TIMESTAMPS)?;
    column::decode(&mut input, count)?;
    Ok(input.position())
}

/// How many rows a section holds (its presence byte and bitmap tell).
fn section_rows(section: &[u8], timestamps: usize) -> Result<u64, Corrupt> {
    let mut input = ByteReader::new(section);
    match input.byte()? {
        0 => Ok(timestamps as u64),
        1 => {
            let bitmap = input.take(timestamps.div_ceil(8))?;
            let mut bits = super::bits::BitReader::new(bitmap);
            let mut rows = 0;
            for _ in 0..timestamps {
                rows += u64::from(bits.bit()?);
            }
            Ok(rows)
        }
        _ => Err(Corrupt("an unknown presence flag")),
    }
}

/// A block's timestamps, its index as `(id, section length)`, and a reader at the first section.
type Header<'a> = (Vec<i64>, Vec<(i64, usize)>, ByteReader<'a>);

fn read_header(bytes: &[u8]) -> Result<Header<'_>, Corrupt> {
    let bytes = content(bytes)?;
    let mut input = ByteReader::new(bytes);
    input.byte()?; // the version, checked by `content`
    let count = input.count(MAX_TIMESTAMPS)?;
    let numbers = column::decode(&mut input, count)?;
    let whole = numbers.iter().all(|t| t.fract() == 0.0 && t.abs() < 9e15);
    if !whole || numbers.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Corrupt("timestamps that are not whole seconds in ascending order"));
    }
    let timestamps = numbers.into_iter().map(|t| t as i64).collect();
    let series = input.count(bytes.len())?;
    let mut entries: Vec<(i64, usize)> = Vec::with_capacity(series);
    let mut id = 0i64;
    for _ in 0..series {
        id = id.checked_add(input.varint()? as i64).ok_or(Corrupt("a series id out of range"))?;
        if entries.last().is_some_and(|&(last, _)| last >= id) {
            return Err(Corrupt("series ids not in ascending order"));
        }
        entries.push((id, input.count(bytes.len())?));
    }
    Ok((timestamps, entries, input))
}

/// One series' section; `scratch` holds its columns while they are written.
fn put_section(rows: &[Row], timestamps: &[i64], out: &mut Vec<u8>, scratch: &mut Vec<f64>) {
    if rows.len() == timestamps.len() {
        out.push(0);
    } else {
        out.push(1);
        let mut bitmap = BitWriter::new(out);
        let mut next = rows.iter().map(|r| r.ts).peekable();
        for &ts in timestamps {
            let here = next.peek() == Some(&ts);
            if here {
                next.next();
            }
            bitmap.bit(here);
        }
        bitmap.finish();
    }
    scratch.clear();
    for field in 0..FIELDS {
        scratch.extend(rows.iter().map(|row| field_of(row, field)));
    }
    let column = |field: usize| &scratch[field * rows.len()..(field + 1) * rows.len()];
    let has_histograms = rows.iter().any(|r| r.histogram.is_some());
    let mask = (0..FIELDS).fold(0u8, |mask, f| mask | (u8::from(column(f).iter().any(|v| !v.is_nan())) << f));
    out.push(mask | if has_histograms { HISTOGRAMS } else { 0 });
    let mut written: [&[f64]; FIELDS] = [&[]; FIELDS];
    for (count, field) in (0..FIELDS).filter(|&field| mask & (1 << field) != 0).enumerate() {
        column::encode(column(field), &written[..count], out);
        written[count] = column(field);
    }
    if has_histograms {
        let histograms: Vec<Option<&Histogram>> = rows.iter().map(|r| r.histogram.as_ref()).collect();
        hists::encode(&histograms, out);
    }
}

/// Buffers one section's decoding reuses for the next.
#[derive(Default)]
struct Scratch {
    times: Vec<i64>,
    flat: Vec<f64>,
}

/// Decodes a section, handing each row to `visit`.
fn read_section(
    section: &[u8],
    timestamps: &[i64],
    scratch: &mut Scratch,
    mut visit: impl FnMut(Row),
) -> Result<(), Corrupt> {
    let mut input = ByteReader::new(section);
    scratch.times.clear();
    match input.byte()? {
        0 => scratch.times.extend_from_slice(timestamps),
        1 => {
            let bitmap = input.take(timestamps.len().div_ceil(8))?;
            let mut bits = super::bits::BitReader::new(bitmap);
            for &ts in timestamps {
                if bits.bit()? {
                    scratch.times.push(ts);
                }
            }
        }
        _ => return Err(Corrupt("an unknown presence flag")),
    }
    let rows = scratch.times.len();
    let mask = input.byte()?;
    scratch.flat.clear();
    let mut starts = [0usize; FIELDS];
    let mut fields = [usize::MAX; FIELDS];
    let mut count = 0;
    for (field, slot) in fields.iter_mut().enumerate() {
        if mask & (1 << field) != 0 {
            starts[count] = scratch.flat.len();
            *slot = scratch.flat.len();
            column::decode_into(&mut input, rows, &mut scratch.flat, &starts[..count])?;
            count += 1;
        }
    }
    let mut histograms = if mask & HISTOGRAMS != 0 { hists::decode(&mut input, rows)? } else { Vec::new() };
    let flat = &scratch.flat;
    let value =
        |field: usize, row: usize| if fields[field] == usize::MAX { f64::NAN } else { flat[fields[field] + row] };
    let mut histograms = histograms.drain(..);
    for (i, &ts) in scratch.times.iter().enumerate() {
        visit(Row {
            ts,
            seconds: value(0, i),
            count: value(1, i),
            sum: value(2, i),
            sum_squares: value(3, i),
            min: value(4, i),
            max: value(5, i),
            value: value(6, i),
            histogram: histograms.next().flatten(),
        });
    }
    Ok(())
}

fn field_of(row: &Row, field: usize) -> f64 {
    match field {
        0 => row.seconds,
        1 => row.count,
        2 => row.sum,
        3 => row.sum_squares,
        4 => row.min,
        5 => row.max,
        _ => row.value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_trip_and_find_one_series() {
        let mut hist = Histogram::new();
        hist.insert(12.5, 3);
        let timer = Row {
            seconds: 10.0,
            count: 3.0,
            sum: 37.5,
            sum_squares: 468.75,
            min: 12.5,
            max: 12.5,
            value: 3.0,
            histogram: Some(hist),
            ..Row::empty(1010)
        };
        let series: Vec<SeriesRows> = vec![
            (3, (1..=6).map(|i| Row::counter(1000 + 10 * i, (i * 7) as f64)).collect()),
            (9, vec![Row::counter(1020, 1.0), Row::counter(1050, 0.0)]),
            (40, vec![timer.clone(), Row { histogram: Some(Histogram::new()), ..Row::empty(1040) }]),
            (41, vec![Row { value: 21.37, min: 21.37, max: 21.37, seconds: 10.0, ..Row::empty(1060) }]),
        ];
        let bytes = encode(&series);
        assert_eq!(format!("{:?}", decode_all(&bytes).unwrap()), format!("{series:?}"));
        // Many regular timestamps take a few bytes: an idle counter over 360 flushes is a
        // block of about 20 bytes, and it decodes.
        let idle: Vec<SeriesRows> = vec![(7, (1..=360).map(|i| Row::counter(1000 + 10 * i, 0.0)).collect())];
        let small = encode(&idle);
        assert!(small.len() < 24, "{} bytes", small.len());
        assert_eq!(decode_all(&small).unwrap()[0].1.len(), 360);
        assert_eq!(format!("{:?}", decode_one(&bytes, 40).unwrap()), format!("{:?}", series[2].1));
        assert!(decode_one(&bytes, 5).unwrap().is_empty());
        // Taking series out copies the others' sections as they are.
        assert_eq!(without(&bytes, |id| id == 5).unwrap(), None);
        let cut = without(&bytes, |id| id == 9 || id == 40).unwrap().unwrap();
        assert_eq!(cut.rows, 4);
        let kept = [series[0].clone(), series[3].clone()];
        assert_eq!(format!("{:?}", decode_all(&cut.bytes.unwrap()).unwrap()), format!("{kept:?}"));
        assert_eq!(without(&bytes, |_| true).unwrap(), Some(Cut { bytes: None, rows: 11 }));
        for cut in 0..bytes.len() {
            let _ = decode_all(&bytes[..cut]);
        }
        // The format is pinned: a store written by this version is read by the next. The same
        // bytes seed the fuzz target (HISTD_BLESS=1 rewrites them after a deliberate change).
        let seed = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus-seeds/store_block/v2.block");
        if std::env::var_os("HISTD_BLESS").is_some() {
            std::fs::create_dir_all(std::path::Path::new(seed).parent().unwrap()).unwrap();
            std::fs::write(seed, &bytes).unwrap();
        }
        assert_eq!(std::fs::read(seed).unwrap(), bytes, "block format 2 changed: {seed}");
        // Blocks written before checksums (format 1, pinned on 2026-11-24) still read, and
        // taking a series out of one writes format 2.
        let v1 = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus-seeds/store_block/v1.block"))
            .unwrap();
        assert_eq!(format!("{:?}", decode_all(&v1).unwrap()), format!("{:?}", decode_all(&bytes).unwrap()));
        let cut = without(&v1, |id| id == 9).unwrap().unwrap().bytes.unwrap();
        assert_eq!(cut[0], VERSION);
        assert_eq!(decode_all(&cut).unwrap().len(), series.len() - 1);
    }

    /// Any flipped bit, anywhere in a block, makes it corrupt: never other numbers.
    #[test]
    fn every_flipped_bit_is_found() {
        let rows = |ts: i64, value: f64| Row { seconds: 10.0, count: 1.0, value, ..Row::empty(ts) };
        let series = vec![(3i64, vec![rows(10, 1000.0), rows(20, 1000.0)]), (7, vec![rows(10, 5.0)])];
        let bytes = encode(&series);
        for bit in 0..bytes.len() * 8 {
            let mut damaged = bytes.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(decode_all(&damaged).is_err(), "bit {bit}");
            assert!(decode_one(&damaged, 3).is_err(), "bit {bit}");
            assert!(without(&damaged, |id| id == 7).is_err(), "bit {bit}");
        }
    }
}
