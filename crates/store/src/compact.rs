//! Upkeep after each flush: compaction of finished periods (a group's head blocks of one
//! [`PERIOD`] become one raw block, and their minute and hour rollups merge into the hour's
//! minute block and the day's hour block: exact merges), then retention and the disk budget.
//! Each group's compaction is one transaction: a crash leaves it to be done again.

use std::time::Instant;

use rusqlite::params;

use crate::blocks::{add_row, put_block, roll_up, SeriesRows};
use crate::codec::{block, Corrupt};
use crate::schema::{Resolution, PERIOD};
use crate::{Kind, Store, StoreError};

/// Flushes over which the groups of a finished period are compacted (half a period at 10 s
/// flushes), so the work is spread and never piles up past the next period.
const SPREAD: usize = 30;

impl Store {
    /// Compacts, trims and keeps the budget; failures are counted and retried next time.
    pub(crate) fn upkeep(&mut self, now: i64) {
        let started = Instant::now();
        let result = self.compact_due(now).and_then(|()| self.trim(now));
        if let Err(error) = result {
            self.usage.upkeep_failures += 1;
            self.usage.last_upkeep_error = Some(error.to_string());
        }
        self.usage.backlog = self.pending.range(..(Resolution::Raw.block_start(now), i64::MIN)).count();
        self.usage.last_upkeep_us = started.elapsed().as_micros() as u64;
        self.usage.refresh_size();
    }

    /// Compacts finished periods, oldest first: enough groups a flush to clear what is due in
    /// about [`SPREAD`] flushes, more while the budget lasts, and all of a backlog older than
    /// one period.
    fn compact_due(&mut self, now: i64) -> Result<(), StoreError> {
        let current = Resolution::Raw.block_start(now);
        let due = self.pending.range(..(current, i64::MIN)).count();
        let least = due.div_ceil(SPREAD);
        let started = Instant::now();
        let mut done = 0;
        while let Some(&(period, grp)) = self.pending.first() {
            let behind = period < current - PERIOD;
            let spent = done >= least && started.elapsed() >= self.options.compaction_budget;
            if period >= current || (spent && !behind) {
                break;
            }
            self.compact(period, grp)?;
            self.pending.remove(&(period, grp));
            done += 1;
        }
        Ok(())
    }

    /// One group's head blocks of one period into a raw block and a minute block of the
    /// period; then every hour of the group that is complete gets its minute blocks merged
    /// into one, and its hour rows into the day's hour block.
    fn compact(&mut self, period: i64, grp: i64) -> Result<(), StoreError> {
        let kind = self.group_kinds.get(&grp).copied().unwrap_or(Kind::Counter);
        let transaction = self.connection.transaction()?;
        let (series, mut lost) = read_heads(&transaction, grp, period, kind)?;
        let minutes = roll_up(&series, Resolution::Minute, kind);
        let mut gained = 0;
        for (resolution, rows) in [(Resolution::Raw, series), (Resolution::Minute, minutes)] {
            let (points, dropped) = put_block(&transaction, resolution, grp, period, PERIOD, kind, rows)?;
            gained += points;
            lost += dropped;
        }
        gained -= delete_blocks(&transaction, Resolution::Raw, grp, period, period + PERIOD, 0)?;
        let hours_until = Resolution::Hour.row_start(period + PERIOD).max(hour_until(&transaction, grp)?);
        for hour in unmerged_hours(&transaction, grp, hours_until)? {
            let (points, dropped) = merge_hour(&transaction, grp, hour, kind)?;
            gained += points;
            lost += dropped;
        }
        transaction.execute(
            "UPDATE groups SET compacted_until = max(compacted_until, ?2), hour_until = ?3 WHERE grp = ?1",
            params![grp, period + PERIOD, hours_until],
        )?;
        crate::checked_rows::seal_group(&transaction, grp)?;
        let points = self.usage.points.saturating_add_signed(gained);
        crate::usage::save_points(&transaction, points)?;
        transaction.commit()?;
        self.usage.points = points;
        self.usage.corrupt_points += lost;
        Ok(())
    }

    /// Once a period: retention per resolution, then the disk budget (the compacted blocks
    /// that end first go until the store fits, counted), then the file shrinks.
    fn trim(&mut self, now: i64) -> Result<(), StoreError> {
        let period = Resolution::Raw.block_start(now);
        if self.usage.trimmed_period == period {
            return Ok(());
        }
        let transaction = self.connection.transaction()?;
        let mut removed = 0;
        for resolution in Resolution::ALL {
            let oldest = now - self.options.retention.of(resolution);
            removed += transaction
                .prepare_cached(
                    "DELETE FROM blocks WHERE resolution = ?1 AND span > 0 AND start + span <= ?2 RETURNING points",
                )?
                .query_map(params![resolution.code(), oldest], |r| r.get::<_, i64>(0))?
                .sum::<Result<i64, _>>()?;
        }
        let points = self.usage.points.saturating_add_signed(-removed);
        crate::usage::save_points(&transaction, points)?;
        let expired = crate::prune::expired_series(&transaction, now, self.options.retention.longest())?;
        transaction.commit()?;
        self.usage.points = points;
        self.usage.trimmed_period = period;
        if !expired.is_empty() {
            self.usage.expired_series += expired.len() as u64;
            self.forget_ids(&expired.into_iter().collect());
        }
        // Once a period the log is copied into the database and cut back to nothing (when no
        // reader holds it), so what the store takes on disk is its pages.
        self.connection.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        self.keep_budget()?;
        self.connection.execute_batch("PRAGMA incremental_vacuum")?;
        self.usage.refresh_size();
        self.usage.sample(now);
        Ok(())
    }

    /// Drops the compacted blocks that end first while the store is over `max_bytes`. The log
    /// is counted as it is when the loop starts: the deletes write to it, and it shrinks only
    /// at the next checkpoint.
    fn keep_budget(&mut self) -> Result<(), StoreError> {
        let room = self.options.max_bytes.saturating_sub(crate::usage::wal_bytes(&self.connection));
        while crate::usage::page_bytes(&self.connection)? > room {
            let transaction = self.connection.transaction()?;
            let dropped: Vec<i64> = transaction
                .prepare_cached(
                    "DELETE FROM blocks WHERE rowid IN \
                     (SELECT rowid FROM blocks WHERE span > 0 ORDER BY start + span LIMIT 16) RETURNING points",
                )?
                .query_map([], |r| r.get::<_, i64>(0))?
                .collect::<Result<_, _>>()?;
            if dropped.is_empty() {
                return Ok(()); // only the head is left: nothing older to give up
            }
            let points: i64 = dropped.iter().sum();
            let total = self.usage.points.saturating_add_signed(-points);
            crate::usage::save_points(&transaction, total)?;
            transaction.commit()?;
            self.usage.points = total;
            self.usage.budget_dropped_blocks += dropped.len() as u64;
            self.usage.budget_dropped_points += points.max(0) as u64;
        }
        Ok(())
    }
}

/// Deletes a group's blocks of one resolution and span starting in `[from, to)`; returns
/// their points.
fn delete_blocks(
    transaction: &rusqlite::Transaction<'_>,
    resolution: Resolution,
    grp: i64,
    from: i64,
    to: i64,
    span: i64,
) -> Result<i64, StoreError> {
    Ok(transaction
        .prepare_cached(
            "DELETE FROM blocks WHERE resolution = ?1 AND grp = ?2 AND span = ?3 AND start >= ?4 AND start < ?5 \
             RETURNING points",
        )?
        .query_map(params![resolution.code(), grp, span, from, to], |r| r.get::<_, i64>(0))?
        .sum::<Result<i64, _>>()?)
}

/// Hands the bytes of a group's blocks of one resolution and span starting in `[from, to)`
/// to `visit`, oldest first; returns the points of those that did not decode.
fn visit_blocks(
    transaction: &rusqlite::Transaction<'_>,
    resolution: Resolution,
    grp: i64,
    span: i64,
    from: i64,
    to: i64,
    mut visit: impl FnMut(&[u8], &block::Place) -> Result<(), Corrupt>,
) -> Result<u64, StoreError> {
    let mut statement = transaction.prepare_cached(
        "SELECT data, points, start FROM blocks WHERE resolution = ?1 AND grp = ?2 AND span = ?3 \
         AND start >= ?4 AND start < ?5 ORDER BY start",
    )?;
    let mut rows = statement.query(params![resolution.code(), grp, span, from, to])?;
    let mut corrupt = 0;
    while let Some(row) = rows.next()? {
        let bytes = row.get_ref(0)?.as_blob().map_err(rusqlite::Error::from)?;
        let place = block::Place { resolution: resolution.code(), grp, start: row.get(2)?, span };
        if visit(bytes, &place).is_err() {
            corrupt += row.get::<_, i64>(1)?.max(0) as u64;
        }
    }
    Ok(corrupt)
}

/// Where the group's hour rollups end.
fn hour_until(transaction: &rusqlite::Transaction<'_>, grp: i64) -> Result<i64, StoreError> {
    Ok(transaction.prepare_cached("SELECT hour_until FROM groups WHERE grp = ?1")?.query_row([grp], |r| r.get(0))?)
}

/// The hours before `until` that still have minute blocks of one period.
fn unmerged_hours(transaction: &rusqlite::Transaction<'_>, grp: i64, until: i64) -> Result<Vec<i64>, StoreError> {
    let mut statement = transaction.prepare_cached(
        "SELECT DISTINCT start - (start % 3600) FROM blocks \
         WHERE resolution = ?1 AND grp = ?2 AND span = ?3 AND start < ?4 ORDER BY 1",
    )?;
    let hours = statement.query_map(params![Resolution::Minute.code(), grp, PERIOD, until], |r| r.get(0))?;
    Ok(hours.collect::<Result<_, _>>()?)
}

/// An hour's minute blocks of one period each merged into the hour's minute block, and its
/// hour rows into the day's hour block; returns points gained and lost to corruption.
fn merge_hour(
    transaction: &rusqlite::Transaction<'_>,
    grp: i64,
    hour: i64,
    kind: Kind,
) -> Result<(i64, u64), StoreError> {
    let mut minutes: Vec<SeriesRows> = Vec::new();
    let mut lost = visit_blocks(transaction, Resolution::Minute, grp, PERIOD, hour, hour + 3600, |bytes, place| {
        let series = block::decode_all(bytes, place)?;
        minutes = crate::blocks::merge_series(std::mem::take(&mut minutes), series, kind);
        Ok(())
    })?;
    let mut gained = -delete_blocks(transaction, Resolution::Minute, grp, hour, hour + 3600, PERIOD)?;
    let hours = roll_up(&minutes, Resolution::Hour, kind);
    let (points, dropped) = put_block(transaction, Resolution::Minute, grp, hour, 3600, kind, minutes)?;
    gained += points;
    lost += dropped;
    let day = Resolution::Hour.block_start(hour);
    crate::prune::seen_on(transaction, hours.iter().map(|(id, _)| *id), day)?;
    let (points, dropped) = put_block(transaction, Resolution::Hour, grp, day, 86_400, kind, hours)?;
    Ok((gained + points, lost + dropped))
}

/// A group's head rows of one period, per series in id order; and the points of head blocks
/// that did not decode (dropped).
fn read_heads(
    transaction: &rusqlite::Transaction<'_>,
    grp: i64,
    period: i64,
    kind: Kind,
) -> Result<(Vec<SeriesRows>, u64), StoreError> {
    let mut series: hashbrown::HashMap<i64, Vec<crate::Row>> = hashbrown::HashMap::new();
    let corrupt = visit_blocks(transaction, Resolution::Raw, grp, 0, period, period + PERIOD, |bytes, place| {
        block::decode_each(bytes, place, |id, head_row| {
            let rows = series.entry(id).or_insert_with(|| Vec::with_capacity(64));
            add_row(rows, head_row, kind);
        })
    })?;
    let mut series: Vec<SeriesRows> = series.into_iter().collect();
    series.sort_unstable_by_key(|(id, _)| *id);
    Ok((series, corrupt))
}
