//! The store file's first page: SQLite's header (the page size, the file's format) and the
//! schema (where each table's b-tree begins). Damage there makes SQLite refuse the whole file
//! although every other page is whole, so this module checks the header as histd writes it
//! ([`header_damage`]) and, when the first page is damaged, writes a new one from what the
//! rest of the file says ([`rebuild`]), for the salvage to read the other pages through.
//!
//! A store is made with `auto_vacuum = INCREMENTAL`, so page 2 is a pointer map: an entry for
//! each later page saying what it is (a b-tree's root, a page inside a b-tree, an overflow or
//! a free page). The roots are read there; which table each one is, from the shape of a row it
//! holds (how many columns, which hold text, numbers or bytes): histd's tables differ in
//! shape. SQLite itself writes the new first page (a scratch database of the same page size
//! whose schema names those roots); its header is then given the damaged file's size. The
//! first page as it was is kept beside the file (`.first-page`), and the write-ahead log, if
//! any, is not read: its transactions were not yet in the file.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use crate::StoreError;

/// The bytes of SQLite's file header.
const HEADER: usize = 100;

/// What a table's b-tree page (`0x0D` a leaf, `0x05` an interior page) starts with.
const TABLE_LEAF: u8 = 0x0D;
const TABLE_INTERIOR: u8 = 0x05;
const INDEX_LEAF: u8 = 0x0A;
const INDEX_INTERIOR: u8 = 0x02;

/// Pages of a b-tree read at most, looking for a row that shows which table it is.
const PAGES_LOOKED_AT: usize = 64;

/// The tables a first page is rebuilt with: their names and their columns in the order
/// rows hold them (every format-2 store's order; rows written before a column was added
/// read it as null), without the constraints that need an index (the salvage reads the
/// tables by rowid only).
const TABLES: [(&str, &str); 6] = [
    (
        "series",
        "CREATE TABLE series (id INTEGER PRIMARY KEY, name TEXT, tags TEXT, kind TEXT, grp INTEGER, \
         last_day INTEGER, checksum INTEGER)",
    ),
    ("meta", "CREATE TABLE meta (key TEXT, value INTEGER)"),
    (
        "groups",
        "CREATE TABLE groups (grp INTEGER PRIMARY KEY, kind TEXT, members INTEGER, compacted_until INTEGER, \
         hour_until INTEGER DEFAULT 0, checksum INTEGER)",
    ),
    (
        "blocks",
        "CREATE TABLE blocks (resolution INTEGER, grp INTEGER, start INTEGER, span INTEGER, points INTEGER, data BLOB)",
    ),
    ("log_positions", "CREATE TABLE log_positions (log TEXT, partition INTEGER, through INTEGER, beyond TEXT)"),
    (
        "damage",
        "CREATE TABLE damage (id INTEGER PRIMARY KEY, found INTEGER, what TEXT, resolution INTEGER, grp INTEGER, \
         start INTEGER, points INTEGER, detail TEXT, acknowledged INTEGER, checksum INTEGER)",
    ),
];

/// What is wrong with the header of the store file at `path` as histd writes it (none: it
/// holds, or there is no header yet to check). SQLite accepts some damage here and misreads
/// the file after it (a text encoding of UTF-16, a page size or reserved space changed).
pub fn header_damage(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let length = file.metadata().ok()?.len();
    if length < HEADER as u64 {
        return None;
    }
    let mut header = [0u8; HEADER];
    file.read_exact_at(&mut header, 0).ok()?;
    let wal_empty = std::fs::metadata(crate::usage::wal_path(path)).map_or(true, |m| m.len() == 0);
    judge_header(&header, length, wal_empty).err()
}

/// The checks of [`header_damage`] on the header's bytes, the file's length and whether a
/// write-ahead log beside it holds anything (while one does, the file may be shorter than
/// the header says).
fn judge_header(header: &[u8; HEADER], length: u64, wal_empty: bool) -> Result<(), String> {
    let word = |at: usize| u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]]);
    if &header[..16] != b"SQLite format 3\0" {
        return Err("the first bytes are not SQLite's".to_string());
    }
    // A write-ahead log that holds frames may hold the first page too (a new store's tables
    // are there until the first checkpoint): the file's header is not the one read.
    if !wal_empty {
        return Ok(());
    }
    // A database with no schema yet (made, nothing written): nothing to judge.
    if word(44) == 0 && word(56) == 0 {
        return Ok(());
    }
    let page_size = page_size_of(header).ok_or("the page size is not one SQLite writes")?;
    if !matches!((header[18], header[19]), (1 | 2, 1 | 2)) {
        return Err(format!("the file format versions {} and {} are unknown", header[18], header[19]));
    }
    if header[20] != 0 || header[21..24] != [64, 32, 32] {
        return Err("the reserved space or the payload fractions are not SQLite's defaults".to_string());
    }
    if !(1..=4).contains(&word(44)) {
        return Err(format!("the schema format {} is unknown", word(44)));
    }
    if word(56) != 1 {
        return Err(format!("the text encoding {} is not UTF-8, the only one histd writes", word(56)));
    }
    let size_valid = word(92) == word(24) && word(28) != 0;
    if size_valid && wal_empty && u64::from(word(28)) * page_size as u64 > length {
        return Err(format!("the header counts {} pages, the file holds {}", word(28), length / page_size as u64));
    }
    Ok(())
}

/// The page size a header names, if it is one SQLite writes (512 to 65,536, a power of two).
fn page_size_of(header: &[u8]) -> Option<usize> {
    match u16::from_be_bytes([header[16], header[17]]) {
        1 => Some(65_536),
        size if size >= 512 && size.is_power_of_two() => Some(usize::from(size)),
        _ => None,
    }
}

/// What a rebuilt first page names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rebuilt {
    /// The page size found.
    pub page_size: usize,
    /// Each table found and its root page.
    pub tables: Vec<(&'static str, u32)>,
    /// Where the first page as it was is kept.
    pub kept: PathBuf,
}

/// Writes a new first page into the damaged store file at `path` from its pointer map and
/// its tables' rows (module doc); the page as it was is kept as `<path>.first-page`. An error
/// when the file has no readable pointer map (a store made without `auto_vacuum`, or page 2
/// damaged too) or no table is recognised.
pub fn rebuild(path: &Path) -> Result<Rebuilt, StoreError> {
    let file = OpenOptions::new().read(true).write(true).open(path).map_err(io_failed)?;
    let length = file.metadata().map_err(io_failed)?.len();
    let mut header = [0u8; HEADER];
    file.read_exact_at(&mut header, 0).map_err(|_| refused("the file is shorter than a header"))?;
    let read_page = |page_size: usize, number: u32| -> Option<Vec<u8>> {
        let mut bytes = vec![0u8; page_size];
        file.read_exact_at(&mut bytes, (u64::from(number) - 1) * page_size as u64).ok()?;
        Some(bytes)
    };
    // The header's page size first; else each one SQLite writes, the default first.
    let candidates = page_size_of(&header).into_iter().chain([4096, 1024, 2048, 8192, 16_384, 32_768, 65_536, 512]);
    let (page_size, tables) = candidates
        .filter_map(|page_size| {
            let pages = u32::try_from(length / page_size as u64).ok()?;
            let roots = roots_in(&read_page(page_size, 2)?, pages)?;
            let tables = name_tables(&roots, pages, |number| read_page(page_size, number));
            (!tables.is_empty()).then_some((page_size, tables))
        })
        .next()
        .ok_or_else(|| refused("no pointer map names a table (page 2 is damaged too, or the store has none)"))?;
    let pages = u32::try_from(length / page_size as u64).map_err(|_| refused("the file is too large"))?;
    let first = first_page(path, page_size, pages, &tables)?;
    let kept = PathBuf::from(format!("{}.first-page", path.display()));
    if !kept.exists() {
        let mut old = vec![0u8; page_size.min(length as usize)];
        file.read_exact_at(&mut old, 0).map_err(io_failed)?;
        std::fs::write(&kept, &old).map_err(io_failed)?;
    }
    file.write_all_at(&first, 0).map_err(io_failed)?;
    file.sync_all().map_err(io_failed)?;
    Ok(Rebuilt { page_size, tables, kept })
}

fn io_failed(error: std::io::Error) -> StoreError {
    refused(&error.to_string())
}

fn refused(why: &str) -> StoreError {
    StoreError::Salvage(format!("the first page cannot be rebuilt: {why}"))
}

/// The roots a pointer map page (page 2) names, in page order; none when it does not read as
/// one (an entry of an unknown kind, a parent past the file's end).
fn roots_in(map: &[u8], pages: u32) -> Option<Vec<u32>> {
    let mut roots = Vec::new();
    for (index, entry) in map.chunks_exact(5).enumerate() {
        let page = 3 + index as u32;
        if page > pages {
            break;
        }
        let parent = u32::from_be_bytes([entry[1], entry[2], entry[3], entry[4]]);
        match entry[0] {
            1 if parent == 0 => roots.push(page),
            2..=5 if parent <= pages => {}
            // Pages the map does not describe yet (a file grown past the map is not a store).
            0 if parent == 0 => {}
            _ => return None,
        }
    }
    (!roots.is_empty()).then_some(roots)
}

/// Which of histd's tables each root holds, judged by a row of each: the tables recognised,
/// with their roots. A root whose tree holds no row is the table left over, when exactly one
/// is left over.
fn name_tables(roots: &[u32], pages: u32, read: impl Fn(u32) -> Option<Vec<u8>>) -> Vec<(&'static str, u32)> {
    let mut found: Vec<(&'static str, u32)> = Vec::new();
    let mut empty = Vec::new();
    for &root in roots {
        let Some(page) = read(root) else { continue };
        match page.first() {
            Some(&TABLE_LEAF | &TABLE_INTERIOR) => match first_row_shape(root, pages, &read) {
                Some(shape) => {
                    if let Some(name) = table_of(&shape).filter(|name| found.iter().all(|(seen, _)| seen != name)) {
                        found.push((name, root));
                    }
                }
                None if page[0] == TABLE_LEAF && cell_count(&page, root) == 0 => empty.push(root),
                None => {}
            },
            // Indexes are rebuilt by the store the salvage writes into.
            Some(&INDEX_LEAF | &INDEX_INTERIOR) => {}
            _ => {}
        }
    }
    let missing: Vec<&'static str> =
        TABLES.iter().map(|(name, _)| *name).filter(|name| found.iter().all(|(seen, _)| seen != name)).collect();
    if let ([root], [name]) = (empty.as_slice(), missing.as_slice()) {
        found.push((name, *root));
    }
    found
}

/// The b-tree header's offset in page `number` (page 1 has the file header before it).
fn tree_header(number: u32) -> usize {
    if number == 1 {
        HEADER
    } else {
        0
    }
}

fn cell_count(page: &[u8], number: u32) -> usize {
    let at = tree_header(number);
    page.get(at + 3..at + 5).map_or(0, |b| usize::from(u16::from_be_bytes([b[0], b[1]])))
}

/// The serial types (SQLite's column type codes) of the first row found in the table b-tree
/// rooted at `root`, looking at up to [`PAGES_LOOKED_AT`] pages, depth first.
fn first_row_shape(root: u32, pages: u32, read: &impl Fn(u32) -> Option<Vec<u8>>) -> Option<Vec<u64>> {
    let mut stack = vec![root];
    let mut looked = 0;
    while let Some(number) = stack.pop() {
        looked += 1;
        if looked > PAGES_LOOKED_AT {
            return None;
        }
        let Some(page) = read(number) else { continue };
        let at = tree_header(number);
        let cells = cell_count(&page, number);
        match page.get(at) {
            Some(&TABLE_LEAF) => {
                for cell in 0..cells {
                    if let Some(shape) =
                        cell_offset(&page, at + 8, cell).and_then(|offset| leaf_row_shape(&page, offset))
                    {
                        return Some(shape);
                    }
                }
            }
            Some(&TABLE_INTERIOR) => {
                let word = |at: usize| page.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                let mut children: Vec<u32> = (0..cells)
                    .filter_map(|cell| cell_offset(&page, at + 12, cell).and_then(word))
                    .chain(word(at + 8))
                    .filter(|&child| child > 1 && child <= pages)
                    .collect();
                // Depth first, leftmost child first.
                children.reverse();
                stack.extend(children);
            }
            _ => {}
        }
    }
    None
}

/// Where cell `index` of a page starts, from its cell pointer array at `array`.
fn cell_offset(page: &[u8], array: usize, index: usize) -> Option<usize> {
    let at = array + 2 * index;
    let offset = usize::from(u16::from_be_bytes([*page.get(at)?, *page.get(at + 1)?]));
    (offset < page.len()).then_some(offset)
}

/// The serial types of a table leaf's cell at `offset`: its payload size, its rowid, then the
/// record's header (its size, then one serial type a column).
fn leaf_row_shape(page: &[u8], offset: usize) -> Option<Vec<u64>> {
    let mut at = offset;
    let (_payload, used) = varint(page.get(at..)?)?;
    at += used;
    let (_rowid, used) = varint(page.get(at..)?)?;
    at += used;
    let record = at;
    let (header_size, used) = varint(page.get(at..)?)?;
    let end = record.checked_add(usize::try_from(header_size).ok()?)?;
    if end > page.len() || header_size < used as u64 {
        return None;
    }
    at += used;
    let mut shape = Vec::new();
    while at < end {
        let (serial, used) = varint(page.get(at..end)?)?;
        shape.push(serial);
        at += used;
    }
    Some(shape)
}

/// SQLite's variable-length integer (1 to 9 bytes, big-endian, 7 bits a byte and 8 in the
/// ninth): its value and length.
fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (index, &byte) in bytes.iter().take(9).enumerate() {
        if index == 8 {
            return Some(((value << 8) | u64::from(byte), 9));
        }
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            return Some((value, index + 1));
        }
    }
    None
}

/// Which table a row of these serial types belongs to: text and numbers where each of
/// histd's tables has them (the rowid-alias columns of `series` and `groups` are stored as
/// null).
fn table_of(shape: &[u64]) -> Option<&'static str> {
    let text = |index: usize| shape.get(index).is_some_and(|&t| t >= 13 && t % 2 == 1);
    let blob = |index: usize| shape.get(index).is_some_and(|&t| t >= 12 && t % 2 == 0);
    let number = |index: usize| shape.get(index).is_some_and(|&t| (1..=9).contains(&t) && t != 7);
    let null_or_number = |index: usize| shape.get(index).is_none_or(|&t| t == 0 || number(index));
    let null = |index: usize| shape.get(index) == Some(&0);
    match shape.len() {
        2 if text(0) && number(1) => Some("meta"),
        4 if text(0) && number(1) && number(2) && text(3) => Some("log_positions"),
        6 if (0..5).all(number) && blob(5) => Some("blocks"),
        5..=7 if null(0) && text(1) && text(2) && text(3) && (4..7).all(null_or_number) => Some("series"),
        5 | 6 if null(0) && text(1) && (2..6).all(null_or_number) => Some("groups"),
        10 if null(0) && number(1) && text(2) && (3..7).all(number) && text(7) => Some("damage"),
        _ => None,
    }
}

/// A first page naming `tables` for a file of `pages` pages of `page_size` bytes: written by
/// SQLite into a scratch database beside `path`, then its header given the file's size, its
/// largest root, and the rollback journal's format (the write-ahead log is not read).
fn first_page(
    path: &Path,
    page_size: usize,
    pages: u32,
    tables: &[(&'static str, u32)],
) -> Result<Vec<u8>, StoreError> {
    let scratch = PathBuf::from(format!("{}.first-page-scratch", path.display()));
    let _ = std::fs::remove_file(&scratch);
    let written = (|| -> Result<Vec<u8>, StoreError> {
        let connection = Connection::open(&scratch)?;
        connection.pragma_update(None, "page_size", page_size as i64)?;
        connection.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
        connection.pragma_update(None, "journal_mode", "DELETE")?;
        connection
            .execute_batch("CREATE TABLE scratch (a); PRAGMA writable_schema = ON; DELETE FROM sqlite_schema;")?;
        for (name, root) in tables {
            let sql = TABLES.iter().find(|(table, _)| table == name).map(|(_, sql)| *sql).unwrap_or_default();
            connection.execute(
                "INSERT INTO sqlite_schema (type, name, tbl_name, rootpage, sql) VALUES ('table', ?1, ?1, ?2, ?3)",
                rusqlite::params![name, root, sql],
            )?;
        }
        drop(connection);
        let bytes = std::fs::read(&scratch).map_err(io_failed)?;
        let mut page = bytes.get(..page_size).ok_or_else(|| refused("the scratch page was not written"))?.to_vec();
        let largest_root = tables.iter().map(|(_, root)| *root).max().unwrap_or(0);
        page[28..32].copy_from_slice(&pages.to_be_bytes());
        let counter: [u8; 4] = [page[24], page[25], page[26], page[27]];
        page[92..96].copy_from_slice(&counter);
        page[52..56].copy_from_slice(&largest_root.to_be_bytes());
        page[64..68].copy_from_slice(&1u32.to_be_bytes());
        // No free list: what was free is not read, and the file is only read from now on.
        page[32..40].fill(0);
        (page[18], page[19]) = (1, 1);
        Ok(page)
    })();
    let _ = std::fs::remove_file(&scratch);
    let _ = std::fs::remove_file(format!("{}-journal", scratch.display()));
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_told_apart_by_their_shape() {
        // (serial types of a row, the table it belongs to)
        let text = 13 + 2 * 5;
        let blob = 12 + 2 * 40;
        let cases: [(&[u64], Option<&str>); 10] = [
            (&[text, 1], Some("meta")),
            (&[text, 1, 4, text], Some("log_positions")),
            (&[1, 2, 4, 1, 2, blob], Some("blocks")),
            (&[0, text, text, text, 2, 4, 6], Some("series")),
            // Written before last_day and checksum were added.
            (&[0, text, text, text, 2], Some("series")),
            (&[0, text, 2, 4, 4, 6], Some("groups")),
            (&[0, text, 2, 4, 4], Some("groups")),
            (&[0, 4, text, 1, 1, 4, 2, text, 8, 4], Some("damage")),
            (&[1, 2, 4, 1, 2, text], None),
            (&[], None),
        ];
        for (shape, table) in cases {
            assert_eq!(table_of(shape), table, "{shape:?}");
        }
    }

    #[test]
    fn varints_read_as_sqlite_writes_them() {
        // (the bytes, what they read as: a value and a length)
        type Case = (&'static [u8], Option<(u64, usize)>);
        let cases: [Case; 5] = [
            (&[0x05], Some((5, 1))),
            (&[0x81, 0x00], Some((128, 2))),
            (&[0xff; 9], Some((u64::MAX, 9))),
            (&[0x81], None),
            (&[], None),
        ];
        for (bytes, expected) in cases {
            assert_eq!(varint(bytes), expected, "{bytes:?}");
        }
    }

    #[test]
    fn headers_histd_does_not_write_are_damage() {
        let dir = std::env::temp_dir().join(format!("histd-first-page-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("histd.db");
        drop(crate::Store::open(&path, crate::Options::default()).unwrap());
        let bytes = std::fs::read(&path).unwrap();
        let mut header = [0u8; HEADER];
        header.copy_from_slice(&bytes[..HEADER]);
        let length = bytes.len() as u64;
        assert_eq!(judge_header(&header, length, true), Ok(()));
        // (the byte changed, its new value, whether that is damage)
        let cases = [(0, b'X', true), (17, 0x01, true), (18, 9, true), (20, 8, true), (59, 2, true), (47, 9, true)];
        for (at, value, damaged) in cases {
            let mut changed = header;
            changed[at] = value;
            assert_eq!(judge_header(&changed, length, true).is_err(), damaged, "byte {at} = {value}");
        }
        // A size past the file's end is damage; while a write-ahead log holds frames (the
        // first page may be there) the file's header is not judged.
        let mut long = header;
        long[28..32].copy_from_slice(&1_000_000u32.to_be_bytes());
        long[92..96].copy_from_slice(&header[24..28]);
        assert!(judge_header(&long, length, true).is_err());
        assert_eq!(judge_header(&long, length, false), Ok(()));
        // A new database's header before its first table: no schema format, no encoding yet.
        let mut new = header;
        new[44..48].fill(0);
        new[56..60].fill(0);
        assert_eq!(judge_header(&new, length, true), Ok(()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
