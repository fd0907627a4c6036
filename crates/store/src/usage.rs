//! What the store takes on disk, how fast it grows, and what it has dropped: for `/health`,
//! the admin `stats` command, `/metrics` and the web page.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, Transaction};

use crate::StoreError;

/// The store's size and counts, as of the writer's last flush.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    /// Bytes of the database file.
    pub file_bytes: u64,
    /// Bytes of its write-ahead log.
    pub wal_bytes: u64,
    /// Points (one series' row at one time and resolution) stored.
    pub points: u64,
    /// Bytes added per hour, over the last hour of flushes (`None` until there is one).
    pub growth_bytes_per_hour: Option<f64>,
    /// Points dropped to keep within `store.maxBytes`, since the store opened.
    pub budget_dropped_points: u64,
    /// Blocks dropped to keep within `store.maxBytes`, since the store opened.
    pub budget_dropped_blocks: u64,
    /// Points lost because a stored block did not decode, since the store opened.
    pub corrupt_points: u64,
    /// Series deleted because none of their rows was left within the longest retention, since
    /// the store opened.
    pub expired_series: u64,
    /// Upkeep (compaction, retention, budget) that failed and will be retried.
    pub upkeep_failures: u64,
    /// What the last failure said.
    pub last_upkeep_error: Option<String>,
    /// Finished periods of a group waiting to be compacted.
    pub backlog: usize,
    /// Microseconds the last flush's upkeep took.
    pub last_upkeep_us: u64,
    /// The period retention last ran for.
    pub(crate) trimmed_period: i64,
    /// (unix seconds, bytes) once a period, the last hour of them.
    samples: VecDeque<(i64, u64)>,
    path: PathBuf,
}

impl Usage {
    /// Reads the stored point count and the sizes of the files at `path`.
    pub(crate) fn load(connection: &Connection, path: &Path) -> Result<Usage, StoreError> {
        let points: Option<i64> =
            connection.query_row("SELECT value FROM meta WHERE key = 'points'", [], |r| r.get(0)).optional()?;
        let mut usage = Usage {
            points: points.unwrap_or(0).max(0) as u64,
            path: path.to_path_buf(),
            trimmed_period: i64::MIN,
            ..Usage::default()
        };
        usage.refresh_size();
        Ok(usage)
    }

    /// Bytes on disk: the database and its log.
    pub fn bytes(&self) -> u64 {
        self.file_bytes + self.wal_bytes
    }

    /// Bytes on disk per stored point.
    pub fn bytes_per_point(&self) -> Option<f64> {
        (self.points > 0).then(|| self.bytes() as f64 / self.points as f64)
    }

    /// Reads the files' sizes.
    pub(crate) fn refresh_size(&mut self) {
        let size = |path: &Path| std::fs::metadata(path).map_or(0, |m| m.len());
        self.file_bytes = size(&self.path);
        self.wal_bytes = size(&wal_path(&self.path));
    }

    /// Notes the size at `now` (once a period) and updates the growth rate.
    pub(crate) fn sample(&mut self, now: i64) {
        self.samples.push_back((now, self.bytes()));
        while self.samples.len() > 2 && self.samples.front().is_some_and(|&(at, _)| now - at > 3600) {
            self.samples.pop_front();
        }
        self.growth_bytes_per_hour = match (self.samples.front(), self.samples.back()) {
            (Some(&(from, before)), Some(&(to, after))) if to - from >= 600 => {
                Some((after as f64 - before as f64) * 3600.0 / (to - from) as f64)
            }
            _ => None,
        };
    }
}

/// Whether the store file at `path` is there but holds nothing, with no write-ahead log (or
/// an empty one) to recover from.
pub(crate) fn is_emptied(path: &Path) -> bool {
    let length = |path: &Path| std::fs::metadata(path).map(|metadata| metadata.len()).ok();
    length(path) == Some(0) && length(&wal_path(path)).unwrap_or(0) == 0
}

/// The write-ahead log beside the store file at `path`.
pub(crate) fn wal_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push("-wal");
    PathBuf::from(name)
}

/// Bytes of the database's pages that hold data (free pages left out).
pub(crate) fn page_bytes(connection: &Connection) -> Result<u64, StoreError> {
    let pragma = |name: &str| connection.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, i64>(0));
    let pages = (pragma("page_count")? - pragma("freelist_count")?).max(0) as u64;
    Ok(pages * pragma("page_size")?.max(0) as u64)
}

/// Bytes of the database's write-ahead log.
pub(crate) fn wal_bytes(connection: &Connection) -> u64 {
    connection.path().map_or(0, |p| std::fs::metadata(wal_path(Path::new(p))).map_or(0, |m| m.len()))
}

/// Stores the point count in the transaction that changed it.
pub(crate) fn save_points(transaction: &Transaction<'_>, points: u64) -> Result<(), StoreError> {
    transaction
        .prepare_cached("INSERT OR REPLACE INTO meta (key, value) VALUES ('points', ?1)")?
        .execute([points as i64])?;
    Ok(())
}

/// What one kind of series takes at one resolution: blocks, points and bytes of block data.
#[derive(Debug, Clone, PartialEq)]
pub struct Footprint {
    /// The kind.
    pub kind: crate::Kind,
    /// The resolution.
    pub resolution: crate::Resolution,
    /// Head blocks (one a flush, not compacted yet) or compacted ones.
    pub head: bool,
    /// Blocks.
    pub blocks: u64,
    /// Points in them.
    pub points: u64,
    /// Bytes of their data (SQLite's pages around them come on top).
    pub bytes: u64,
}

impl crate::Store {
    /// The store's data by kind, resolution, and head or compacted.
    pub fn footprint(&self) -> Result<Vec<Footprint>, StoreError> {
        let mut statement = self.connection.prepare(
            "SELECT g.kind, b.resolution, b.span = 0, count(*), sum(b.points), sum(length(b.data)) \
             FROM blocks b JOIN groups g ON g.grp = b.grp GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
        )?;
        let rows = statement.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, bool>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, i64>(5)?,
            ))
        })?;
        let mut found = Vec::new();
        for row in rows {
            let (kind, resolution, head, blocks, points, bytes) = row?;
            let (Some(kind), Some(&resolution)) =
                (crate::Kind::parse(&kind), crate::Resolution::ALL.get(resolution as usize))
            else {
                continue;
            };
            found.push(Footprint {
                kind,
                resolution,
                head,
                blocks: blocks.max(0) as u64,
                points: points.max(0) as u64,
                bytes: bytes.max(0) as u64,
            });
        }
        Ok(found)
    }
}
