//! Salvaging a store file SQLite finds damaged (pages overwritten, a torn write, bitrot): every
//! row that can still be read is copied into a fresh store, so the damage costs the rows on the
//! damaged pages, not the whole history.
//!
//! Each table is read by rowid, in order, a slice at a time; a read that fails (a page of the
//! table's b-tree that does not decode) is skipped by seeking past it, further each time, until
//! a seek lands on readable rows again. The indexes are not read at all: the fresh store builds
//! its own. Afterwards:
//! - series rows whose checksum does not hold are left out (before they are written: a row
//!   renamed to another series' name would otherwise take that series' place), and group rows
//!   whose checksum does not hold are rebuilt from the group's series and blocks;
//! - blocks and series whose group row was lost are deleted (without the group's kind and
//!   compaction state their rows cannot be served right); they are counted;
//! - every salvaged group is closed to new series (its member count set to its size): a series
//!   whose row was lost may still have points in its group's blocks, and a new series given its
//!   number in that group would read them. New series start new groups, so nothing is mixed.
//!
//! The blocks copied keep their checksums: a block whose bytes were damaged is isolated when read
//! (left out and counted), as in any store.

use std::path::Path;

use rusqlite::types::{Value, ValueRef};
use rusqlite::{params_from_iter, Connection, OpenFlags, OptionalExtension};

use crate::checked_rows::GroupRow;
use crate::read::DamagedBlock;
use crate::schema::{group_size, table_exists, Resolution};
use crate::{Kind, StoreError};

/// Rows read at a time.
const SLICE: i64 = 512;

/// The furthest a read skips past a damaged page before the table is given up (rowids).
const FURTHEST_SKIP: i64 = 1 << 40;

/// What a salvage copied and what it could not.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Salvaged {
    /// Series rows copied.
    pub series: u64,
    /// Group rows copied.
    pub groups: u64,
    /// Blocks copied.
    pub blocks: u64,
    /// The points those blocks hold.
    pub points: u64,
    /// Reads that failed on a damaged page and were skipped past.
    pub unreadable_pages: u64,
    /// Rows read whose text is not UTF-8 (a flipped bit in a name), and series rows whose
    /// checksum does not hold: left out.
    pub unreadable_rows: u64,
    /// Group rows whose checksum did not hold, rebuilt from the group's series and blocks.
    pub rebuilt_groups: u64,
    /// Series deleted because their group's row was lost.
    pub orphaned_series: u64,
    /// Blocks deleted because their group's row was lost.
    pub orphaned_blocks: u64,
    /// The points in those blocks.
    pub orphaned_points: u64,
    /// Whether the file's first page (its header and schema) was damaged and written anew
    /// from the rest of the file (first_page.rs) before the rows were read.
    pub first_page_rebuilt: bool,
}

/// A table copied row by row: its name, the columns read (its rowid first) and how a row is
/// written (`?1` is the rowid).
struct Copied {
    table: &'static str,
    columns: &'static str,
    count: usize,
    insert: &'static str,
}

/// How the series table is copied: a row whose checksum does not hold is left out (before it
/// is written: a row renamed to another series' name would otherwise take that series' place).
const SERIES: Copied = Copied {
    table: "series",
    columns: "id, name, tags, kind, grp, checksum, last_day",
    count: 7,
    insert: "INSERT OR IGNORE INTO series (id, name, tags, kind, grp, checksum, last_day) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
};

const TABLES: [Copied; 6] = [
    Copied {
        table: "meta",
        columns: "rowid, key, value",
        count: 3,
        // The fresh store's own rows (its format) stay.
        insert: "INSERT OR IGNORE INTO meta (key, value) VALUES (?2, ?3)",
    },
    Copied {
        table: "groups",
        columns: "grp, kind, members, compacted_until, hour_until, checksum",
        count: 6,
        insert: "INSERT OR IGNORE INTO groups (grp, kind, members, compacted_until, hour_until, checksum) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    },
    SERIES,
    Copied {
        table: "blocks",
        columns: "rowid, resolution, grp, start, span, points, data",
        count: 7,
        insert: "INSERT OR IGNORE INTO blocks (rowid, resolution, grp, start, span, points, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    },
    // Where in a Kafka topic the batches the store holds were read (log_positions.rs): a
    // restarted global passes over them after a salvage too.
    Copied {
        table: "log_positions",
        columns: "rowid, log, partition, through, beyond",
        count: 5,
        insert: "INSERT OR IGNORE INTO log_positions (log, partition, through, beyond) VALUES (?2, ?3, ?4, ?5)",
    },
    // The record of damage goes with the store (damage_record.rs): what was lost before stays
    // known after the salvage.
    Copied {
        table: "damage",
        columns: "id, found, what, resolution, grp, start, points, detail, acknowledged, checksum",
        count: 10,
        // Numbered anew (a backup records the blocks it leaves out first); an entry of the
        // same block is kept once.
        insert: "INSERT OR IGNORE INTO damage (found, what, resolution, grp, start, points, detail, acknowledged, checksum) \
                 VALUES (?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    },
];

/// Copies every readable row of the damaged store file `damaged` into the store file `fresh`
/// (made by [`crate::Store::open`] and closed). An error when nothing can be read (the header
/// or the schema itself is damaged) or `damaged` is of the first format.
pub fn salvage(damaged: &Path, fresh: &Path) -> Result<Salvaged, StoreError> {
    let (source, first_page_rebuilt) = open_source(damaged)?;
    let mut salvaged = Salvaged { first_page_rebuilt, ..Salvaged::default() };
    copy_rows(&source, fresh, &mut salvaged, None)?;
    Ok(salvaged)
}

/// Copies every intact row of the store file `live` (a daemon may be writing it: it is read
/// in one read transaction, and never changed) into the store file `fresh`, as [`salvage`]
/// does, and leaves out the blocks whose checksum or bytes do not hold: a backup of a store
/// with damage. Returns what was copied and each block left out.
pub fn copy_intact(live: &Path, fresh: &Path, now: i64) -> Result<(Salvaged, Vec<DamagedBlock>), StoreError> {
    let mut source = Connection::open_with_flags(live, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    source.busy_timeout(std::time::Duration::from_secs(5))?;
    let snapshot = source.transaction()?;
    let mut salvaged = Salvaged::default();
    let mut left_out = LeftOut { now, blocks: Vec::new() };
    copy_rows(&snapshot, fresh, &mut salvaged, Some(&mut left_out))?;
    Ok((salvaged, left_out.blocks))
}

/// [`salvage`] leaving out, and listing, the blocks whose checksum or bytes do not hold: a
/// backup of a store SQLite cannot open (a copy of it: its first page may be rebuilt).
pub fn salvage_intact(damaged: &Path, fresh: &Path, now: i64) -> Result<(Salvaged, Vec<DamagedBlock>), StoreError> {
    let (source, first_page_rebuilt) = open_source(damaged)?;
    let mut salvaged = Salvaged { first_page_rebuilt, ..Salvaged::default() };
    let mut left_out = LeftOut { now, blocks: Vec::new() };
    copy_rows(&source, fresh, &mut salvaged, Some(&mut left_out))?;
    Ok((salvaged, left_out.blocks))
}

/// The blocks a copy leaves out: listed, and recorded in the copy's record of damage (with
/// their points, found `now`).
struct LeftOut {
    now: i64,
    blocks: Vec<DamagedBlock>,
}

/// The copy both share: every readable row of `source`'s tables into `fresh`, then the groups
/// rebuilt, orphans removed, groups closed and the points counted. With `left_out`, blocks
/// that do not decode are not copied but listed there.
fn copy_rows(
    source: &Connection,
    fresh: &Path,
    salvaged: &mut Salvaged,
    mut left_out: Option<&mut LeftOut>,
) -> Result<(), StoreError> {
    if table_exists(source, "points_raw")? {
        return Err(StoreError::Salvage("a store of the first format is not salvaged".to_string()));
    }
    let mut target = Connection::open(fresh)?;
    let transaction = target.transaction()?;
    let checks = row_checks(source);
    for copied in &TABLES {
        // A table a rebuilt first page could not name held no row that showed which it was.
        if !table_exists(source, copied.table)? {
            continue;
        }
        let rows = copy_table(source, &transaction, copied, checks, salvaged, left_out.as_deref_mut())?;
        match copied.table {
            "groups" => salvaged.groups = rows,
            "series" => salvaged.series = rows,
            "blocks" => salvaged.blocks = rows,
            _ => {}
        }
    }
    salvaged.rebuilt_groups = rebuild_groups(&transaction, checks)?;
    crate::checked_rows::fill_missing(&transaction)?;
    remove_orphans(&transaction, salvaged)?;
    close_groups(&transaction)?;
    salvaged.points = transaction.query_row("SELECT coalesce(sum(points), 0) FROM blocks", [], |r| r.get(0))?;
    // The store's count of its points is what the blocks salvaged hold, not what the damaged
    // file counted.
    transaction.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('points', ?1)", [salvaged.points as i64])?;
    transaction.commit()?;
    Ok(())
}

/// The damaged file opened to be read, and whether its first page had to be rebuilt: when
/// its header is not one histd writes or SQLite cannot read its schema, the first page is
/// written anew from the rest of the file ([`crate::first_page::rebuild`]); if that cannot be
/// done, the file is read as SQLite can.
fn open_source(damaged: &Path) -> Result<(Connection, bool), StoreError> {
    let open = || -> Result<Connection, StoreError> {
        let source = Connection::open_with_flags(damaged, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        // The schema is read as it is: a table whose root page lies past a truncated file's
        // end would otherwise make every statement fail, the readable tables' too.
        source.pragma_update(None, "writable_schema", true)?;
        if !table_exists(&source, "series")? && !table_exists(&source, "points_raw")? {
            return Err(StoreError::Salvage("the schema names none of the store's tables".to_string()));
        }
        Ok(source)
    };
    let header_damage = crate::first_page::header_damage(damaged);
    let opened = open();
    if header_damage.is_none() && opened.is_ok() {
        return Ok((opened?, false));
    }
    drop(opened);
    match crate::first_page::rebuild(damaged) {
        Ok(_) => Ok((open()?, true)),
        Err(rebuild_failed) => open()
            .map(|source| (source, false))
            .map_err(|error| StoreError::Salvage(format!("{error}; {rebuild_failed}"))),
    }
}

/// How the damaged file's series and group rows are checked.
#[derive(Debug, Clone, Copy)]
enum RowChecks {
    /// Written before checksums: the column is missing.
    NoColumn,
    /// Whether a row without a checksum is damaged.
    Required(bool),
}

/// What the damaged file says of its rows' checksums.
fn row_checks(source: &Connection) -> RowChecks {
    match crate::schema::column_exists(source, "groups", "checksum") {
        Ok(false) => RowChecks::NoColumn,
        // A meta table that does not read: a row without a checksum is given one.
        _ => RowChecks::Required(crate::checked_rows::is_checksummed(source).unwrap_or(false)),
    }
}

/// Whether a series row read (values in [`SERIES`]' order) is whole.
fn series_row_holds(values: &[Value], checks: RowChecks) -> bool {
    let value = |index: usize| values.get(index).map_or(ValueRef::Null, ValueRef::from);
    let required = matches!(checks, RowChecks::Required(true));
    let judged = crate::checked_rows::judge([0, 1, 2, 3, 4, 5].map(value), required);
    // Forgotten series (no group) have no checksum and are copied as they are.
    matches!(judged, crate::checked_rows::SeriesRow::Whole { .. }) || value(4) == ValueRef::Null
}

/// Copies one table's readable rows; returns how many, and how many reads were skipped.
fn copy_table(
    source: &Connection,
    target: &Connection,
    copied: &Copied,
    checks: RowChecks,
    salvaged: &mut Salvaged,
    mut left_out: Option<&mut LeftOut>,
) -> Result<u64, StoreError> {
    let columns = crate::checked_rows::select(copied.columns, !matches!(checks, RowChecks::NoColumn));
    let read = format!(
        "SELECT {columns} FROM {} WHERE {} > ?1 ORDER BY 1 LIMIT {SLICE}",
        copied.table,
        copied.columns.split(',').next().unwrap_or("rowid")
    );
    let mut insert = target.prepare(copied.insert)?;
    let (mut after, mut copied_rows, mut skip) = (i64::MIN, 0u64, 1i64);
    loop {
        let (rows, failed) = read_slice(source, &read, after, copied.count);
        for (_, row) in &rows {
            if let (Some(list), Some(values)) =
                (left_out.as_deref_mut(), row.as_ref().filter(|_| copied.table == "blocks"))
            {
                if let Some(damaged) = damaged_block(values) {
                    let points = match values.get(5) {
                        Some(Value::Integer(points)) => *points,
                        _ => 0,
                    };
                    crate::damage_record::record_block(target, list.now, &damaged, points)?;
                    list.blocks.push(damaged);
                    continue;
                }
            }
            match row {
                Some(values) if copied.table != "series" || series_row_holds(values, checks) => {
                    copied_rows += insert.execute(params_from_iter(values.iter()))? as u64
                }
                _ => salvaged.unreadable_rows += 1,
            }
        }
        // A damaged tree can hand rows back out of order: the read goes on only past the
        // furthest rowid seen (each rowid is in the file once, so this ends), and rows that
        // do not lead further count as a damaged page.
        let advanced = rows.last().is_some_and(|(last, _)| *last > after);
        if let Some((last, _)) = rows.last().filter(|_| advanced) {
            (after, skip) = (*last, 1);
        }
        let damaged = match &failed {
            None => !advanced && !rows.is_empty(),
            Some(error) => error.is_damaged_file(),
        };
        match failed {
            None if rows.is_empty() => return Ok(copied_rows),
            _ if damaged => {
                salvaged.unreadable_pages += 1;
                if skip > FURTHEST_SKIP {
                    return Ok(copied_rows);
                }
                after = after.max(0).saturating_add(skip);
                skip = skip.saturating_mul(2);
            }
            None => {}
            Some(error) => return Err(error),
        }
    }
}

/// The block a row of the blocks table (values in [`TABLES`]' order) holds, when its checksum
/// or bytes do not hold.
fn damaged_block(values: &[Value]) -> Option<DamagedBlock> {
    let integer = |index: usize| match values.get(index) {
        Some(Value::Integer(value)) => *value,
        _ => 0,
    };
    let reason = match values.get(6) {
        Some(Value::Blob(bytes)) => {
            let place = crate::codec::block::Place {
                resolution: integer(1),
                grp: integer(2),
                start: integer(3),
                span: integer(4),
            };
            crate::codec::block::decode_each(bytes, &place, |_, _| {}).err()?.0
        }
        _ => "a block that is not bytes",
    };
    let resolution = Resolution::ALL.into_iter().find(|r| r.code() == integer(1)).unwrap_or(Resolution::Raw);
    Some(DamagedBlock { resolution, grp: integer(2), start: integer(3), reason })
}

/// A column's value, owned; `None` for text that is not UTF-8 (damaged).
fn owned(value: ValueRef<'_>) -> Option<Value> {
    match value {
        ValueRef::Text(text) => std::str::from_utf8(text).ok().map(|text| Value::Text(text.to_string())),
        other => Some(other.into()),
    }
}

/// A row read: its rowid, and its column values (`None`: its text does not read).
type ReadRow = (i64, Option<Vec<Value>>);

/// Up to [`SLICE`] rows after `after`, and the failure that ended the read early, if one did
/// (the rows before it are good).
fn read_slice(source: &Connection, sql: &str, after: i64, columns: usize) -> (Vec<ReadRow>, Option<StoreError>) {
    let mut slice = Vec::new();
    let mut statement = match source.prepare_cached(sql) {
        Ok(statement) => statement,
        Err(error) => return (slice, Some(error.into())),
    };
    let mut rows = match statement.query([after]) {
        Ok(rows) => rows,
        Err(error) => return (slice, Some(error.into())),
    };
    loop {
        match rows.next() {
            Ok(None) => return (slice, None),
            Ok(Some(row)) => {
                let read = row.get::<_, i64>(0).and_then(|rowid| {
                    let values =
                        (0..columns).map(|index| row.get_ref(index).map(owned)).collect::<Result<Vec<_>, _>>()?;
                    Ok((rowid, values.into_iter().collect()))
                });
                match read {
                    Ok(read) => slice.push(read),
                    Err(error) => return (slice, Some(error.into())),
                }
            }
            Err(error) => return (slice, Some(error.into())),
        }
    }
}

/// Rebuilds the group rows copied whose checksum does not hold: the kind from the group's
/// series (their rows are checked), the rollups' bounds from its blocks: minute rollups are
/// complete to the end of its last minute block; hour rollups are taken to end where its last
/// day's hour block starts (that day's hours are answered from minute rows). A group none of
/// whose series is left is not rebuilt (its blocks are orphans).
fn rebuild_groups(target: &Connection, checks: RowChecks) -> Result<u64, StoreError> {
    let required = matches!(checks, RowChecks::Required(true));
    let mut damaged = Vec::new();
    {
        let mut statement = target.prepare(&format!("SELECT {} FROM groups", crate::checked_rows::GROUP_COLUMNS))?;
        let mut rows = statement.query([])?;
        while let Some(row) = rows.next()? {
            if let GroupRow::Damaged(grp) = crate::checked_rows::read_group(row, required)? {
                damaged.push(grp);
            }
        }
    }
    let mut rebuilt = 0;
    for grp in damaged {
        let kind: Option<String> =
            target.query_row("SELECT kind FROM series WHERE grp = ?1 LIMIT 1", [grp], |r| r.get(0)).optional()?;
        let Some(kind) = kind else {
            target.execute("DELETE FROM groups WHERE grp = ?1", [grp])?;
            continue;
        };
        let end_of = |resolution: Resolution, with_span: bool| -> Result<i64, StoreError> {
            let span = if with_span { "start + span" } else { "start" };
            let sql = format!("SELECT coalesce(max({span}), 0) FROM blocks WHERE grp = ?1 AND resolution = ?2");
            Ok(target.query_row(&sql, rusqlite::params![grp, resolution.code()], |r| r.get(0))?)
        };
        let (compacted_until, hour_until) = (end_of(Resolution::Minute, true)?, end_of(Resolution::Hour, false)?);
        target.execute(
            "UPDATE groups SET kind = ?2, compacted_until = ?3, hour_until = ?4 WHERE grp = ?1",
            rusqlite::params![grp, kind, compacted_until, hour_until],
        )?;
        crate::checked_rows::seal_group(target, grp)?;
        rebuilt += 1;
    }
    Ok(rebuilt)
}

/// Deletes the series and blocks whose group's row was lost, counting them.
fn remove_orphans(target: &Connection, salvaged: &mut Salvaged) -> Result<(), StoreError> {
    let orphaned = "grp NOT IN (SELECT grp FROM groups)";
    let (blocks, points): (i64, i64) = target.query_row(
        &format!("SELECT count(*), coalesce(sum(points), 0) FROM blocks WHERE {orphaned}"),
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    target.execute(&format!("DELETE FROM blocks WHERE {orphaned}"), [])?;
    let series = target.execute(&format!("DELETE FROM series WHERE grp IS NOT NULL AND {orphaned}"), [])?;
    salvaged.orphaned_blocks = blocks as u64;
    salvaged.orphaned_points = points as u64;
    salvaged.orphaned_series = series as u64;
    salvaged.blocks -= salvaged.orphaned_blocks.min(salvaged.blocks);
    salvaged.series -= salvaged.orphaned_series.min(salvaged.series);
    Ok(())
}

/// Closes every salvaged group to new series.
fn close_groups(target: &Connection) -> Result<(), StoreError> {
    for kind in [Kind::Counter, Kind::Gauge, Kind::Set, Kind::Timer] {
        target.execute(
            "UPDATE groups SET members = ?1 WHERE kind = ?2",
            rusqlite::params![group_size(kind), kind.as_str()],
        )?;
    }
    Ok(())
}
