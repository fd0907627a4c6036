//! A block: the rows of a group of series over a span of time, in one blob.
//!
//! ```text
//! version byte (4; 2 with a checksum of its bytes alone, 1 before checksums, both still read;
//!               3 is never written: one flipped bit from 1, which has no checksum)
//! timestamps    varint count, then a number column (ascending unix seconds)
//! index         varint series count, then per series: varint id gap, varint section bytes
//! sections      per series, in id order:
//!                 presence byte: 0 = a row at every timestamp, 1 = a bitmap of them follows
//!                 field byte: bit i set when field i has a value in some row
//!                   (seconds, count, sum, sum_squares, min, max, value; bit 7: histograms)
//!                 a number column per field set, then the histogram column
//! checksum      (version 4) CRC32C of the block's place (resolution, group, start and span,
//!               each 8 bytes little-endian) then every byte before it, 4 bytes little-endian;
//!               (version 2) CRC32C of every byte before it
//! ```
//!
//! A block whose checksum does not verify is corrupt, whatever its bytes would decode to: bit
//! rot that keeps a block decodable would otherwise be served as other numbers, and a block
//! moved to another row (another group's, or another time's) would lose its points unseen.
//!
//! Reading one series parses the index (two varints a series) and decodes its section alone.

use circllhist::Histogram;

use super::bits::{put_varint, BitWriter, ByteReader};
use super::{column, hists, Corrupt};
use crate::Row;

/// The version written: with a checksum of its place and bytes (two bits from each version
/// still read, so no flipped bit makes it one of them).
const VERSION: u8 = 4;
/// The version written before the checksum covered the block's place, still read.
const UNPLACED_VERSION: u8 = 2;
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

/// Where a block is kept (its row's key): its checksum covers it, so a block read from any
/// other row does not verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// The resolution's code.
    pub resolution: i64,
    /// The group.
    pub grp: i64,
    /// The first second it covers.
    pub start: i64,
    /// The seconds it covers.
    pub span: i64,
}

impl Place {
    /// The checksum of the place, the start of a version 4 block's checksum.
    fn checksum(&self) -> u32 {
        [self.resolution, self.grp, self.start, self.span]
            .iter()
            .fold(0, |sum, number| crc32c::crc32c_append(sum, &number.to_le_bytes()))
    }
}

/// The rows of one series, sorted by time, one row a timestamp.
pub type SeriesRows = (i64, Vec<Row>);

/// Encodes series (sorted by id, each one's rows by time) into a block kept at `place`.
pub fn encode<R: AsRef<[Row]>>(series: &[(i64, R)], place: &Place) -> Vec<u8> {
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
    seal(&mut out, place);
    out
}

/// Appends the checksum of the place and everything before it.
fn seal(block: &mut Vec<u8>, place: &Place) {
    let sum = crc32c::crc32c_append(place.checksum(), block);
    block.extend_from_slice(&sum.to_le_bytes());
}

/// A block's bytes without its checksum, once the checksum verifies (versions 3 and 2), or as
/// they are (version 1).
fn content<'b>(bytes: &'b [u8], place: &Place) -> Result<&'b [u8], Corrupt> {
    let version = bytes.first().copied();
    if version == Some(UNCHECKED_VERSION) {
        return Ok(bytes);
    }
    let start = match version {
        Some(VERSION) => place.checksum(),
        Some(UNPLACED_VERSION) => 0,
        _ => return Err(Corrupt("a block of an unknown version")),
    };
    let split = bytes.len().checked_sub(CHECKSUM_BYTES).filter(|&at| at > 0).ok_or(Corrupt("a block cut short"))?;
    let (content, sum) = bytes.split_at(split);
    let written = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
    if crc32c::crc32c_append(start, content) != written {
        return Err(Corrupt("a checksum mismatch (the block changed after it was written, or was moved from its row)"));
    }
    Ok(content)
}

/// Every series of a block, with its rows.
pub fn decode_all(bytes: &[u8], place: &Place) -> Result<Vec<SeriesRows>, Corrupt> {
    let mut series: Vec<SeriesRows> = Vec::new();
    decode_each(bytes, place, |id, row| match series.last_mut() {
        Some((last, rows)) if *last == id => rows.push(row),
        _ => series.push((id, vec![row])),
    })?;
    Ok(series)
}

/// Every row of a block, in series then time order, handed to `visit` with its series id.
pub fn decode_each(bytes: &[u8], place: &Place, mut visit: impl FnMut(i64, Row)) -> Result<(), Corrupt> {
    let (timestamps, entries, mut sections) = read_header(bytes, place)?;
    let mut scratch = Scratch::default();
    for (id, length) in entries {
        let section = sections.take(length)?;
        read_section(section, &timestamps, &mut scratch, |row| visit(id, row))?;
    }
    Ok(())
}

/// The rows of series `id` in a block (none when the block does not hold it).
pub fn decode_one(bytes: &[u8], place: &Place, id: i64) -> Result<Vec<Row>, Corrupt> {
    let (timestamps, entries, mut sections) = read_header(bytes, place)?;
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
pub fn without(bytes: &[u8], place: &Place, drop: impl Fn(i64) -> bool) -> Result<Option<Cut>, Corrupt> {
    let (timestamps, entries, mut sections) = read_header(bytes, place)?;
    if !entries.iter().any(|&(id, _)| drop(id)) {
        return Ok(None);
    }
    let bytes = content(bytes, place)?;
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
    seal(&mut out, place);
    Ok(Some(Cut { bytes: (kept_count > 0).then_some(out), rows }))
}

/// The ids of the series a block holds, ascending.
pub fn series_ids(bytes: &[u8], place: &Place) -> Result<Vec<i64>, Corrupt> {
    let (_, entries, _) = read_header(bytes, place)?;
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

fn read_header<'b>(bytes: &'b [u8], place: &Place) -> Result<Header<'b>, Corrupt> {
    let bytes = content(bytes, place)?;
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

    /// Where the test's blocks are kept.
    const HERE: Place = Place { resolution: 0, grp: 7, start: 1_700_000_000, span: 600 };

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
        let bytes = encode(&series, &HERE);
        assert_eq!(format!("{:?}", decode_all(&bytes, &HERE).unwrap()), format!("{series:?}"));
        // Many regular timestamps take a few bytes: an idle counter over 360 flushes is a
        // block of about 20 bytes, and it decodes.
        let idle: Vec<SeriesRows> = vec![(7, (1..=360).map(|i| Row::counter(1000 + 10 * i, 0.0)).collect())];
        let small = encode(&idle, &HERE);
        assert!(small.len() < 24, "{} bytes", small.len());
        assert_eq!(decode_all(&small, &HERE).unwrap()[0].1.len(), 360);
        assert_eq!(format!("{:?}", decode_one(&bytes, &HERE, 40).unwrap()), format!("{:?}", series[2].1));
        assert!(decode_one(&bytes, &HERE, 5).unwrap().is_empty());
        // Taking series out copies the others' sections as they are.
        assert_eq!(without(&bytes, &HERE, |id| id == 5).unwrap(), None);
        let cut = without(&bytes, &HERE, |id| id == 9 || id == 40).unwrap().unwrap();
        assert_eq!(cut.rows, 4);
        let kept = [series[0].clone(), series[3].clone()];
        assert_eq!(format!("{:?}", decode_all(&cut.bytes.unwrap(), &HERE).unwrap()), format!("{kept:?}"));
        assert_eq!(without(&bytes, &HERE, |_| true).unwrap(), Some(Cut { bytes: None, rows: 11 }));
        for cut in 0..bytes.len() {
            let _ = decode_all(&bytes[..cut], &HERE);
        }
        // The format is pinned: a store written by this version is read by the next. The same
        // bytes seed the fuzz target (HISTD_BLESS=1 rewrites them after a deliberate change).
        let seed = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus-seeds/store_block/v4.block");
        if std::env::var_os("HISTD_BLESS").is_some() {
            std::fs::create_dir_all(std::path::Path::new(seed).parent().unwrap()).unwrap();
            std::fs::write(seed, &bytes).unwrap();
        }
        assert_eq!(std::fs::read(seed).unwrap(), bytes, "block format 4 changed: {seed}");
        // Blocks written before checksums (format 1, pinned on 2026-11-24) and before the
        // checksum covered the place (format 2, pinned on 2026-11-26) still read, wherever they
        // are; taking a series out of one writes format 4.
        let pinned = |name: &str| {
            std::fs::read(format!("{}/../../fuzz/corpus-seeds/store_block/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
        };
        let elsewhere = Place { grp: 8, ..HERE };
        for old in [pinned("v1.block"), pinned("v2.block")] {
            let read = decode_all(&old, &elsewhere).unwrap();
            assert_eq!(format!("{read:?}"), format!("{:?}", decode_all(&bytes, &HERE).unwrap()));
            let cut = without(&old, &HERE, |id| id == 9).unwrap().unwrap().bytes.unwrap();
            assert_eq!(cut[0], VERSION);
            assert_eq!(decode_all(&cut, &HERE).unwrap().len(), series.len() - 1);
        }
    }

    /// Probe P10 (issue 48): a block read from another row than its own (another group's,
    /// another start, resolution or span) does not verify: its points are counted as a damaged
    /// block's, never silently missing from the series that looked for them.
    #[test]
    fn a_block_read_from_another_place_is_corrupt() {
        let series = vec![(3i64, vec![Row { count: 1.0, ..Row::empty(1_700_000_010) }])];
        let bytes = encode(&series, &HERE);
        assert!(decode_all(&bytes, &HERE).is_ok());
        for elsewhere in [
            Place { grp: 8, ..HERE },
            Place { start: HERE.start + 600, ..HERE },
            Place { resolution: 1, ..HERE },
            Place { span: 3600, ..HERE },
        ] {
            assert!(decode_all(&bytes, &elsewhere).is_err(), "{elsewhere:?}");
            assert!(decode_one(&bytes, &elsewhere, 3).is_err(), "{elsewhere:?}");
            assert!(series_ids(&bytes, &elsewhere).is_err(), "{elsewhere:?}");
        }
    }

    /// Any flipped bit, anywhere in a block, makes it corrupt: never other numbers.
    #[test]
    fn every_flipped_bit_is_found() {
        let rows = |ts: i64, value: f64| Row { seconds: 10.0, count: 1.0, value, ..Row::empty(ts) };
        let series = vec![(3i64, vec![rows(10, 1000.0), rows(20, 1000.0)]), (7, vec![rows(10, 5.0)])];
        let bytes = encode(&series, &HERE);
        for bit in 0..bytes.len() * 8 {
            let mut damaged = bytes.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(decode_all(&damaged, &HERE).is_err(), "bit {bit}");
            assert!(decode_one(&damaged, &HERE, 3).is_err(), "bit {bit}");
            assert!(without(&damaged, &HERE, |id| id == 7).is_err(), "bit {bit}");
        }
    }
}
