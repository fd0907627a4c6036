//! Reading: series by name pattern, and the rows of one series from its group's blocks.

use rusqlite::params;

use crate::checked_rows::GroupRow;
use crate::codec::block;
use crate::schema::Resolution;
use crate::{Row, Selector, SeriesKey, Store, StoreError};

/// A series and its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesInfo {
    /// The series.
    pub key: SeriesKey,
    /// Its id in the store.
    pub id: i64,
}

impl Store {
    /// Series whose name matches the glob `pattern` (`*`, `?`, `[...]`; all when `None`), in
    /// key order, at most `limit` of them (the first by key), and how many matched in all.
    /// Only the series returned are copied.
    pub fn series(&self, pattern: Option<&str>, limit: usize) -> Result<(Vec<SeriesInfo>, usize), StoreError> {
        let mut found = self.matching(pattern)?;
        let total = found.len();
        if found.len() > limit {
            found.select_nth_unstable_by(limit, |a, b| a.0.cmp(b.0));
            found.truncate(limit);
        }
        found.sort_by(|a, b| a.0.cmp(b.0));
        Ok((found.into_iter().map(|(key, id)| SeriesInfo { key: key.clone(), id }).collect(), total))
    }

    /// Every series whose name matches the glob `pattern` (all when `None`), unsorted, with
    /// its id; nothing is copied.
    pub fn matching(&self, pattern: Option<&str>) -> Result<Vec<(&SeriesKey, i64)>, StoreError> {
        if pattern.is_none_or(|p| p == "*") {
            return Ok(self.series.iter().map(|(&id, (key, _))| (key, id)).collect());
        }
        let mut statement = self.connection.prepare_cached("SELECT id FROM series WHERE name GLOB ?1")?;
        let ids = statement.query_map([pattern], |row| row.get::<_, i64>(0))?.collect::<Result<Vec<i64>, _>>()?;
        Ok(ids.into_iter().filter_map(|id| self.series.get(&id).map(|(key, _)| (key, id))).collect())
    }

    /// The series `selector` picks.
    pub fn select(&self, selector: &Selector) -> Vec<SeriesInfo> {
        let mut found: Vec<SeriesInfo> = self
            .series
            .iter()
            .filter(|(_, (key, _))| selector.matches(key))
            .map(|(&id, (key, _))| SeriesInfo { key: key.clone(), id })
            .collect();
        found.sort_by(|a, b| a.key.cmp(&b.key));
        found
    }

    /// The rows of one series in `[from, to)` at `resolution`, by time.
    pub fn rows(&self, series: i64, resolution: Resolution, from: i64, to: i64) -> Result<Vec<Row>, StoreError> {
        let _snapshot = self.read_snapshot()?;
        let Some(&(ref key, grp)) = self.series.get(&series) else { return Ok(Vec::new()) };
        let mut statement = self.connection.prepare_cached(
            "SELECT start, data, span FROM blocks WHERE resolution = ?1 AND grp = ?2 AND start >= ?3 AND start < ?4",
        )?;
        let earliest = from.saturating_sub(resolution.block_span());
        let mut blocks = statement.query(params![resolution.code(), grp, earliest, to])?;
        let mut rows: Vec<Row> = Vec::new();
        while let Some(stored) = blocks.next()? {
            let bytes = stored.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?;
            let place =
                block::Place { resolution: resolution.code(), grp, start: stored.get(0)?, span: stored.get(2)? };
            match block::decode_one(bytes, &place, series) {
                Ok(found) => rows.extend(found.into_iter().filter(|row| (from..to).contains(&row.ts))),
                // A damaged block is left out of the answer, never served as other numbers
                // and never the whole answer's failure; the caller hears of it.
                Err(reason) => self.damaged.borrow_mut().push(DamagedBlock {
                    resolution,
                    grp,
                    start: stored.get(0).unwrap_or(0),
                    reason: reason.0,
                }),
            }
        }
        rows.sort_by_key(|row| row.ts);
        rows.dedup_by(|later, earlier| {
            let same = later.ts == earlier.ts;
            if same {
                earlier.merge(later, key.kind);
            }
            same
        });
        Ok(rows)
    }

    /// The blocks reads found damaged (their checksum, or their bytes, do not hold) since the
    /// last call, each once per read that met it; their rows were left out of the answers.
    pub fn take_damaged(&self) -> Vec<DamagedBlock> {
        std::mem::take(&mut *self.damaged.borrow_mut())
    }

    /// The start of the first period `resolution` holds no rollups for yet in the series'
    /// group (raw: never rolled, so `i64::MAX`): rows before it are complete at that resolution.
    pub fn rolled_until(&self, series: i64, resolution: Resolution) -> Result<i64, StoreError> {
        if resolution == Resolution::Raw {
            return Ok(i64::MAX);
        }
        let Some(&(_, grp)) = self.series.get(&series) else { return Ok(i64::MIN) };
        let columns = crate::checked_rows::select(crate::checked_rows::GROUP_COLUMNS, self.row_checks.columns);
        let mut statement = self.connection.prepare_cached(&format!("SELECT {columns} FROM groups WHERE grp = ?1"))?;
        let mut rows = statement.query([grp])?;
        let Some(row) = rows.next()? else { return Ok(i64::MIN) };
        match crate::checked_rows::read_group(row, self.row_checks.required)? {
            GroupRow::Whole { hour_until, .. } if resolution == Resolution::Hour => Ok(hour_until),
            GroupRow::Whole { compacted_until, .. } => Ok(compacted_until),
            GroupRow::Damaged(grp) => {
                // Its rollups' bounds are not trusted: the series is answered from raw rows.
                self.row_checks.note(crate::DamagedRow::Group(grp));
                Ok(i64::MIN)
            }
        }
    }

    /// One consistent view of the store until the guard drops (compaction moves rows between
    /// blocks: a query reads either side of a move, never both or neither).
    pub(crate) fn read_snapshot(&self) -> Result<ReadSnapshot<'_>, StoreError> {
        let owner = self.connection.is_autocommit();
        if owner {
            self.connection.execute_batch("BEGIN")?;
        }
        Ok(ReadSnapshot { store: self, owner })
    }
}

/// An open read transaction, ended when dropped (only by the call that began it).
pub(crate) struct ReadSnapshot<'a> {
    store: &'a Store,
    owner: bool,
}

impl Drop for ReadSnapshot<'_> {
    fn drop(&mut self) {
        if self.owner {
            let _ = self.store.connection.execute_batch("COMMIT");
        }
    }
}

/// A stored block a read found damaged and left out of its answer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DamagedBlock {
    /// Its resolution.
    pub resolution: Resolution,
    /// Its series group.
    pub grp: i64,
    /// The start of the span it covers, unix seconds (the span is the resolution's block span).
    pub start: i64,
    /// What did not hold.
    pub reason: &'static str,
}
