//! Snapshots to roll back to: `store.snapshots: { interval, keep }` (off by default: each one
//! costs about the store's size on the same disk, beyond `store.maxBytes`, so it is asked for,
//! never assumed). Every `interval` the writer starts a backup of the store into
//! `<dataDir>/snapshots/histd-<unix s>.db` on a thread of its own (the same code as `histd
//! backup`, so the writer goes on, the copy is scrubbed, and a store with damage is copied
//! without it, logged), then removes all but the `keep` newest. `histd restore --latest` puts
//! the newest whole one back. The first snapshot is due an interval after the newest one on
//! disk (at once when there is none), so restarts do not take one each.

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::telemetry::Detail;

/// The folder of snapshots inside the data directory.
pub const SNAPSHOTS_DIR: &str = "snapshots";

/// `store.snapshots`: how often, and how many are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotSettings {
    /// `store.snapshots.interval`.
    pub interval: Duration,
    /// `store.snapshots.keep` (3).
    pub keep: usize,
}

/// How a snapshot ended.
enum Outcome {
    Whole,
    WithDamage,
    Failed,
}

/// When the next snapshot is due, and the one being taken.
pub struct Snapshotter {
    settings: Option<SnapshotSettings>,
    data_dir: PathBuf,
    next: Instant,
    running: Option<JoinHandle<Outcome>>,
    taken: u64,
    with_damage: u64,
    failed: u64,
}

impl Snapshotter {
    /// Snapshots of the store in `data_dir` by `settings` (`None`: none).
    pub fn new(data_dir: &Path, settings: Option<SnapshotSettings>) -> Snapshotter {
        let mut snapshotter = Snapshotter {
            settings: None,
            data_dir: data_dir.to_path_buf(),
            next: Instant::now(),
            running: None,
            taken: 0,
            with_damage: 0,
            failed: 0,
        };
        snapshotter.set(settings);
        snapshotter
    }

    /// Takes new settings (a reload): the next snapshot is due an interval after the newest.
    pub fn set(&mut self, settings: Option<SnapshotSettings>) {
        if settings == self.settings {
            return;
        }
        self.settings = settings;
        if let Some(settings) = settings {
            let age = newest(&self.data_dir).map_or(settings.interval, |(unix_s, _)| {
                Duration::from_secs(crate::clock::unix_now_s().saturating_sub(unix_s))
            });
            self.next = Instant::now() + settings.interval.saturating_sub(age);
        }
    }

    /// After a flush: notes a snapshot that ended, and starts the next when it is due.
    pub fn step(&mut self) {
        if self.running.as_ref().is_some_and(JoinHandle::is_finished) {
            match self.running.take().map(JoinHandle::join) {
                Some(Ok(Outcome::Whole)) => self.taken += 1,
                Some(Ok(Outcome::WithDamage)) => {
                    (self.taken, self.with_damage) = (self.taken + 1, self.with_damage + 1)
                }
                _ => self.failed += 1,
            }
        }
        let Some(settings) = self.settings else { return };
        if self.running.is_some() || Instant::now() < self.next {
            return;
        }
        self.next = Instant::now() + settings.interval;
        let data_dir = self.data_dir.clone();
        let spawned = std::thread::Builder::new()
            .name("histd-snapshot".to_string())
            .spawn(move || take(&data_dir, settings.keep));
        match spawned {
            Ok(handle) => self.running = Some(handle),
            Err(error) => {
                self.failed += 1;
                tracing::error!(%error, "store.snapshots: the snapshot's thread could not start");
            }
        }
    }

    /// Its counters, for the store sink's telemetry.
    pub fn details(&self) -> [Detail; 3] {
        let total = |name, value: u64| Detail { name, value: value as f64, level: false };
        [
            total("store_snapshots_taken", self.taken),
            total("store_snapshots_with_damage", self.with_damage),
            total("store_snapshot_failures", self.failed),
        ]
    }
}

/// Takes one snapshot, then keeps the `keep` newest.
fn take(data_dir: &Path, keep: usize) -> Outcome {
    let folder = data_dir.join(SNAPSHOTS_DIR);
    if let Err(error) = std::fs::create_dir_all(&folder) {
        tracing::error!(%error, folder = %folder.display(), "store.snapshots: the folder cannot be made");
        return Outcome::Failed;
    }
    let began = Instant::now();
    let destination = folder.join(format!("histd-{}.db", crate::clock::unix_now_s()));
    let outcome = match super::back_up(data_dir, &destination) {
        Ok(None) => {
            tracing::info!(snapshot = %destination.display(), took_ms = began.elapsed().as_millis() as u64, "store.snapshots: a snapshot was taken");
            Outcome::Whole
        }
        Ok(Some(damage)) => {
            tracing::error!(
                snapshot = %destination.display(),
                left_out = %damage.summary(),
                "store.snapshots: the store has damage: the snapshot holds everything intact (histd scrub)"
            );
            Outcome::WithDamage
        }
        Err(error) => {
            tracing::error!(error = %format!("{error:#}"), snapshot = %destination.display(), "store.snapshots: no snapshot was taken");
            Outcome::Failed
        }
    };
    remove_all_but(&folder, keep);
    outcome
}

/// Removes every snapshot in `folder` but the `keep` newest, and what a snapshot that did not
/// end left behind (`.partial`).
fn remove_all_but(folder: &Path, keep: usize) {
    for (_, path) in in_folder(folder).into_iter().skip(keep) {
        if let Err(error) = std::fs::remove_file(&path) {
            tracing::warn!(%error, snapshot = %path.display(), "store.snapshots: an old snapshot could not be removed");
        }
    }
    let partial = |path: &PathBuf| path.extension().is_some_and(|extension| extension == "partial");
    let entries = std::fs::read_dir(folder).into_iter().flatten().flatten().map(|entry| entry.path());
    for path in entries.filter(partial) {
        let _ = std::fs::remove_file(path);
    }
}

/// The snapshots in the data directory `data_dir`, newest first, with when each was taken.
pub fn snapshots(data_dir: &Path) -> Vec<(u64, PathBuf)> {
    in_folder(&data_dir.join(SNAPSHOTS_DIR))
}

/// The newest snapshot in the data directory `data_dir`.
fn newest(data_dir: &Path) -> Option<(u64, PathBuf)> {
    snapshots(data_dir).into_iter().next()
}

/// `histd-<unix s>.db` files in `folder`, newest first.
fn in_folder(folder: &Path) -> Vec<(u64, PathBuf)> {
    let mut found: Vec<(u64, PathBuf)> = std::fs::read_dir(folder)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let unix_s = name.strip_prefix("histd-")?.strip_suffix(".db")?.parse().ok()?;
            Some((unix_s, entry.path()))
        })
        .collect();
    found.sort_by(|a, b| b.cmp(a));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_newest_are_kept_and_what_did_not_end_goes() {
        let folder = std::env::temp_dir().join(format!("histd-snapshots-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&folder);
        std::fs::create_dir_all(&folder).unwrap();
        let names = ["histd-100.db", "histd-300.db", "histd-200.db", "histd-400.db.partial", "notes.txt", "histd-x.db"];
        for name in names {
            std::fs::write(folder.join(name), b"").unwrap();
        }
        assert_eq!(in_folder(&folder).iter().map(|(at, _)| *at).collect::<Vec<_>>(), [300, 200, 100]);
        remove_all_but(&folder, 2);
        let mut left: Vec<String> =
            std::fs::read_dir(&folder).unwrap().flatten().map(|e| e.file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["histd-200.db", "histd-300.db", "histd-x.db", "notes.txt"]);
        let _ = std::fs::remove_dir_all(&folder);
    }
}
