//! The record of damage: every block found damaged and every salvage, kept in the store (table
//! `damage`, schema.rs) with when it was found, what it cost in points and why, until an
//! operator acknowledges it. A scrub that finds the file whole today still reports what was
//! lost before (a block the daemon left out and later wrote past, a salvage's lost rows).
//!
//! Each entry carries a checksum (CRC32C of its fields) like the series and group rows: an
//! entry that does not hold is shown as such, never silently dropped.

use rusqlite::{params, Connection};

use crate::read::DamagedBlock;
use crate::schema::{table_exists, Resolution};
use crate::{Store, StoreError};

/// What an entry of the record is about.
const BLOCK: &str = "block";
const SALVAGE: &str = "salvage";

/// One entry of the record of damage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamageEntry {
    /// Its number in the record.
    pub id: i64,
    /// When it was found, unix seconds.
    pub found: i64,
    /// The damaged block it is about (`None`: a salvage of the file).
    pub block: Option<(Resolution, i64, i64)>,
    /// The points lost (a block's points; the points a salvage could not keep).
    pub points: u64,
    /// What did not hold (a block), or what a salvage kept and lost.
    pub detail: String,
    /// When an operator acknowledged it, unix seconds.
    pub acknowledged: Option<i64>,
    /// Whether its checksum holds.
    pub holds: bool,
}

impl std::fmt::Display for DamageEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.block {
            Some((resolution, grp, start)) => write!(
                f,
                "damaged block: {resolution:?} resolution, group {grp}, {start} to {} (unix s), {} points: {}",
                start + resolution.block_span(),
                self.points,
                self.detail
            )?,
            None => write!(f, "salvage: {} points lost: {}", self.points, self.detail)?,
        }
        write!(f, " (found at {} unix s", self.found)?;
        if let Some(at) = self.acknowledged {
            write!(f, ", acknowledged at {at}")?;
        }
        if !self.holds {
            write!(f, "; this entry does not match its checksum")?;
        }
        write!(f, ")")
    }
}

/// The checksum of an entry's fields.
fn checksum(found: i64, what: &str, key: (i64, i64, i64), points: i64, detail: &str, acknowledged: i64) -> i64 {
    let mut sum = crc32c::crc32c(&found.to_le_bytes());
    for text in [what, detail] {
        sum = crc32c::crc32c_append(sum, &(text.len() as u64).to_le_bytes());
        sum = crc32c::crc32c_append(sum, text.as_bytes());
    }
    for number in [key.0, key.1, key.2, points, acknowledged] {
        sum = crc32c::crc32c_append(sum, &number.to_le_bytes());
    }
    i64::from(sum)
}

impl Store {
    /// Records `blocks`, found damaged at `found` (unix s), each once however often it is
    /// found; returns how many were new. Their points are read from the blocks table.
    pub fn record_damaged_blocks(&self, found: i64, blocks: &[DamagedBlock]) -> Result<u64, StoreError> {
        let mut new = 0;
        for block in blocks {
            let key = (block.resolution.code(), block.grp, block.start);
            let points: i64 = self.connection.query_row(
                "SELECT coalesce(sum(points), 0) FROM blocks WHERE resolution = ?1 AND grp = ?2 AND start = ?3",
                params![key.0, key.1, key.2],
                |row| row.get(0),
            )?;
            new += insert(&self.connection, found, BLOCK, key, points, block.reason)?;
        }
        Ok(new)
    }

    /// Records a salvage of the file at `found` (unix s): what it kept and lost (`detail`),
    /// and the points it could not keep.
    pub fn record_salvage(&self, found: i64, detail: &str, lost_points: u64) -> Result<(), StoreError> {
        insert(&self.connection, found, SALVAGE, (-1, -1, found), lost_points as i64, detail).map(drop)
    }

    /// The record, oldest first; with `unacknowledged_only`, what no operator acknowledged yet.
    /// Empty for a store written before the record existed.
    pub fn damage_record(&self, unacknowledged_only: bool) -> Result<Vec<DamageEntry>, StoreError> {
        if !table_exists(&self.connection, "damage")? {
            return Ok(Vec::new());
        }
        let filter = if unacknowledged_only { "WHERE acknowledged = 0" } else { "" };
        let mut statement = self.connection.prepare(&format!(
            "SELECT id, found, what, resolution, grp, start, points, detail, acknowledged, checksum FROM damage {filter} ORDER BY id"
        ))?;
        let rows = statement.query_map([], |row| {
            let what: String = row.get(2)?;
            let key: (i64, i64, i64) = (row.get(3)?, row.get(4)?, row.get(5)?);
            let (points, detail, acknowledged): (i64, String, i64) = (row.get(6)?, row.get(7)?, row.get(8)?);
            let found: i64 = row.get(1)?;
            let holds = row.get::<_, i64>(9)? == checksum(found, &what, key, points, &detail, acknowledged);
            let resolution = Resolution::ALL.into_iter().find(|r| r.code() == key.0);
            Ok(DamageEntry {
                id: row.get(0)?,
                found,
                block: resolution.filter(|_| what == BLOCK).map(|r| (r, key.1, key.2)),
                points: points.max(0) as u64,
                detail,
                acknowledged: (acknowledged != 0).then_some(acknowledged),
                holds,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Marks every entry not yet acknowledged as acknowledged at `at` (unix s): they are no
    /// longer reported as damage, and stay in the record. Returns how many.
    pub fn acknowledge_damage(&self, at: i64) -> Result<u64, StoreError> {
        let mut acknowledged = 0;
        for entry in self.damage_record(true)? {
            let (what, key) = match entry.block {
                Some((resolution, grp, start)) => (BLOCK, (resolution.code(), grp, start)),
                None => (SALVAGE, (-1, -1, entry.found)),
            };
            let sum = checksum(entry.found, what, key, entry.points as i64, &entry.detail, at);
            acknowledged += self.connection.execute(
                "UPDATE damage SET acknowledged = ?1, checksum = ?2 WHERE id = ?3",
                params![at, sum, entry.id],
            )? as u64;
        }
        Ok(acknowledged)
    }
}

/// Records in `connection`'s store a block of `points` points found damaged at `found`
/// (a backup leaving it out, salvage.rs); 1 when it was not recorded yet.
pub(crate) fn record_block(
    connection: &Connection,
    found: i64,
    block: &DamagedBlock,
    points: i64,
) -> Result<u64, StoreError> {
    insert(connection, found, BLOCK, (block.resolution.code(), block.grp, block.start), points, block.reason)
}

/// Adds an entry unless one of the same kind and key is there; 1 when added.
fn insert(
    connection: &Connection,
    found: i64,
    what: &str,
    key: (i64, i64, i64),
    points: i64,
    detail: &str,
) -> Result<u64, StoreError> {
    let sum = checksum(found, what, key, points, detail, 0);
    let added = connection.execute(
        "INSERT OR IGNORE INTO damage (found, what, resolution, grp, start, points, detail, acknowledged, checksum) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0, ?8)",
        params![found, what, key.0, key.1, key.2, points, detail, sum],
    )?;
    Ok(added as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_keeps_each_damage_once_until_acknowledged_and_shows_a_tampered_entry() {
        let dir = std::env::temp_dir().join(format!("histd-damage-record-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("histd.db"), crate::Options::default()).unwrap();
        let block = |start| DamagedBlock { resolution: Resolution::Raw, grp: 3, start, reason: "a checksum mismatch" };
        // (blocks found, at, how many new)
        let cases = [(vec![block(600)], 100, 1), (vec![block(600), block(1200)], 200, 1), (vec![block(1200)], 300, 0)];
        for (blocks, at, new) in cases {
            assert_eq!(store.record_damaged_blocks(at, &blocks).unwrap(), new, "at {at}");
        }
        store.record_salvage(400, "12 blocks kept, 1 unreadable page", 70).unwrap();
        let record = store.damage_record(true).unwrap();
        // (when found, the block, its points)
        type Found = (i64, Option<(Resolution, i64, i64)>, u64);
        let found: Vec<Found> = record.iter().map(|entry| (entry.found, entry.block, entry.points)).collect();
        assert_eq!(
            found,
            [(100, Some((Resolution::Raw, 3, 600)), 0), (200, Some((Resolution::Raw, 3, 1200)), 0), (400, None, 70)]
        );
        assert!(record.iter().all(|entry| entry.holds && entry.acknowledged.is_none()));
        assert_eq!(store.acknowledge_damage(500).unwrap(), 3);
        assert!(store.damage_record(true).unwrap().is_empty(), "acknowledged: no longer reported");
        let all = store.damage_record(false).unwrap();
        assert!(all.iter().all(|entry| entry.holds && entry.acknowledged == Some(500)), "{all:?}");
        // An entry changed behind the store's back is shown, marked.
        store.connection.execute("UPDATE damage SET points = 1 WHERE what = 'salvage'", []).unwrap();
        let tampered = store.damage_record(false).unwrap();
        assert_eq!(tampered.iter().filter(|entry| !entry.holds).count(), 1);
        assert!(tampered[2].to_string().contains("does not match its checksum"), "{}", tampered[2]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
