//! The `blocks` table: writing a block (merged into the one already at its key), and the row
//! arithmetic blocks need: adding a row to a series, merging two blocks' series, rolling rows
//! up to a coarser resolution.

use rusqlite::{params, OptionalExtension, Transaction};

use crate::codec::block;
use crate::schema::Resolution;
use crate::{Kind, Row, StoreError};

pub use crate::codec::block::SeriesRows;

/// Writes `series` as the block at (resolution, group, start, span), merged into the block
/// already there (late rows, a second flush in the same second, the next hour of an hour
/// block); returns how many points the table gained, and how many it lost because the block
/// there did not decode (it is replaced: keeping it would fail every later merge).
pub fn put_block(
    transaction: &Transaction<'_>,
    resolution: Resolution,
    grp: i64,
    start: i64,
    span: i64,
    kind: Kind,
    series: Vec<SeriesRows>,
) -> Result<(i64, u64), StoreError> {
    let key = BlockKey { resolution, grp, start, span };
    let stored = stored_block(transaction, &key)?;
    if series.is_empty() && stored.is_none() {
        return Ok((0, 0)); // a period whose series were all forgotten
    }
    merge_and_insert(transaction, &key, kind, series, stored)
}

/// Writes a flush's rows of one group (sorted by id, one a series) as its head block: encoded
/// straight from the rows, unless a block is already there to merge with.
pub fn put_head(
    transaction: &Transaction<'_>,
    grp: i64,
    ts: i64,
    kind: Kind,
    rows: Vec<(i64, Row)>,
) -> Result<(i64, u64), StoreError> {
    let key = BlockKey { resolution: Resolution::Raw, grp, start: ts, span: 0 };
    if let Some(stored) = stored_block(transaction, &key)? {
        let series = rows.into_iter().map(|(id, row)| (id, vec![row])).collect();
        return merge_and_insert(transaction, &key, kind, series, Some(stored));
    }
    let slices: Vec<(i64, &[Row])> = rows.iter().map(|(id, row)| (*id, std::slice::from_ref(row))).collect();
    Ok((insert_block(transaction, &key, &slices)?, 0))
}

/// `series` merged into the block that was at `key` (its bytes and points) and written there;
/// points gained, and lost because the stored block did not decode.
fn merge_and_insert(
    transaction: &Transaction<'_>,
    key: &BlockKey,
    kind: Kind,
    series: Vec<SeriesRows>,
    stored: Option<(Vec<u8>, i64)>,
) -> Result<(i64, u64), StoreError> {
    let (merged, before, lost) = match stored {
        None => (series, 0, 0),
        Some((bytes, points)) => match block::decode_all(&bytes, &key.place()) {
            Ok(stored) => (merge_series(stored, series, kind), points, 0),
            Err(_) => (series, points, points.max(0) as u64),
        },
    };
    let points = insert_block(transaction, key, &merged)?;
    Ok((points - before, lost))
}

/// Where a block is.
struct BlockKey {
    resolution: Resolution,
    grp: i64,
    start: i64,
    span: i64,
}

impl BlockKey {
    /// The place a block's checksum covers.
    fn place(&self) -> block::Place {
        block::Place { resolution: self.resolution.code(), grp: self.grp, start: self.start, span: self.span }
    }
}

/// The block's bytes and points, if there is one.
fn stored_block(transaction: &Transaction<'_>, key: &BlockKey) -> Result<Option<(Vec<u8>, i64)>, StoreError> {
    Ok(transaction
        .prepare_cached(
            "SELECT data, points FROM blocks WHERE resolution = ?1 AND grp = ?2 AND start = ?3 AND span = ?4",
        )?
        .query_row(params![key.resolution.code(), key.grp, key.start, key.span], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}

/// Encodes and writes a block (replacing one at its key); returns its points.
fn insert_block<R: AsRef<[Row]>>(
    transaction: &Transaction<'_>,
    key: &BlockKey,
    series: &[(i64, R)],
) -> Result<i64, StoreError> {
    let points: i64 = series.iter().map(|(_, rows)| rows.as_ref().len() as i64).sum();
    let data = block::encode(series, &key.place());
    transaction
        .prepare_cached(
            "INSERT OR REPLACE INTO blocks (resolution, grp, start, span, points, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(params![key.resolution.code(), key.grp, key.start, key.span, points, data])?;
    Ok(points)
}

/// Adds `row` to a series' rows (sorted by time): merged into the row at the same time, or
/// inserted in order.
pub fn add_row(rows: &mut Vec<Row>, row: Row, kind: Kind) {
    if rows.last().is_none_or(|last| last.ts < row.ts) {
        rows.push(row); // rows mostly come in time order
        return;
    }
    match rows.binary_search_by_key(&row.ts, |r| r.ts) {
        Ok(at) => rows[at].merge(&row, kind),
        Err(at) => rows.insert(at, row),
    }
}

/// Two blocks' series (each sorted by id) as one: a series in both gets the later block's
/// rows added to the earlier's.
pub fn merge_series(earlier: Vec<SeriesRows>, later: Vec<SeriesRows>, kind: Kind) -> Vec<SeriesRows> {
    let mut merged = Vec::with_capacity(earlier.len().max(later.len()));
    let mut later = later.into_iter().peekable();
    for (id, mut rows) in earlier {
        while let Some(next) = later.next_if(|(other, _)| *other < id) {
            merged.push(next);
        }
        if let Some((_, more)) = later.next_if(|(other, _)| *other == id) {
            more.into_iter().for_each(|row| add_row(&mut rows, row, kind));
        }
        merged.push((id, rows));
    }
    merged.extend(later);
    merged
}

/// Each series' rows merged per period of `to` (a minute or an hour), stamped with the
/// period's start.
pub fn roll_up(series: &[SeriesRows], to: Resolution, kind: Kind) -> Vec<SeriesRows> {
    series
        .iter()
        .map(|(id, rows)| {
            let mut rolled: Vec<Row> = Vec::new();
            for row in rows {
                let start = to.row_start(row.ts);
                match rolled.last_mut() {
                    Some(last) if last.ts == start => last.merge(row, kind),
                    _ => rolled.push(Row { ts: start, ..row.clone() }),
                }
            }
            (*id, rolled)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_and_rollups_add_up() {
        let earlier = vec![(1, vec![Row::counter(10, 1.0), Row::counter(20, 2.0)]), (5, vec![Row::counter(10, 4.0)])];
        let later = vec![(0, vec![Row::counter(30, 8.0)]), (1, vec![Row::counter(20, 16.0), Row::counter(70, 32.0)])];
        let merged = merge_series(earlier, later, Kind::Counter);
        type Summary = Vec<(i64, Vec<(i64, f64, f64)>)>;
        let summary: Summary =
            merged.iter().map(|(id, rows)| (*id, rows.iter().map(|r| (r.ts, r.count, r.seconds)).collect())).collect();
        assert_eq!(
            summary,
            [
                (0, vec![(30, 8.0, 10.0)]),
                (1, vec![(10, 1.0, 10.0), (20, 18.0, 20.0), (70, 32.0, 10.0)]),
                (5, vec![(10, 4.0, 10.0)])
            ]
        );
        let minutes = roll_up(&merged, Resolution::Minute, Kind::Counter);
        let rolled: Vec<(i64, f64)> = minutes[1].1.iter().map(|r| (r.ts, r.count)).collect();
        assert_eq!(rolled, [(0, 19.0), (60, 32.0)]);
    }
}
