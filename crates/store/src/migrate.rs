//! Migration of a store of the first format (one SQLite row per series and interval in
//! `points_raw`, `points_1m`, `points_1h`) to blocks, when the writer opens it.
//!
//! Series are given groups first. Then each old table is moved one block span at a time, each
//! span in its own transaction that also deletes the old rows it moved: a migration cut short
//! resumes where it stopped. Rows before the old hour watermark (the first hour not rolled up)
//! become compacted blocks; raw rows after it become head blocks that the next flushes compact,
//! and the old minute rows after it are dropped, since that compaction rebuilds them from the
//! same raw rows. Then the old tables go, and the file is rebuilt with incremental vacuum on.
//!
//! Before it starts, a copy of the first-format file is kept beside it (`histd.db.format-1`,
//! SQLite's `VACUUM INTO`); the migrated store is scrubbed, and only then is the copy removed.
//! A migration that fails, or whose result does not verify, is rolled back to the copy; one
//! cut short (a crash) starts over from the copy at the next open.

use std::collections::BTreeMap;

use circllhist::Histogram;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use crate::blocks::{put_block, SeriesRows};
use crate::schema::{group_size, Resolution, FORMAT};
use crate::{Kind, Row, Store, StoreError};

const OLD_TABLES: [(Resolution, &str); 3] =
    [(Resolution::Raw, "points_raw"), (Resolution::Minute, "points_1m"), (Resolution::Hour, "points_1h")];

/// Moves every old row into blocks and drops the old tables.
pub(crate) fn from_format_1(store: &mut Store) -> Result<(), StoreError> {
    assign_groups(store)?;
    store.load_groups()?;
    let watermark: i64 = store
        .connection
        .query_row("SELECT value FROM meta WHERE key = 'rolled_points_1h'", [], |r| r.get(0))
        .optional()?
        .unwrap_or(i64::MIN);
    for (resolution, table) in OLD_TABLES {
        while let Some(first) = store.connection.query_row(&format!("SELECT min(ts) FROM {table}"), [], |r| r.get(0))? {
            move_span(store, resolution, table, resolution.block_start(first), watermark)?;
        }
    }
    let transaction = store.connection.transaction()?;
    transaction.execute("UPDATE groups SET compacted_until = ?1, hour_until = ?1", [watermark.max(0)])?;
    let points: i64 = transaction.query_row("SELECT coalesce(sum(points), 0) FROM blocks", [], |r| r.get(0))?;
    crate::usage::save_points(&transaction, points.max(0) as u64)?;
    transaction.execute_batch(
        "DROP TABLE points_raw; DROP TABLE points_1m; DROP TABLE points_1h;
         DELETE FROM meta WHERE key LIKE 'rolled_%';",
    )?;
    transaction.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('format', ?1)", [FORMAT])?;
    transaction.commit()?;
    store.connection.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    store.connection.execute_batch("VACUUM")?;
    Ok(())
}

/// Every series without a group gets one, by kind, in id order.
fn assign_groups(store: &mut Store) -> Result<(), StoreError> {
    let transaction = store.connection.transaction()?;
    let series: Vec<(i64, String)> = transaction
        .prepare("SELECT id, kind FROM series WHERE grp IS NULL ORDER BY id")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut open: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for (id, kind_name) in series {
        let size = Kind::parse(&kind_name).map_or(1024, group_size);
        let grp = match open.get_mut(&kind_name) {
            Some((grp, members)) if *members < size => {
                *members += 1;
                *grp
            }
            _ => {
                transaction
                    .execute("INSERT INTO groups (kind, members, compacted_until) VALUES (?1, 0, 0)", [&kind_name])?;
                let grp = transaction.last_insert_rowid();
                open.insert(kind_name.clone(), (grp, 1));
                grp
            }
        };
        transaction.execute("UPDATE series SET grp = ?2 WHERE id = ?1", params![id, grp])?;
        transaction.execute("UPDATE groups SET members = members + 1 WHERE grp = ?1", [grp])?;
    }
    transaction.commit()?;
    Ok(())
}

/// Moves the old rows of one block span into blocks, and deletes them, in one transaction.
fn move_span(
    store: &mut Store,
    resolution: Resolution,
    table: &str,
    start: i64,
    watermark: i64,
) -> Result<(), StoreError> {
    let end = start + resolution.block_span();
    let transaction = store.connection.transaction()?;
    let groups = read_span(&transaction, table, start, end)?;
    for (grp, series) in groups {
        let kind = store.group_kinds.get(&grp).copied().unwrap_or(Kind::Counter);
        let (settled, recent): (Vec<SeriesRows>, Vec<SeriesRows>) = split_at(series, watermark);
        if !settled.is_empty() {
            put_block(&transaction, resolution, grp, start, resolution.block_span(), kind, settled)?;
        }
        if resolution == Resolution::Raw {
            for (ts, heads) in by_time(recent) {
                put_block(&transaction, Resolution::Raw, grp, ts, 0, kind, heads)?;
            }
        }
    }
    transaction.execute(&format!("DELETE FROM {table} WHERE ts >= ?1 AND ts < ?2"), params![start, end])?;
    transaction.commit()?;
    Ok(())
}

/// The old rows of `[start, end)`, by group, then series, then time.
fn read_span(
    transaction: &Transaction<'_>,
    table: &str,
    start: i64,
    end: i64,
) -> Result<BTreeMap<i64, Vec<SeriesRows>>, StoreError> {
    let mut statement = transaction.prepare(&format!(
        "SELECT s.grp, p.series, p.ts, p.seconds, p.count, p.sum, p.sum_squares, p.min, p.max, p.value, p.hist \
         FROM {table} p JOIN series s ON s.id = p.series WHERE p.ts >= ?1 AND p.ts < ?2 AND s.grp IS NOT NULL \
         ORDER BY s.grp, p.series, p.ts"
    ))?;
    let mut rows = statement.query(params![start, end])?;
    let mut groups: BTreeMap<i64, Vec<SeriesRows>> = BTreeMap::new();
    while let Some(sql) = rows.next()? {
        let (grp, series): (i64, i64) = (sql.get(0)?, sql.get(1)?);
        let number = |i: usize| -> rusqlite::Result<f64> { Ok(sql.get::<_, Option<f64>>(i)?.unwrap_or(f64::NAN)) };
        let hist = match sql.get::<_, Option<Vec<u8>>>(10)? {
            None => None,
            Some(bytes) => Some(Histogram::from_bytes(&bytes).map_err(|reason| StoreError::CorruptHistogram {
                series,
                ts: sql.get(2).unwrap_or(0),
                reason,
            })?),
        };
        let row = Row {
            ts: sql.get(2)?,
            seconds: number(3)?,
            count: number(4)?,
            sum: number(5)?,
            sum_squares: number(6)?,
            min: number(7)?,
            max: number(8)?,
            value: number(9)?,
            histogram: hist,
        };
        let list = groups.entry(grp).or_default();
        match list.last_mut() {
            Some((last, rows)) if *last == series => rows.push(row),
            _ => list.push((series, vec![row])),
        }
    }
    Ok(groups)
}

/// Rows before `watermark`, and the rest.
fn split_at(series: Vec<SeriesRows>, watermark: i64) -> (Vec<SeriesRows>, Vec<SeriesRows>) {
    let (mut settled, mut recent) = (Vec::new(), Vec::new());
    for (id, rows) in series {
        let (before, after): (Vec<Row>, Vec<Row>) = rows.into_iter().partition(|row| row.ts < watermark);
        if !before.is_empty() {
            settled.push((id, before));
        }
        if !after.is_empty() {
            recent.push((id, after));
        }
    }
    (settled, recent)
}

/// Series' rows regrouped as one head block per time.
fn by_time(series: Vec<SeriesRows>) -> BTreeMap<i64, Vec<SeriesRows>> {
    let mut heads: BTreeMap<i64, Vec<SeriesRows>> = BTreeMap::new();
    for (id, rows) in series {
        for row in rows {
            heads.entry(row.ts).or_default().push((id, vec![row]));
        }
    }
    heads
}

/// Where the copy of a first-format store is kept while it is migrated.
pub(crate) fn kept_copy(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}.format-1", path.display()))
}

/// Opens the store at `path`; a first-format store is copied to `kept` first (or, when a copy
/// is already there, an earlier migration was cut short: the file is put back from it).
pub(crate) fn keep_before_migrating(path: &Path, kept: &Path) -> Result<Connection, StoreError> {
    let connection = Connection::open(path)?;
    if !crate::schema::table_exists(&connection, "points_raw")? {
        return Ok(connection);
    }
    // A copy cut short (the process died while making it) is not a copy: the file it was
    // being made from was not touched yet.
    let partial = PathBuf::from(format!("{}.partial", kept.display()));
    if partial.exists() {
        std::fs::remove_file(&partial)
            .map_err(|error| StoreError::Backup(format!("{}: {error}", partial.display())))?;
    }
    if kept.exists() {
        drop(connection);
        roll_back(path, kept)?;
    }
    let connection = Connection::open(path)?;
    // Made whole under another name, synced, then renamed: a `kept` file is always whole.
    connection.execute("VACUUM INTO ?1", [kept_text(&partial)?])?;
    let made = || -> std::io::Result<()> {
        std::fs::File::open(&partial)?.sync_all()?;
        std::fs::rename(&partial, kept)?;
        if let Some(dir) = kept.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    };
    made().map_err(|error| StoreError::Backup(format!("keeping {} before migrating: {error}", kept.display())))?;
    Ok(connection)
}

/// Puts the kept first-format file back at `path` (its write-ahead log and shared memory
/// removed: they belong to the file being replaced).
pub(crate) fn roll_back(path: &Path, kept: &Path) -> Result<(), StoreError> {
    let failed = |error: std::io::Error| {
        StoreError::Backup(format!("rolling the migration back to {}: {error}", kept.display()))
    };
    for suffix in ["-wal", "-shm"] {
        let stale = PathBuf::from(format!("{}{suffix}", path.display()));
        if stale.exists() {
            std::fs::remove_file(&stale).map_err(failed)?;
        }
    }
    std::fs::copy(kept, path).map_err(failed)?;
    std::fs::remove_file(kept).map_err(failed)?;
    Ok(())
}

fn kept_text(kept: &Path) -> Result<&str, StoreError> {
    kept.to_str().ok_or_else(|| StoreError::Backup(format!("{} is not UTF-8", kept.display())))
}

impl Store {
    /// A migrated store is whole: every block checks (a scrub).
    pub(crate) fn verify_migration(&self) -> Result<(), StoreError> {
        let report = self.scrub()?;
        match report.damaged.first() {
            None if report.pages.is_empty() => Ok(()),
            None => {
                Err(StoreError::Backup(format!("the migrated file's pages do not check: {}", report.pages.join("; "))))
            }
            Some(block) => Err(StoreError::CorruptBlock {
                resolution: block.resolution,
                grp: block.grp,
                start: block.start,
                reason: block.reason,
            }),
        }
    }
}
