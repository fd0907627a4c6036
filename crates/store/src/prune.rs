//! Series whose rows have all passed the longest retention are deleted, so a store fed
//! churning names (a request id in a name) does not keep a `series` row for every name it ever
//! saw.
//!
//! Each series row carries the last day (unix days) its rows reached an hour rollup
//! ([`seen_on`], at every hour merge); every row reaches one within about an hour and a
//! period. A series whose last day ends before the longest retention began holds no rows in
//! any block, unless it came back within the last hour (a name silent for a year and sent
//! again): those are found in the group's blocks not rolled up yet and kept.
//!
//! A deleted id is never handed out again: SQLite numbers a new row after the largest id, and
//! the largest row is never deleted here (nor are tombstones of [`crate::forget`], which are
//! purged here the same way).

use std::collections::{HashMap, HashSet};

use rusqlite::{params, Transaction};

use crate::codec::block;
use crate::schema::{Resolution, PERIOD};
use crate::StoreError;

const DAY: i64 = 86_400;

/// Records that the series `ids` had rows on the day starting at `day_start`.
pub(crate) fn seen_on(
    transaction: &Transaction<'_>,
    ids: impl Iterator<Item = i64>,
    day_start: i64,
) -> Result<(), StoreError> {
    let day = day_start.div_euclid(DAY);
    let mut statement = transaction
        .prepare_cached("UPDATE series SET last_day = ?2 WHERE id = ?1 AND (last_day IS NULL OR last_day < ?2)")?;
    for id in ids {
        statement.execute(params![id, day])?;
    }
    Ok(())
}

/// Deletes the series none of whose rows is left at `now` under the longest retention, and
/// the tombstones of forgotten series; returns the ids of the series deleted.
pub(crate) fn expired_series(
    transaction: &Transaction<'_>,
    now: i64,
    longest_retention: i64,
) -> Result<Vec<i64>, StoreError> {
    // Series not rolled up yet are dated today: kept for a whole retention at least.
    transaction
        .prepare_cached("UPDATE series SET last_day = ?1 WHERE last_day IS NULL AND grp IS NOT NULL")?
        .execute([now.div_euclid(DAY)])?;
    // A day's rows end with it; one more day of margin.
    let cutoff = (now - longest_retention).div_euclid(DAY) - 1;
    let mut candidates: HashMap<i64, Vec<i64>> = HashMap::new();
    {
        let mut statement = transaction.prepare_cached(
            "SELECT id, grp FROM series WHERE last_day < ?1 AND grp IS NOT NULL \
             AND id < (SELECT max(id) FROM series)",
        )?;
        let mut rows = statement.query([cutoff])?;
        while let Some(row) = rows.next()? {
            candidates.entry(row.get(1)?).or_default().push(row.get(0)?);
        }
    }
    let mut expired = Vec::new();
    for (grp, ids) in candidates {
        let back = in_recent_blocks(transaction, grp)?;
        expired.extend(ids.into_iter().filter(|id| !back.contains(id)));
    }
    let mut delete = transaction.prepare_cached("DELETE FROM series WHERE id = ?1")?;
    for &id in &expired {
        delete.execute([id])?;
    }
    let tombstones = transaction
        .prepare_cached("DELETE FROM series WHERE grp IS NULL AND id < (SELECT max(id) FROM series)")?
        .execute([])?;
    if !expired.is_empty() || tombstones > 0 {
        crate::forget::next_generation(transaction)?;
    }
    Ok(expired)
}

/// The series in a group's raw and minute blocks that its hour rollups do not cover yet.
fn in_recent_blocks(transaction: &Transaction<'_>, grp: i64) -> Result<HashSet<i64>, StoreError> {
    let hour_until: i64 =
        transaction.prepare_cached("SELECT hour_until FROM groups WHERE grp = ?1")?.query_row([grp], |r| r.get(0))?;
    let mut statement = transaction.prepare_cached(
        "SELECT data, resolution, start, span FROM blocks WHERE grp = ?1 AND resolution IN (?2, ?3) AND start >= ?4",
    )?;
    let mut rows =
        statement.query(params![grp, Resolution::Raw.code(), Resolution::Minute.code(), hour_until - PERIOD])?;
    let mut ids = HashSet::new();
    while let Some(row) = rows.next()? {
        let bytes = row.get_ref(0)?.as_blob().map_err(rusqlite::Error::from)?;
        // A block that does not decode holds nothing readable: its series are not kept by it.
        let place = block::Place { resolution: row.get(1)?, grp, start: row.get(2)?, span: row.get(3)? };
        ids.extend(block::series_ids(bytes, &place).unwrap_or_default());
    }
    Ok(ids)
}
