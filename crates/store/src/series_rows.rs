//! Series rows carry a checksum: crc32c of the row's id, name, tags, kind and group. A flipped
//! bit in a series row that SQLite cannot see (a name turned into another series' name, text
//! no longer UTF-8, a group number changed) would otherwise put one series' points under
//! another's name; a row whose checksum does not hold is left out of every answer (its points
//! are not served), counted, and makes the writer salvage the file, which drops it.
//!
//! Stores written before checksums have rows without one: the writer fills them in at open and
//! then marks the store (`meta.series_checksums`), after which a row without one is damaged too.

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OptionalExtension};

use crate::{Kind, SeriesKey, StoreError};

/// The `meta` key set once every series row carries a checksum.
const CHECKSUMMED: &str = "series_checksums";

/// The checksum of a series row.
pub(crate) fn checksum(id: i64, name: &str, tags: &str, kind: &str, grp: i64) -> i64 {
    let mut sum = crc32c::crc32c(&id.to_le_bytes());
    for text in [name, tags, kind] {
        sum = crc32c::crc32c_append(sum, &(text.len() as u64).to_le_bytes());
        sum = crc32c::crc32c_append(sum, text.as_bytes());
    }
    i64::from(crc32c::crc32c_append(sum, &grp.to_le_bytes()))
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
        ValueRef::Integer(written) => written == checksum(id, name, tags, kind, grp),
        _ => false,
    };
    match (holds, Kind::parse(kind)) {
        (true, Some(kind)) => {
            SeriesRow::Whole { id, key: SeriesKey { name: name.into(), tags: tags.into(), kind }, grp }
        }
        _ => SeriesRow::Damaged(id),
    }
}

/// Whether every series row of the store carries a checksum (so one without is damaged).
pub(crate) fn is_checksummed(connection: &Connection) -> Result<bool, StoreError> {
    let found: Option<i64> =
        connection.query_row("SELECT value FROM meta WHERE key = ?1", [CHECKSUMMED], |r| r.get(0)).optional()?;
    Ok(found == Some(1))
}

/// Marks a store whose series rows all carry a checksum.
pub(crate) fn mark_checksummed(connection: &Connection) -> Result<(), StoreError> {
    connection.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, 1)", [CHECKSUMMED])?;
    Ok(())
}

/// Writes the checksum of the series row `id` (just inserted, or moved to a group).
pub(crate) fn seal(connection: &Connection, id: i64, key: &SeriesKey, grp: i64) -> Result<(), StoreError> {
    let sum = checksum(id, &key.name, &key.tags, key.kind.as_str(), grp);
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
        false => Err(StoreError::DamagedSeries(damaged)),
    }
}

/// Gives every series row without a checksum one (a row whose values do not read keeps none).
pub(crate) fn fill_missing(connection: &Connection) -> Result<(), StoreError> {
    let mut statement = connection
        .prepare("SELECT id, name, tags, kind, grp FROM series WHERE checksum IS NULL AND grp IS NOT NULL")?;
    let mut rows = statement.query([])?;
    let mut update = connection.prepare("UPDATE series SET checksum = ?2 WHERE id = ?1")?;
    while let Some(row) = rows.next()? {
        let [id, name, tags, kind, grp] = [0, 1, 2, 3, 4].map(|index| row.get_ref(index));
        let values = (id?.as_i64(), name?.as_str(), tags?.as_str(), kind?.as_str(), grp?.as_i64());
        if let (Ok(id), Ok(name), Ok(tags), Ok(kind), Ok(grp)) = values {
            update.execute(params![id, checksum(id, name, tags, kind, grp)])?;
        }
    }
    Ok(())
}

/// The ids of the series rows whose checksum does not hold.
pub(crate) fn damaged_rows(connection: &Connection) -> Result<Vec<i64>, StoreError> {
    let required = is_checksummed(connection)?;
    let mut statement = connection.prepare(&format!("SELECT {COLUMNS} FROM series WHERE grp IS NOT NULL"))?;
    let mut rows = statement.query([])?;
    let mut damaged = Vec::new();
    while let Some(row) = rows.next()? {
        if let SeriesRow::Damaged(id) = read(row, required)? {
            damaged.push(id);
        }
    }
    Ok(damaged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_of_a_row_is_covered() {
        let base = checksum(7, "api.latency", "env=prod", "timer", 3);
        let changed = [
            checksum(8, "api.latency", "env=prod", "timer", 3),
            checksum(7, "api.latencz", "env=prod", "timer", 3),
            checksum(7, "api.latency", "env=prof", "timer", 3),
            checksum(7, "api.latency", "env=prod", "gauge", 3),
            checksum(7, "api.latency", "env=prod", "timer", 4),
            // Text moved from one field to the next is another row.
            checksum(7, "api.latencyenv=prod", "", "timer", 3),
        ];
        for (case, sum) in changed.iter().enumerate() {
            assert_ne!(*sum, base, "case {case}");
        }
        assert_eq!(base, checksum(7, "api.latency", "env=prod", "timer", 3));
    }

    #[test]
    fn rows_read_whole_or_damaged() {
        let connection = Connection::open_in_memory().unwrap();
        connection
            .execute_batch("CREATE TABLE series (id INTEGER PRIMARY KEY, name, tags, kind, grp, checksum)")
            .unwrap();
        let good = checksum(1, "a", "", "counter", 1);
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
