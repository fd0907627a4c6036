//! Checking and copying a store: [`Store::scrub`] reads every block and checks it (its
//! checksum, its bytes) and asks SQLite to check its pages; [`Store::scrub_step`] does the
//! blocks a slice at a time, for a daemon's paced scrub; [`Store::backup_to`] writes a
//! consistent copy of the store as one file (SQLite's `VACUUM INTO`, in a read snapshot, so a
//! running writer goes on meanwhile).

use std::path::Path;

use crate::codec::block;
use crate::read::DamagedBlock;
use crate::schema::Resolution;
use crate::{Store, StoreError};

/// What a scrub found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ScrubReport {
    /// Blocks read.
    pub blocks: u64,
    /// Blocks whose checksum or bytes do not hold.
    pub damaged: Vec<DamagedBlock>,
    /// What SQLite's own check found wrong with the file's pages (empty: nothing).
    pub pages: Vec<String>,
}

impl ScrubReport {
    /// Whether nothing is damaged.
    pub fn is_clean(&self) -> bool {
        self.damaged.is_empty() && self.pages.is_empty()
    }
}

impl Store {
    /// Reads every block and checks it, then SQLite's pages (`PRAGMA quick_check`) and the
    /// series and group rows' checksums ([`Store::check_file`]).
    pub fn scrub(&self) -> Result<ScrubReport, StoreError> {
        let _snapshot = self.read_snapshot()?;
        let mut report = ScrubReport::default();
        let mut statement = self.connection.prepare("SELECT resolution, grp, start, data, span FROM blocks")?;
        let mut rows = statement.query([])?;
        while let Some(row) = rows.next()? {
            report.blocks += 1;
            let code: i64 = row.get(0)?;
            let bytes = row.get_ref(3)?.as_blob().map_err(rusqlite::Error::from)?;
            let place = block::Place { resolution: code, grp: row.get(1)?, start: row.get(2)?, span: row.get(4)? };
            if let Err(reason) = block::decode_each(bytes, &place, |_, _| {}) {
                let resolution = Resolution::ALL.into_iter().find(|r| r.code() == code).unwrap_or(Resolution::Raw);
                report.damaged.push(DamagedBlock {
                    resolution,
                    grp: row.get(1)?,
                    start: row.get(2)?,
                    reason: reason.0,
                });
            }
        }
        report.pages = self.check_file()?;
        Ok(report)
    }

    /// What SQLite's own check (`PRAGMA quick_check`: every page of every table and index,
    /// reading the whole file once) and the series and group rows' checksums find wrong with
    /// the file; empty: nothing.
    pub fn check_file(&self) -> Result<Vec<String>, StoreError> {
        let mut check = self.connection.prepare("PRAGMA quick_check")?;
        let lines = check.query_map([], |row| row.get::<_, String>(0))?;
        let mut found = Vec::new();
        for line in lines {
            let line = line?;
            if line != "ok" {
                found.push(line);
            }
        }
        let damaged = crate::checked_rows::damaged_rows(&self.connection)?;
        if !damaged.is_empty() {
            found.push(format!("rows do not match their checksums: {}", crate::checked_rows::list(&damaged)));
        }
        Ok(found)
    }

    /// Writes a consistent copy of the store to `destination` (a new file), without stopping
    /// its writer.
    pub fn backup_to(&self, destination: &Path) -> Result<(), StoreError> {
        let target = destination
            .to_str()
            .ok_or_else(|| StoreError::Backup(format!("{} is not UTF-8", destination.display())))?;
        if destination.exists() {
            return Err(StoreError::Backup(format!("{} exists already", destination.display())));
        }
        self.connection.execute("VACUUM INTO ?1", [target])?;
        Ok(())
    }
}

/// What one step of a paced scrub checked.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ScrubStep {
    /// Blocks read in this step.
    pub checked: u64,
    /// Those whose checksum or bytes do not hold.
    pub damaged: Vec<DamagedBlock>,
    /// Where the next step starts (a block's rowid), or `None`: the pass is complete.
    pub next: Option<i64>,
}

impl Store {
    /// Checks at most `limit` blocks after the one at `after` (a rowid; 0 for the first): a
    /// pass over the whole store a slice at a time, between two flushes.
    pub fn scrub_step(&self, after: i64, limit: usize) -> Result<ScrubStep, StoreError> {
        let mut step = ScrubStep::default();
        let mut statement = self.connection.prepare_cached(
            "SELECT rowid, resolution, grp, start, data, span FROM blocks WHERE rowid > ?1 ORDER BY rowid LIMIT ?2",
        )?;
        let mut rows = statement.query(rusqlite::params![after, limit as i64])?;
        let mut last = None;
        while let Some(row) = rows.next()? {
            step.checked += 1;
            last = Some(row.get::<_, i64>(0)?);
            let bytes = row.get_ref(4)?.as_blob().map_err(rusqlite::Error::from)?;
            let code: i64 = row.get(1)?;
            let place = block::Place { resolution: code, grp: row.get(2)?, start: row.get(3)?, span: row.get(5)? };
            if let Err(reason) = block::decode_each(bytes, &place, |_, _| {}) {
                let resolution = Resolution::ALL.into_iter().find(|r| r.code() == code).unwrap_or(Resolution::Raw);
                step.damaged.push(DamagedBlock { resolution, grp: row.get(2)?, start: row.get(3)?, reason: reason.0 });
            }
        }
        step.next = if step.checked == limit as u64 { last } else { None };
        Ok(step)
    }
}
