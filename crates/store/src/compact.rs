//! Upkeep after each flush: compaction of finished periods (a group's head blocks of one
//! [`PERIOD`] become one raw block, and their minute and hour rollups merge into the hour's
//! minute block and the day's hour block: exact merges), then retention and the disk budget.
//! Each group's compaction is one transaction: a crash leaves it to be done again.

use std::time::Instant;

use rusqlite::params;

use crate::blocks::{add_row, put_block, roll_up, SeriesRows};
use crate::codec::block;
use crate::schema::{Resolution, PERIOD};
use crate::{Kind, Store, StoreError};

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

    /// Compacts finished periods, oldest first: at least one group a flush, more while the
    /// budget lasts, and all of a backlog older than one period.
    fn compact_due(&mut self, now: i64) -> Result<(), StoreError> {
        let current = Resolution::Raw.block_start(now);
        let started = Instant::now();
        let mut done = 0;
        while let Some(&(period, grp)) = self.pending.first() {
            let behind = period < current - PERIOD;
            if period >= current || (done > 0 && !behind && started.elapsed() >= self.options.compaction_budget) {
                break;
            }
            self.compact(period, grp)?;
            self.pending.remove(&(period, grp));
            done += 1;
        }
        Ok(())
    }

    /// One group's head blocks of one period into a raw block and its rollups.
    fn compact(&mut self, period: i64, grp: i64) -> Result<(), StoreError> {
        let kind = self.group_kinds.get(&grp).copied().unwrap_or(Kind::Counter);
        let transaction = self.connection.transaction()?;
        let (series, corrupt) = read_heads(&transaction, grp, period, kind)?;
        let mut gained = 0;
        let mut lost = corrupt;
        let minutes = roll_up(&series, Resolution::Minute, kind);
        let hours = roll_up(&minutes, Resolution::Hour, kind);
        for (resolution, rows) in [(Resolution::Raw, series), (Resolution::Minute, minutes), (Resolution::Hour, hours)]
        {
            let start = resolution.block_start(period);
            let (points, dropped) =
                put_block(&transaction, resolution, grp, start, resolution.block_span(), kind, rows)?;
            gained += points;
            lost += dropped;
        }
        let removed: i64 = transaction
            .prepare_cached(
                "DELETE FROM blocks WHERE resolution = 0 AND grp = ?1 AND span = 0 AND start >= ?2 AND start < ?3 \
                 RETURNING points",
            )?
            .query_map(params![grp, period, period + PERIOD], |r| r.get::<_, i64>(0))?
            .sum::<Result<i64, _>>()?;
        transaction.execute(
            "UPDATE groups SET compacted_until = max(compacted_until, ?2) WHERE grp = ?1",
            params![grp, period + PERIOD],
        )?;
        let points = self.usage.points.saturating_add_signed(gained - removed);
        crate::usage::save_points(&transaction, points)?;
        transaction.commit()?;
        self.usage.points = points;
        self.usage.corrupt_points += lost;
        Ok(())
    }

    /// Retention per resolution, then the disk budget: the oldest compacted blocks go first
    /// until the store fits, and are counted.
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
        transaction.commit()?;
        self.usage.points = points;
        self.usage.trimmed_period = period;
        self.keep_budget()?;
        self.connection.execute_batch("PRAGMA incremental_vacuum")?;
        self.usage.refresh_size();
        self.usage.sample(now);
        Ok(())
    }

    /// Drops the oldest compacted blocks while the store is over `max_bytes`.
    fn keep_budget(&mut self) -> Result<(), StoreError> {
        while crate::usage::used_bytes(&self.connection)? > self.options.max_bytes {
            let transaction = self.connection.transaction()?;
            let dropped: Vec<i64> = transaction
                .prepare_cached(
                    "DELETE FROM blocks WHERE rowid IN \
                     (SELECT rowid FROM blocks WHERE span > 0 ORDER BY start LIMIT 16) RETURNING points",
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

/// A group's head rows of one period, per series in id order; and the points of head blocks
/// that did not decode (dropped).
fn read_heads(
    transaction: &rusqlite::Transaction<'_>,
    grp: i64,
    period: i64,
    kind: Kind,
) -> Result<(Vec<SeriesRows>, u64), StoreError> {
    let mut statement = transaction.prepare_cached(
        "SELECT data, points FROM blocks WHERE resolution = 0 AND grp = ?1 AND span = 0 AND start >= ?2 AND start < ?3 \
         ORDER BY start",
    )?;
    let mut rows = statement.query(params![grp, period, period + PERIOD])?;
    let mut series: std::collections::BTreeMap<i64, Vec<crate::Row>> = std::collections::BTreeMap::new();
    let mut corrupt = 0u64;
    while let Some(row) = rows.next()? {
        let bytes: Vec<u8> = row.get(0)?;
        match block::decode_all(&bytes) {
            Ok(decoded) => {
                for (id, head_rows) in decoded {
                    let entry = series.entry(id).or_default();
                    head_rows.into_iter().for_each(|r| add_row(entry, r, kind));
                }
            }
            Err(_) => corrupt += row.get::<_, i64>(1)?.max(0) as u64,
        }
    }
    Ok((series.into_iter().collect(), corrupt))
}
