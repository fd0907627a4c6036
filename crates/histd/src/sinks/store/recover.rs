//! A store file SQLite finds damaged (a bad header, pages overwritten, bitrot; a header that
//! is not one histd writes, store/src/first_page.rs), at start or
//! while histd runs, never stops histd and costs only its damaged pages: the file is moved
//! aside whole, with its write-ahead log, as `histd.db.damaged-<unix s>`, a fresh store is made,
//! and every row that can still be read is copied into it ([`store::salvage`]); ingest, the
//! other backends and the API go on. Counted: `store_damaged_files_set_aside`,
//! `store_salvaged_points`, `store_salvage_unreadable_pages` (reads skipped past a damaged
//! page), `store_salvage_unreadable_rows` (rows whose text does not read, series rows whose
//! checksum does not hold),
//! `store_salvage_lost_points` (points whose group's row was lost); logged once each.
//!
//! While histd runs the damage is met by the writer (a write or a scrub step that SQLite
//! refuses as malformed) or by a reader (a query): the reader asks the writer to check the
//! file (`PRAGMA quick_check` and the series rows' checksums, at most once a minute), and the
//! writer salvages when the check finds damage. While it runs, the old file keeps being written: a salvage that cannot
//! make its fresh store (no space) puts the file back and changes nothing.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::telemetry::Detail;

/// The least time between two page checks a reader asks for.
const CHECK_AT_MOST_EVERY: Duration = Duration::from_secs(60);

/// What the writer salvaged since start.
#[derive(Debug, Default)]
pub struct Recovery {
    files_set_aside: u64,
    salvaged_points: u64,
    unreadable_pages: u64,
    unreadable_rows: u64,
    lost_points: u64,
    last_check: Option<Instant>,
}

impl Recovery {
    /// Opens the store at `path`; a damaged file is set aside and salvaged into a fresh one.
    /// Any other failure (no space, no permission) stops the start, as it should.
    pub fn open(&mut self, path: &Path, options: store::Options) -> anyhow::Result<store::Store> {
        match store::Store::open(path, options) {
            Ok(store) => Ok(store),
            Err(error) if error.is_damaged_file() => self.salvage(path, options, &error),
            Err(error) => Err(error).with_context(|| format!("cannot open the store {}", path.display())),
        }
    }

    /// Replaces `store`, found damaged while running (`why`), by a salvaged copy, and says
    /// whether it did. Every other connection to the file must be closed: a connection closing
    /// after the file moved would remove the new file's write-ahead log, which SQLite names by
    /// path. When no copy can be made the damaged file is opened again as it was, and the
    /// reason logged.
    pub fn replace(
        &mut self,
        store: store::Store,
        path: &Path,
        options: store::Options,
        why: &store::StoreError,
    ) -> anyhow::Result<(store::Store, bool)> {
        drop(store);
        match self.salvage(path, options, why) {
            Ok(fresh) => Ok((fresh, true)),
            Err(error) => {
                tracing::error!(
                    error = %format!("{error:#}"),
                    "the store file is damaged and could not be salvaged; it is written as it is"
                );
                let again = store::Store::open(path, options);
                Ok((again.with_context(|| format!("cannot open the store {} again", path.display()))?, false))
            }
        }
    }

    /// Whether `store`'s pages are damaged, asked by a reader that met damage; checked at most
    /// once a minute (the check reads the whole file). The error SQLite gave, when damaged.
    pub fn check(&mut self, store: &store::Store) -> Option<store::StoreError> {
        if self.last_check.is_some_and(|at| at.elapsed() < CHECK_AT_MOST_EVERY) {
            return None;
        }
        self.last_check = Some(Instant::now());
        match store.check_file() {
            Ok(found) if found.is_empty() => None,
            Ok(found) => Some(store::StoreError::Salvage(format!("the file is damaged: {}", found.join("; ")))),
            Err(error) if error.is_damaged_file() => Some(error),
            Err(error) => {
                tracing::warn!(%error, "store: checking the file's pages failed");
                None
            }
        }
    }

    /// Sets the file at `path` aside, makes a fresh store there and salvages into it. A failure
    /// puts the damaged file back.
    fn salvage(
        &mut self,
        path: &Path,
        options: store::Options,
        why: &store::StoreError,
    ) -> anyhow::Result<store::Store> {
        let aside = store::data_dir::damaged(path, crate::clock::unix_now_s());
        store::data_dir::move_files(path, &aside)
            .with_context(|| format!("cannot move the damaged store {} aside", path.display()))?;
        let fresh = store::Store::open(path, options).map(drop);
        if let Err(error) = fresh {
            let _ = store::data_dir::move_files(&aside, path);
            return Err(error).with_context(|| format!("cannot make a fresh store {} to salvage into", path.display()));
        }
        self.files_set_aside += 1;
        let (record, lost) = match store::salvage(&aside, path) {
            Ok(salvaged) => {
                self.salvaged_points += salvaged.points;
                self.unreadable_pages += salvaged.unreadable_pages;
                self.unreadable_rows += salvaged.unreadable_rows;
                self.lost_points += salvaged.orphaned_points;
                tracing::error!(
                    %why,
                    kept = %aside.display(),
                    series = salvaged.series,
                    blocks = salvaged.blocks,
                    points = salvaged.points,
                    unreadable_pages = salvaged.unreadable_pages,
                    unreadable_rows = salvaged.unreadable_rows,
                    rebuilt_groups = salvaged.rebuilt_groups,
                    first_page_rebuilt = salvaged.first_page_rebuilt,
                    lost_series = salvaged.orphaned_series,
                    lost_points = salvaged.orphaned_points,
                    "the store file is damaged: what could be read was copied into a fresh store, and the file is kept aside (store_damaged_files_set_aside)"
                );
                let record = format!(
                    "{why}; kept aside as {}; copied {} series, {} blocks, {} points; {} unreadable pages, {} unreadable rows, {} series lost with their group row{}",
                    aside.display(),
                    salvaged.series,
                    salvaged.blocks,
                    salvaged.points,
                    salvaged.unreadable_pages,
                    salvaged.unreadable_rows,
                    salvaged.orphaned_series,
                    if salvaged.first_page_rebuilt { "; the first page was rebuilt" } else { "" }
                );
                (record, salvaged.orphaned_points)
            }
            Err(error) => {
                tracing::error!(
                    %why,
                    %error,
                    kept = %aside.display(),
                    "the store file is damaged and nothing could be read from it: a fresh store begins, and the file is kept aside (store_damaged_files_set_aside)"
                );
                (
                    format!(
                        "{why}; kept aside as {}; nothing could be read ({error}): a fresh store began",
                        aside.display()
                    ),
                    0,
                )
            }
        };
        let store = store::Store::open(path, options)
            .with_context(|| format!("cannot open the salvaged store {}", path.display()))?;
        // The salvage goes into the record of damage of the store it made (an operator
        // acknowledges it with `histd scrub --acknowledge`).
        if let Err(error) = store.record_salvage(crate::clock::unix_now_s() as i64, &record, lost) {
            tracing::warn!(%error, "store: the salvage could not be recorded in the record of damage");
        }
        Ok(store)
    }

    /// Its counters, for the store sink's telemetry.
    pub fn details(&self) -> [Detail; 5] {
        let total = |name, value: u64| Detail { name, value: value as f64, level: false };
        [
            total("store_damaged_files_set_aside", self.files_set_aside),
            total("store_salvaged_points", self.salvaged_points),
            total("store_salvage_unreadable_pages", self.unreadable_pages),
            total("store_salvage_unreadable_rows", self.unreadable_rows),
            total("store_salvage_lost_points", self.lost_points),
        ]
    }
}
