//! Where in a log (a Kafka topic) the forwarded batches the store holds were read: a global's
//! flush writes them in the transaction that writes its rows ([`agg::LogPositions`]), so
//! that after a restart the global passes over the batches its store holds already, whatever
//! the group's commit says (histd's `global/rejoin.rs`).
//!
//! One row per (log, partition) of the table `log_positions` (schema.rs): `through`, the offset up to which every message read is held,
//! and `beyond`, the offsets past it held too (a flush whose batches were read out of order
//! around one held for a later flush), as decimal numbers separated by commas.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Transaction};

use crate::StoreError;

/// Notes `positions` in the flush's `transaction`: each partition's mark raised to its new
/// `through`, the offsets past it kept.
pub(crate) fn save(transaction: &Transaction<'_>, positions: &agg::LogPositions) -> Result<(), StoreError> {
    let mut changed: BTreeMap<i32, (i64, BTreeSet<i64>)> = BTreeMap::new();
    let partitions = positions.through.iter().chain(&positions.offsets).map(|&(partition, _)| partition);
    for partition in partitions {
        if let std::collections::btree_map::Entry::Vacant(entry) = changed.entry(partition) {
            entry.insert(load(transaction, &positions.log, partition)?.unwrap_or((-1, BTreeSet::new())));
        }
    }
    for &(partition, through) in &positions.through {
        changed.entry(partition).and_modify(|stored| stored.0 = stored.0.max(through));
    }
    for &(partition, offset) in &positions.offsets {
        changed.entry(partition).and_modify(|stored| {
            stored.1.insert(offset);
        });
    }
    for (partition, (through, mut beyond)) in changed {
        beyond.retain(|&offset| offset > through);
        let beyond: Vec<String> = beyond.iter().map(i64::to_string).collect();
        transaction.execute(
            "INSERT OR REPLACE INTO log_positions (log, partition, through, beyond) VALUES (?1, ?2, ?3, ?4)",
            params![positions.log, partition, through, beyond.join(",")],
        )?;
    }
    Ok(())
}

/// One partition's row: its mark and the offsets past it.
fn load(connection: &Connection, log: &str, partition: i32) -> Result<Option<(i64, BTreeSet<i64>)>, StoreError> {
    let row = connection
        .query_row(
            "SELECT through, beyond FROM log_positions WHERE log = ?1 AND partition = ?2",
            params![log, partition],
            |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)),
        )
        .optional()?;
    Ok(row.map(|(through, beyond)| (through, parse_beyond(&beyond))))
}

fn parse_beyond(text: &str) -> BTreeSet<i64> {
    text.split(',').filter_map(|offset| offset.parse().ok()).collect()
}

/// What the store file at `path` holds of `log`: `(partition, through, beyond)` for each
/// partition, read without taking the writer's place; none from a store written before the
/// table existed.
pub fn read(path: &Path, log: &str) -> Result<Vec<(i32, i64, Vec<i64>)>, StoreError> {
    let connection = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    connection.busy_timeout(std::time::Duration::from_secs(5))?;
    if !crate::schema::table_exists(&connection, "log_positions")? {
        return Ok(Vec::new());
    }
    let mut statement =
        connection.prepare("SELECT partition, through, beyond FROM log_positions WHERE log = ?1 ORDER BY partition")?;
    let rows = statement
        .query_map([log], |row| Ok((row.get::<_, i32>(0)?, row.get::<_, i64>(1)?, row.get::<_, String>(2)?)))?;
    let mut positions = Vec::new();
    for row in rows {
        let (partition, through, beyond) = row?;
        positions.push((partition, through, parse_beyond(&beyond).into_iter().collect()));
    }
    Ok(positions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn positions(offsets: &[(i32, i64)], through: &[(i32, i64)]) -> agg::LogPositions {
        agg::LogPositions { log: "fleet".into(), offsets: offsets.to_vec(), through: through.to_vec() }
    }

    #[test]
    fn marks_rise_and_offsets_past_them_are_kept_until_the_mark_passes_them() {
        let dir = std::env::temp_dir().join(format!("histd-log-positions-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("histd.db");
        let mut connection = Connection::open(&path).unwrap();
        crate::schema::prepare(&connection).unwrap();
        // (what a flush carried, what the store then holds of partitions 0 and 1)
        type Case = (agg::LogPositions, Vec<(i32, i64, Vec<i64>)>);
        let cases: Vec<Case> = vec![
            (positions(&[(0, 3), (0, 4), (0, 6)], &[(0, 4)]), vec![(0, 4, vec![6])]),
            (positions(&[(1, 0)], &[(1, 0)]), vec![(0, 4, vec![6]), (1, 0, vec![])]),
            // A mark older than the one stored (a late interval's) lowers nothing.
            (positions(&[(0, 8)], &[(0, 2)]), vec![(0, 4, vec![6, 8])]),
            (positions(&[(0, 5), (0, 7)], &[(0, 7)]), vec![(0, 7, vec![8])]),
            (positions(&[], &[(0, 9)]), vec![(0, 9, vec![])]),
        ];
        for (flush, want) in cases {
            let transaction = connection.transaction().unwrap();
            save(&transaction, &flush).unwrap();
            transaction.commit().unwrap();
            let mut held = read(&path, "fleet").unwrap();
            held.retain(|(partition, ..)| want.iter().any(|(p, ..)| p == partition));
            assert_eq!(held, want, "after {flush:?}");
        }
        assert_eq!(read(&path, "another topic").unwrap(), []);
        // A salvage keeps them: a restarted global passes over what the salvaged store holds.
        drop(connection);
        let fresh = dir.join("salvaged.db");
        drop(crate::Store::open(&fresh, crate::Options::default()).unwrap());
        crate::salvage(&path, &fresh).unwrap();
        assert_eq!(read(&fresh, "fleet").unwrap(), read(&path, "fleet").unwrap());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
