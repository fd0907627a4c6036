//! Forgetting series: their sections cut out of every block of their group (every resolution,
//! the head too) and their `series` rows turned into tombstones, in one transaction.
//!
//! A tombstone keeps the id (`kind = 'forgotten'`, no group), so SQLite never gives it to a
//! new series: a reader that still maps the id to the old series finds no rows for it, never
//! another series' rows. Readers see a new generation in `meta` and load the series again.

use std::collections::{HashMap, HashSet};

use rusqlite::{params, OptionalExtension, Transaction};

use crate::codec::block;
use crate::{SeriesKey, Store, StoreError};

/// What [`Store::forget`] deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Forgotten {
    /// Series found and forgotten.
    pub series: usize,
    /// Their points, every resolution.
    pub points: u64,
    /// Blocks that held them and did not decode: left as they were (the rows in them can no
    /// longer be reached, the id being retired).
    pub corrupt_blocks: u64,
}

/// The `meta` key readers compare to know that series were forgotten since they loaded them.
pub(crate) const GENERATION: &str = "forgotten";

impl Store {
    /// Forgets the series `keys` name (the writer's call): every row of theirs at every
    /// resolution is deleted, and a series sent again afterwards starts afresh under a new id.
    /// Keys not in the store are skipped.
    pub fn forget(&mut self, keys: &[SeriesKey]) -> Result<Forgotten, StoreError> {
        let transaction = self.connection.transaction()?;
        let mut groups: HashMap<i64, HashSet<i64>> = HashMap::new();
        let mut forgotten = Forgotten::default();
        for key in keys {
            if let Some((id, grp)) = stored_id(&transaction, key)? {
                groups.entry(grp).or_default().insert(id);
                forgotten.series += 1;
            }
        }
        for (grp, ids) in &groups {
            let (points, corrupt) = cut_group(&transaction, *grp, ids)?;
            forgotten.points += points;
            forgotten.corrupt_blocks += corrupt;
            for &id in ids {
                retire(&transaction, id)?;
            }
        }
        if forgotten.series > 0 {
            next_generation(&transaction)?;
        }
        let points = self.usage.points.saturating_sub(forgotten.points);
        crate::usage::save_points(&transaction, points)?;
        transaction.commit()?;
        self.usage.points = points;
        let retired: HashSet<i64> = groups.into_values().flatten().collect();
        self.forget_ids(&retired);
        Ok(forgotten)
    }

    /// The writer's caches without `ids`: a key sent again looks its series up anew.
    pub(crate) fn forget_ids(&mut self, ids: &HashSet<i64>) {
        for known in &mut self.known {
            known.retain(|_, (id, _)| !ids.contains(id));
        }
        self.reset_order();
    }

    /// Readers: drops every loaded series when some were forgotten since the last load (the
    /// next [`Store::load_series`] reads them all again).
    pub(crate) fn check_generation(&mut self) -> Result<(), StoreError> {
        let generation: i64 = self
            .connection
            .prepare_cached("SELECT value FROM meta WHERE key = ?1")?
            .query_row([GENERATION], |r| r.get(0))
            .optional()?
            .unwrap_or(0);
        if generation != self.generation {
            self.series.clear();
            self.generation = generation;
        }
        Ok(())
    }
}

/// Tells readers that series went since they loaded them.
pub(crate) fn next_generation(transaction: &Transaction<'_>) -> Result<(), StoreError> {
    transaction
        .prepare_cached(
            "INSERT INTO meta (key, value) VALUES (?1, 1) ON CONFLICT (key) DO UPDATE SET value = value + 1",
        )?
        .execute([GENERATION])?;
    Ok(())
}

/// The id and group of a stored series.
fn stored_id(transaction: &Transaction<'_>, key: &SeriesKey) -> Result<Option<(i64, i64)>, StoreError> {
    Ok(transaction
        .prepare_cached("SELECT id, grp FROM series WHERE name = ?1 AND tags = ?2 AND kind = ?3 AND grp IS NOT NULL")?
        .query_row(params![key.name, key.tags, key.kind.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}

/// Cuts `ids` out of every block of group `grp`; returns the points removed and the blocks
/// that did not decode.
fn cut_group(transaction: &Transaction<'_>, grp: i64, ids: &HashSet<i64>) -> Result<(u64, u64), StoreError> {
    let mut blocks: Vec<(i64, i64, Vec<u8>, block::Place)> = Vec::new();
    {
        let mut statement = transaction
            .prepare_cached("SELECT rowid, points, data, resolution, start, span FROM blocks WHERE grp = ?1")?;
        let mut rows = statement.query([grp])?;
        while let Some(row) = rows.next()? {
            let place = block::Place { resolution: row.get(3)?, grp, start: row.get(4)?, span: row.get(5)? };
            blocks.push((row.get(0)?, row.get(1)?, row.get(2)?, place));
        }
    }
    let (mut points, mut corrupt) = (0, 0);
    for (rowid, stored_points, bytes, place) in blocks {
        match block::without(&bytes, &place, |id| ids.contains(&id)) {
            Ok(None) => {}
            Ok(Some(cut)) => {
                points += cut.rows;
                match cut.bytes {
                    None => transaction.prepare_cached("DELETE FROM blocks WHERE rowid = ?1")?.execute([rowid])?,
                    Some(data) => transaction
                        .prepare_cached("UPDATE blocks SET data = ?2, points = ?3 WHERE rowid = ?1")?
                        .execute(params![rowid, data, (stored_points - cut.rows as i64).max(0)])?,
                };
            }
            Err(_) => corrupt += 1,
        }
    }
    Ok((points, corrupt))
}

/// Turns a series row into a tombstone that holds its id.
fn retire(transaction: &Transaction<'_>, id: i64) -> Result<(), StoreError> {
    transaction
        .prepare_cached(
            "UPDATE series SET name = '', tags = CAST(id AS TEXT), kind = 'forgotten', grp = NULL WHERE id = ?1",
        )?
        .execute([id])?;
    Ok(())
}
