//! Reading: series by name pattern, and the rows of the series a selector picks.

use rusqlite::params;

use crate::schema::Resolution;
use crate::write::{decode, row_of, COLUMNS};
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
        let mut statement = self.connection.prepare("SELECT id FROM series WHERE ?1 IS NULL OR name GLOB ?1")?;
        let ids = statement.query_map([pattern], |row| row.get::<_, i64>(0))?.collect::<Result<Vec<i64>, _>>()?;
        let mut found: Vec<(&SeriesKey, i64)> =
            ids.into_iter().filter_map(|id| self.kinds.get(&id).map(|key| (key, id))).collect();
        let total = found.len();
        if found.len() > limit {
            found.select_nth_unstable_by(limit, |a, b| a.0.cmp(b.0));
            found.truncate(limit);
        }
        found.sort_by(|a, b| a.0.cmp(b.0));
        Ok((found.into_iter().map(|(key, id)| SeriesInfo { key: key.clone(), id }).collect(), total))
    }

    /// The series `selector` picks.
    pub fn select(&self, selector: &Selector) -> Vec<SeriesInfo> {
        let mut found: Vec<SeriesInfo> = self
            .kinds
            .iter()
            .filter(|(_, key)| selector.matches(key))
            .map(|(&id, key)| SeriesInfo { key: key.clone(), id })
            .collect();
        found.sort_by(|a, b| a.key.cmp(&b.key));
        found
    }

    /// The rows of one series in `[from, to)` at `resolution`, by time.
    pub fn rows(&self, series: i64, resolution: Resolution, from: i64, to: i64) -> Result<Vec<Row>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM {} WHERE series = ?1 AND ts >= ?2 AND ts < ?3 ORDER BY ts",
            resolution.table()
        );
        let mut statement = self.connection.prepare_cached(&sql)?;
        let stored = statement.query_map(params![series, from, to], row_of)?;
        stored.map(|row| decode(series, row?)).collect()
    }

    /// The start of the first period `resolution` has not rolled up yet (raw: never rolled,
    /// so `i64::MAX`): rows before it are complete at that resolution.
    pub fn rolled_until(&self, resolution: Resolution) -> Result<i64, StoreError> {
        if resolution == Resolution::Raw {
            return Ok(i64::MAX);
        }
        let mark = format!("rolled_{}", resolution.table());
        let value = self.connection.query_row("SELECT value FROM meta WHERE key = ?1", [mark], |r| r.get(0));
        match value {
            Ok(value) => Ok(value),
            Err(rusqlite::Error::QueryReturnedNoRows) => Ok(i64::MIN),
            Err(error) => Err(error.into()),
        }
    }
}
