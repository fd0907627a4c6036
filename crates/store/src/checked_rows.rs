//! The store's rows that say what its blocks are carry checksums (CRC32C): a series row (its
//! id, name, tags, kind and group) and a group row (its number, kind, and where its minute and
//! hour rollups end). A flipped bit there that SQLite cannot see would otherwise put one
//! series' points under another's name (a name turned into another series' name), or hide a
//! group's history (`compacted_until` set far ahead: probe N10). A series row whose checksum
//! does not hold is left out of every answer (its points are not served); a group row's
//! rollup bounds are not trusted (its series are answered from raw rows). Both are counted, and
//! make the writer salvage the file: the series row is dropped, the group row rebuilt from the
//! blocks ([`crate::salvage`]).
//!
//! Stores written before checksums have rows without one: the writer fills them in at open and
//! then marks the store (`meta.row_checksums`), after which a row without one is damaged too.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashSet;

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OptionalExtension};

use crate::{Kind, SeriesKey, StoreError};

/// The `meta` key set once every series and group row carries a checksum.
const CHECKSUMMED: &str = "row_checksums";

/// The checksum of a series row.
pub(crate) fn series_checksum(id: i64, name: &str, tags: &str, kind: &str, grp: i64) -> i64 {
    let mut sum = crc32c::crc32c(&id.to_le_bytes());
    for text in [name, tags, kind] {
        sum = crc32c::crc32c_append(sum, &(text.len() as u64).to_le_bytes());
        sum = crc32c::crc32c_append(sum, text.as_bytes());
    }
    i64::from(crc32c::crc32c_append(sum, &grp.to_le_bytes()))
}

/// The checksum of a group row (its member count is not covered: it only sizes groups).
pub(crate) fn group_checksum(grp: i64, kind: &str, compacted_until: i64, hour_until: i64) -> i64 {
    let mut sum = crc32c::crc32c(&grp.to_le_bytes());
    sum = crc32c::crc32c_append(sum, &(kind.len() as u64).to_le_bytes());
    sum = crc32c::crc32c_append(sum, kind.as_bytes());
    sum = crc32c::crc32c_append(sum, &compacted_until.to_le_bytes());
    i64::from(crc32c::crc32c_append(sum, &hour_until.to_le_bytes()))
}

/// A row whose checksum does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DamagedRow {
    /// The series row of this id: its points are left out of answers.
    Series(i64),
    /// The row of this group: its series are answered from raw rows only.
    Group(i64),
}

impl std::fmt::Display for DamagedRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DamagedRow::Series(id) => write!(f, "series row {id}"),
            DamagedRow::Group(grp) => write!(f, "group row {grp}"),
        }
    }
}

/// The rows, for a message.
pub(crate) fn list(rows: &[DamagedRow]) -> String {
    rows.iter().map(DamagedRow::to_string).collect::<Vec<_>>().join(", ")
}

/// A series row as read: whole, or damaged (its id, as far as it reads).
#[derive(Debug, PartialEq)]
pub(crate) enum SeriesRow {
    /// Its checksum holds.
    Whole {
        /// The id.
        id: i64,
        /// Name, tags and kind.
        key: SeriesKey,
        /// Its group.
        grp: i64,
    },
    /// A value does not read as its type, or the checksum does not hold.
    Damaged(i64),
}

/// A group row as read: whole, or damaged (its number).
#[derive(Debug, PartialEq)]
pub(crate) enum GroupRow {
    /// Its checksum holds.
    Whole {
        /// Where its minute rollups end.
        compacted_until: i64,
        /// Where its hour rollups end.
        hour_until: i64,
    },
    /// A value does not read as its type, or the checksum does not hold.
    Damaged(i64),
}

/// The columns [`read_group`] takes, in order.
pub(crate) const GROUP_COLUMNS: &str = "grp, kind, compacted_until, hour_until, checksum";

/// Reads a row selected with [`GROUP_COLUMNS`]. `required`: whether a row without a checksum
/// is damaged ([`is_checksummed`]).
pub(crate) fn read_group(row: &rusqlite::Row<'_>, required: bool) -> rusqlite::Result<GroupRow> {
    let [grp, kind, compacted_until, hour_until, sum] = [0, 1, 2, 3, 4].map(|index| row.get_ref(index));
    let grp = grp?.as_i64().unwrap_or(i64::MIN);
    let (Ok(kind), Ok(compacted_until), Ok(hour_until)) =
        (kind?.as_str(), compacted_until?.as_i64(), hour_until?.as_i64())
    else {
        return Ok(GroupRow::Damaged(grp));
    };
    let holds = match sum? {
        ValueRef::Null => !required,
        ValueRef::Integer(written) => {
            written == group_checksum(grp, kind, compacted_until, hour_until) && Kind::parse(kind).is_some()
        }
        _ => false,
    };
    Ok(match holds {
        true => GroupRow::Whole { compacted_until, hour_until },
        false => GroupRow::Damaged(grp),
    })
}

/// `columns` to select from a table that may not have its `checksum` column yet (a store from
/// before checksums whose writer has not opened it): NULL stands in for it.
pub(crate) fn select(columns: &'static str, present: bool) -> Cow<'static, str> {
    match present {
        true => Cow::Borrowed(columns),
        false => Cow::Owned(columns.replace("checksum", "NULL")),
    }
}

/// What a reading connection knows of the rows' checksums, and the damaged rows it met.
#[derive(Default)]
pub(crate) struct ReaderChecks {
    /// Whether every row carries a checksum, as of the last [`ReaderChecks::refresh`].
    pub(crate) required: bool,
    /// Whether the tables have their checksum columns (looked for until found).
    pub(crate) columns: bool,
    /// Every damaged row met (each is reported once).
    met: RefCell<HashSet<DamagedRow>>,
    /// Those not taken yet.
    untaken: RefCell<Vec<DamagedRow>>,
}

impl ReaderChecks {
    /// Reads again whether checksums are required and present (before a read).
    pub(crate) fn refresh(&mut self, connection: &Connection) -> Result<(), StoreError> {
        self.required = is_checksummed(connection)?;
        if !self.columns {
            // The groups' column is added last.
            self.columns = crate::schema::column_exists(connection, "groups", "checksum")?;
        }
        Ok(())
    }

    /// Notes a damaged row read (the first time it is met).
    pub(crate) fn note(&self, row: DamagedRow) {
        if self.met.borrow_mut().insert(row) {
            self.untaken.borrow_mut().push(row);
        }
    }

    /// The damaged rows met since the last call.
    pub(crate) fn take(&self) -> Vec<DamagedRow> {
        std::mem::take(&mut *self.untaken.borrow_mut())
    }
}

/// Writes the checksum of the group row `grp` as it now is (after an insert or an update).
pub(crate) fn seal_group(connection: &Connection, grp: i64) -> Result<(), StoreError> {
    let (kind, compacted_until, hour_until): (String, i64, i64) = connection
        .prepare_cached("SELECT kind, compacted_until, hour_until FROM groups WHERE grp = ?1")?
        .query_row([grp], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    let sum = group_checksum(grp, &kind, compacted_until, hour_until);
    connection.prepare_cached("UPDATE groups SET checksum = ?2 WHERE grp = ?1")?.execute(params![grp, sum])?;
    Ok(())
}

/// The columns [`read`] takes, in order.
pub(crate) const COLUMNS: &str = "id, name, tags, kind, grp, checksum";

/// Reads a row selected with [`COLUMNS`]. `required`: whether a row without a checksum is
/// damaged ([`is_checksummed`]).
pub(crate) fn read(row: &rusqlite::Row<'_>, required: bool) -> rusqlite::Result<SeriesRow> {
    let values = [row.get_ref(0)?, row.get_ref(1)?, row.get_ref(2)?, row.get_ref(3)?, row.get_ref(4)?, row.get_ref(5)?];
    Ok(judge(values, required))
}

/// A row's values in the order of [`COLUMNS`], judged.
pub(crate) fn judge(values: [ValueRef<'_>; 6], required: bool) -> SeriesRow {
    let [id, name, tags, kind, grp, sum] = values;
    let id = id.as_i64().unwrap_or(i64::MIN);
    let (Ok(name), Ok(tags), Ok(kind), Ok(grp)) = (name.as_str(), tags.as_str(), kind.as_str(), grp.as_i64()) else {
        return SeriesRow::Damaged(id);
    };
    let holds = match sum {
        ValueRef::Null => !required,
        ValueRef::Integer(written) => written == series_checksum(id, name, tags, kind, grp),
        _ => false,
    };
    match (holds, Kind::parse(kind)) {
        (true, Some(kind)) => {
            SeriesRow::Whole { id, key: SeriesKey { name: name.into(), tags: tags.into(), kind }, grp }
        }
        _ => SeriesRow::Damaged(id),
    }
}

/// Whether every series and group row of the store carries a checksum (so one without is
/// damaged).
pub(crate) fn is_checksummed(connection: &Connection) -> Result<bool, StoreError> {
    let found: Option<i64> =
        connection.query_row("SELECT value FROM meta WHERE key = ?1", [CHECKSUMMED], |r| r.get(0)).optional()?;
    Ok(found == Some(1))
}

/// Marks a store whose series and group rows all carry a checksum.
fn mark_checksummed(connection: &Connection) -> Result<(), StoreError> {
    connection.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, 1)", [CHECKSUMMED])?;
    Ok(())
}

/// Writes the checksum of the series row `id` (just inserted, or moved to a group).
pub(crate) fn seal_series(connection: &Connection, id: i64, key: &SeriesKey, grp: i64) -> Result<(), StoreError> {
    let sum = series_checksum(id, &key.name, &key.tags, key.kind.as_str(), grp);
    connection.prepare_cached("UPDATE series SET checksum = ?2 WHERE id = ?1")?.execute(params![id, sum])?;
    Ok(())
}

/// The writer at open: gives every row without a checksum one (a store written before them),
/// once, then finds the rows whose checksum does not hold.
pub(crate) fn fill_and_check(connection: &mut Connection) -> Result<(), StoreError> {
    if !is_checksummed(connection)? {
        let transaction = connection.transaction()?;
        fill_missing(&transaction)?;
        mark_checksummed(&transaction)?;
        transaction.commit()?;
    }
    let damaged = damaged_rows(connection)?;
    match damaged.is_empty() {
        true => Ok(()),
        false => Err(StoreError::DamagedRows(damaged)),
    }
}

/// Gives every series and group row without a checksum one (a row whose values do not read
/// keeps none).
pub(crate) fn fill_missing(connection: &Connection) -> Result<(), StoreError> {
    let groups: Vec<i64> = connection
        .prepare("SELECT grp FROM groups WHERE checksum IS NULL")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for grp in groups {
        // A row whose values do not read as their types keeps none (found damaged).
        match seal_group(connection, grp) {
            Err(StoreError::Sqlite(
                rusqlite::Error::InvalidColumnType(..) | rusqlite::Error::FromSqlConversionFailure(..),
            )) => {}
            other => other?,
        }
    }
    let mut statement = connection
        .prepare("SELECT id, name, tags, kind, grp FROM series WHERE checksum IS NULL AND grp IS NOT NULL")?;
    let mut rows = statement.query([])?;
    let mut update = connection.prepare("UPDATE series SET checksum = ?2 WHERE id = ?1")?;
    while let Some(row) = rows.next()? {
        let [id, name, tags, kind, grp] = [0, 1, 2, 3, 4].map(|index| row.get_ref(index));
        let values = (id?.as_i64(), name?.as_str(), tags?.as_str(), kind?.as_str(), grp?.as_i64());
        if let (Ok(id), Ok(name), Ok(tags), Ok(kind), Ok(grp)) = values {
            update.execute(params![id, series_checksum(id, name, tags, kind, grp)])?;
        }
    }
    Ok(())
}

/// The series and group rows whose checksum does not hold.
pub(crate) fn damaged_rows(connection: &Connection) -> Result<Vec<DamagedRow>, StoreError> {
    let required = is_checksummed(connection)?;
    let mut damaged = Vec::new();
    let mut statement = connection.prepare(&format!("SELECT {GROUP_COLUMNS} FROM groups"))?;
    let mut rows = statement.query([])?;
    while let Some(row) = rows.next()? {
        if let GroupRow::Damaged(grp) = read_group(row, required)? {
            damaged.push(DamagedRow::Group(grp));
        }
    }
    let mut statement = connection.prepare(&format!("SELECT {COLUMNS} FROM series WHERE grp IS NOT NULL"))?;
    let mut rows = statement.query([])?;
    while let Some(row) = rows.next()? {
        if let SeriesRow::Damaged(id) = read(row, required)? {
            damaged.push(DamagedRow::Series(id));
        }
    }
    Ok(damaged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_of_a_row_is_covered() {
        let base = series_checksum(7, "api.latency", "env=prod", "timer", 3);
        let changed = [
            series_checksum(8, "api.latency", "env=prod", "timer", 3),
            series_checksum(7, "api.latencz", "env=prod", "timer", 3),
            series_checksum(7, "api.latency", "env=prof", "timer", 3),
            series_checksum(7, "api.latency", "env=prod", "gauge", 3),
            series_checksum(7, "api.latency", "env=prod", "timer", 4),
            // Text moved from one field to the next is another row.
            series_checksum(7, "api.latencyenv=prod", "", "timer", 3),
        ];
        for (case, sum) in changed.iter().enumerate() {
            assert_ne!(*sum, base, "case {case}");
        }
        assert_eq!(base, series_checksum(7, "api.latency", "env=prod", "timer", 3));
    }

    #[test]
    fn rows_read_whole_or_damaged() {
        let connection = Connection::open_in_memory().unwrap();
        connection
            .execute_batch("CREATE TABLE series (id INTEGER PRIMARY KEY, name, tags, kind, grp, checksum)")
            .unwrap();
        let good = series_checksum(1, "a", "", "counter", 1);
        let cases: [(&str, &str, rusqlite::types::Value, bool, bool); 7] = [
            ("a whole row", "a", good.into(), true, true),
            ("a name changed", "b", good.into(), true, false),
            ("no checksum, none required", "a", rusqlite::types::Value::Null, false, true),
            ("no checksum where every row has one", "a", rusqlite::types::Value::Null, true, false),
            ("a checksum that is text", "a", rusqlite::types::Value::Text(good.to_string()), true, false),
            ("a name that is not UTF-8", "\u{fffd}", good.into(), true, false),
            ("a name that is a blob", "blob", good.into(), true, false),
        ];
        for (case, name, sum, required, whole) in cases {
            connection.execute("DELETE FROM series", []).unwrap();
            let name: rusqlite::types::Value = match name {
                "\u{fffd}" => rusqlite::types::Value::Blob(vec![0xe3, 0x31]),
                "blob" => rusqlite::types::Value::Blob(b"a".to_vec()),
                name => name.to_string().into(),
            };
            let insert = match name {
                // Invalid UTF-8 stored as text, as a flipped bit leaves it.
                rusqlite::types::Value::Blob(ref bytes) if bytes[0] == 0xe3 => {
                    "INSERT INTO series VALUES (1, CAST(?1 AS TEXT), '', 'counter', 1, ?2)"
                }
                _ => "INSERT INTO series VALUES (1, ?1, '', 'counter', 1, ?2)",
            };
            connection.execute(insert, params![name, sum]).unwrap();
            let read =
                connection.query_row(&format!("SELECT {COLUMNS} FROM series"), [], |row| read(row, required)).unwrap();
            assert_eq!(matches!(read, SeriesRow::Whole { .. }), whole, "{case}: {read:?}");
        }
    }
}
