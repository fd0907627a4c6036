//! The tables. One row per series and interval in `points_raw`; the same shape rolled up per
//! minute and per hour in `points_1m` and `points_1h`.
//!
//! A row holds what every kind needs: `count` (counters: the interval's sum of increments;
//! timers: samples, rate-weighted), `sum`, `sum_squares`, `min`, `max` (timers), `value`
//! (gauges: the value; sets: distinct members), and `hist` (timers: the circllhist, binary).

use rusqlite::Connection;

use crate::StoreError;

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

    /// The table of this resolution.
    pub fn table(self) -> &'static str {
        match self {
            Resolution::Raw => "points_raw",
            Resolution::Minute => "points_1m",
            Resolution::Hour => "points_1h",
        }
    }

    /// The width of one row in seconds (raw rows: 0, their width is the flush interval).
    pub fn seconds(self) -> i64 {
        match self {
            Resolution::Raw => 0,
            Resolution::Minute => 60,
            Resolution::Hour => 3600,
        }
    }
}

const SERIES: &str = "CREATE TABLE IF NOT EXISTS series (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    tags TEXT NOT NULL,
    kind TEXT NOT NULL,
    UNIQUE (name, tags, kind)
)";

const META: &str = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)";

fn points(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (
            series INTEGER NOT NULL,
            ts INTEGER NOT NULL,
            seconds REAL NOT NULL,
            count REAL,
            sum REAL,
            sum_squares REAL,
            min REAL,
            max REAL,
            value REAL,
            hist BLOB,
            PRIMARY KEY (series, ts)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS {table}_ts ON {table} (ts)"
    )
}

/// Creates what is missing and sets the connection up: WAL, normal sync (a crash loses at most
/// the transaction in flight, never consistency).
pub fn prepare(connection: &Connection) -> Result<(), StoreError> {
    connection.pragma_update(None, "journal_mode", "WAL")?;
    connection.pragma_update(None, "synchronous", "NORMAL")?;
    // 64 MiB of page cache and memory-mapped reads: a flush touches every series' latest pages.
    connection.pragma_update(None, "cache_size", -65_536)?;
    connection.pragma_update(None, "mmap_size", 268_435_456)?;
    connection.pragma_update(None, "foreign_keys", "OFF")?;
    connection.busy_timeout(std::time::Duration::from_secs(5))?;
    connection.execute_batch(SERIES)?;
    connection.execute_batch(META)?;
    for resolution in Resolution::ALL {
        connection.execute_batch(&points(resolution.table()))?;
    }
    Ok(())
}
