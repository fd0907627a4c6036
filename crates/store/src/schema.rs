//! The tables (format 2).
//!
//! - `series`: one row per series (name, sorted tags, kind), the group it belongs to, the
//!   last day (unix days) its rows reached an hour rollup (a series whose last day is past the
//!   longest retention holds no rows any more and is deleted: [`crate::prune`]), and the row's
//!   checksum ([`crate::checked_rows`]).
//! - `groups`: series are grouped by kind (up to [`group_size`] a group); a group's rows share
//!   blocks. `compacted_until` is the end of the last period compacted for it: before it, minute
//!   rollups are complete, from it on only raw rows exist; `hour_until` is where its hour
//!   rollups end; the row's checksum ([`crate::checked_rows`]).
//! - `blocks`: one blob per (resolution, group, start, span) in the format of
//!   [`crate::codec::block`]. Raw blocks with `span` 0 are the head: one per flush, written as
//!   it arrives. Compaction turns each [`PERIOD`] of them into one raw block and one minute
//!   block of that span; once an hour is complete its minute blocks become one of an hour, and
//!   its hour rows merge into the day's hour block.
//! - `meta`: the format version and settings readers need.
//! - `log_positions`: where in a Kafka topic a global read the batches held
//!   ([`crate::log_positions`]).
//! - `damage`: the record of damage found and salvages made ([`crate::damage_record`]).

use rusqlite::{Connection, OptionalExtension};

use crate::{Kind, StoreError};

/// The resolutions kept, finest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resolution {
    /// One row per flush interval.
    Raw,
    /// One row per minute.
    Minute,
    /// One row per hour.
    Hour,
}

impl Resolution {
    /// Every resolution, finest first.
    pub const ALL: [Resolution; 3] = [Resolution::Raw, Resolution::Minute, Resolution::Hour];

    /// The width of one row in seconds (raw rows: 0, their width is the flush interval).
    pub fn seconds(self) -> i64 {
        match self {
            Resolution::Raw => 0,
            Resolution::Minute => 60,
            Resolution::Hour => 3600,
        }
    }

    /// The number stored in `blocks.resolution`.
    pub(crate) fn code(self) -> i64 {
        self as i64
    }

    /// The time one compacted block of this resolution covers, seconds.
    pub fn block_span(self) -> i64 {
        match self {
            Resolution::Raw => PERIOD,
            Resolution::Minute => 3600,
            Resolution::Hour => 86_400,
        }
    }

    /// The start of the block holding a row at `ts`.
    pub(crate) fn block_start(self, ts: i64) -> i64 {
        ts.div_euclid(self.block_span()) * self.block_span()
    }

    /// The start of the row of this resolution that a finer row at `ts` rolls into.
    pub(crate) fn row_start(self, ts: i64) -> i64 {
        match self.seconds() {
            0 => ts,
            width => ts.div_euclid(width) * width,
        }
    }
}

/// The compaction period, seconds: the head holds at most about one period per group before
/// it is compacted (a query's raw tail is at most this long).
pub const PERIOD: i64 = 600;

/// The format this version writes.
pub const FORMAT: i64 = 2;

/// Series a group holds: timers carry histograms, so their groups are smaller and a
/// compaction's memory stays bounded.
pub fn group_size(kind: Kind) -> i64 {
    match kind {
        Kind::Timer => 64,
        _ => 1024,
    }
}

const TABLES: &str = "
CREATE TABLE IF NOT EXISTS series (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    tags TEXT NOT NULL,
    kind TEXT NOT NULL,
    grp INTEGER,
    last_day INTEGER,
    checksum INTEGER,
    UNIQUE (name, tags, kind)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS groups (
    grp INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    members INTEGER NOT NULL,
    compacted_until INTEGER NOT NULL,
    hour_until INTEGER NOT NULL DEFAULT 0,
    checksum INTEGER
);
CREATE TABLE IF NOT EXISTS blocks (
    resolution INTEGER NOT NULL,
    grp INTEGER NOT NULL,
    start INTEGER NOT NULL,
    span INTEGER NOT NULL,
    points INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS blocks_key ON blocks (resolution, grp, start, span);
CREATE INDEX IF NOT EXISTS blocks_start ON blocks (start);
CREATE TABLE IF NOT EXISTS log_positions (
    log TEXT NOT NULL,
    partition INTEGER NOT NULL,
    through INTEGER NOT NULL,
    beyond TEXT NOT NULL,
    PRIMARY KEY (log, partition)
);
CREATE TABLE IF NOT EXISTS damage (
    id INTEGER PRIMARY KEY,
    found INTEGER NOT NULL,
    what TEXT NOT NULL,
    resolution INTEGER NOT NULL,
    grp INTEGER NOT NULL,
    start INTEGER NOT NULL,
    points INTEGER NOT NULL,
    detail TEXT NOT NULL,
    acknowledged INTEGER NOT NULL,
    checksum INTEGER NOT NULL,
    UNIQUE (what, resolution, grp, start)
);
";

/// Sets the writer's connection up and creates what is missing: WAL, normal sync (a crash
/// loses at most the transaction in flight, never consistency), pages given back to the file
/// system as data is dropped. Returns the format found (1 when a store of the first format is
/// there to migrate).
pub fn prepare(connection: &Connection) -> Result<i64, StoreError> {
    let fresh = !table_exists(connection, "series")?;
    if fresh {
        // Only takes effect before the first table exists.
        connection.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    }
    connection.pragma_update(None, "journal_mode", "WAL")?;
    connection.pragma_update(None, "synchronous", "NORMAL")?;
    connection.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)?;
    // A flush touches a few pages a group, and blocks are read once: a small cache does.
    connection.pragma_update(None, "cache_size", -2048)?;
    connection.busy_timeout(std::time::Duration::from_secs(5))?;
    let old = table_exists(connection, "points_raw")?;
    if old && !column_exists(connection, "series", "grp")? {
        connection.execute_batch("ALTER TABLE series ADD COLUMN grp INTEGER")?;
    }
    connection.execute_batch(TABLES)?;
    if !column_exists(connection, "series", "last_day")? {
        connection.execute_batch("ALTER TABLE series ADD COLUMN last_day INTEGER")?;
    }
    // The groups' column last: readers take it as the sign that both are there.
    for table in ["series", "groups"] {
        if !column_exists(connection, table, "checksum")? {
            connection.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN checksum INTEGER"))?;
        }
    }
    connection.execute_batch("CREATE INDEX IF NOT EXISTS series_last_day ON series (last_day)")?;
    if fresh {
        // Marked as checksummed by the writer's open, which checks the rows next.
        connection.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('format', ?1)", [FORMAT])?;
    }
    Ok(if old { 1 } else { FORMAT })
}

/// Sets a reading connection up (it creates nothing).
pub fn prepare_reader(connection: &Connection) -> Result<(), StoreError> {
    connection.busy_timeout(std::time::Duration::from_secs(5))?;
    connection.pragma_update(None, "cache_size", -16384)?;
    Ok(())
}

/// Whether the database has a table named `name`.
pub(crate) fn table_exists(connection: &Connection, name: &str) -> Result<bool, StoreError> {
    let found = connection
        .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", [name], |_| Ok(()))
        .optional()?;
    Ok(found.is_some())
}

pub(crate) fn column_exists(connection: &Connection, table: &str, column: &str) -> Result<bool, StoreError> {
    let mut statement = connection.prepare(&format!("PRAGMA table_info({table})"))?;
    let names = statement.query_map([], |row| row.get::<_, String>(1))?;
    for name in names {
        if name? == column {
            return Ok(true);
        }
    }
    Ok(false)
}
