//! The task: each flush is encoded and appended in one write, on a blocking thread (a slow
//! disk holds up this sink's queue, never the flusher or ingest). Before each write the file
//! is reopened when it was moved or removed (logrotate's `create` mode: nothing to signal),
//! and rotated when it has grown past `maxBytes`.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use agg::Snapshot;
use tokio::task::JoinHandle;

use super::config::FileConfig;
use super::encode::encode;
use crate::clock::unix_now_s;
use crate::sinks::{Context, SinkTelemetry};

/// Starts the file backend's task; `prefix_stats` names histd's own series (left out of
/// `statsd`).
pub fn spawn(config: FileConfig, prefix_stats: String, context: Context) -> JoinHandle<()> {
    let (mut flushes, counts) = (context.flushes(), context.telemetry);
    tokio::spawn(async move {
        let mut writer = Writer::new(config.clone());
        while let Some(snapshot) = flushes.next().await {
            let (prefix, counts) = (prefix_stats.clone(), counts.clone());
            let done = tokio::task::spawn_blocking(move || {
                writer.write_flush(&snapshot, &prefix, &counts);
                writer
            })
            .await;
            writer = done.unwrap_or_else(|_| {
                tracing::error!("the file backend's writer failed; the file is opened again at the next flush");
                Writer::new(config.clone())
            });
        }
    })
}

/// The open file and what rotation needs to know of it.
pub struct Writer {
    config: FileConfig,
    file: Option<File>,
    /// The open file's device and inode, to notice it was moved or removed.
    identity: (u64, u64),
    size: u64,
    /// Failing since the last write that worked (logged once per run).
    failing: bool,
}

impl Writer {
    /// A writer of `config.path`, opened at the first flush.
    pub fn new(config: FileConfig) -> Writer {
        Writer { config, file: None, identity: (0, 0), size: 0, failing: false }
    }

    /// Appends one flush; a failure is counted and logged once per run of failures, and the
    /// file opened again at the next flush.
    pub fn write_flush(&mut self, snapshot: &Snapshot, prefix_stats: &str, telemetry: &SinkTelemetry) {
        let (text, series) = encode(snapshot, self.config.format, prefix_stats);
        match self.append(text.as_bytes()) {
            Ok(()) => {
                telemetry.points_out.add(series);
                telemetry.bytes_out.add(text.len() as u64);
                telemetry.succeeded(unix_now_s());
                self.failing = false;
            }
            Err(error) => {
                telemetry.failed(unix_now_s());
                telemetry.drop_points(crate::sinks::DropReason::Rejected, series);
                self.file = None;
                if !self.failing {
                    self.failing = true;
                    tracing::error!(file = %self.config.path.display(), %error, "the file backend cannot write: this flush is lost (file.dropped_points.rejected)");
                }
            }
        }
    }

    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.moved_away() {
            self.file = None;
        }
        let max = self.config.max_bytes;
        if self.file.is_some() && max > 0 && self.size > 0 && self.size + bytes.len() as u64 > max {
            self.file = None;
            rotate(&self.config.path, self.config.keep)?;
        }
        if self.file.is_none() {
            self.open()?;
        }
        let file = self.file.as_mut().unwrap_or_else(|| unreachable!("opened above"));
        file.write_all(bytes)?;
        self.size += bytes.len() as u64;
        Ok(())
    }

    /// Whether the path no longer names the open file (moved by logrotate, removed).
    fn moved_away(&self) -> bool {
        self.file.is_some()
            && std::fs::metadata(&self.config.path).map_or(true, |meta| (meta.dev(), meta.ino()) != self.identity)
    }

    fn open(&mut self) -> std::io::Result<()> {
        if let Some(parent) = self.config.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(&self.config.path)?;
        let meta = file.metadata()?;
        (self.identity, self.size) = ((meta.dev(), meta.ino()), meta.len());
        self.file = Some(file);
        Ok(())
    }
}

/// `path` becomes `path.1`, `path.1` becomes `path.2`..., the oldest past `keep` removed.
pub fn rotate(path: &Path, keep: u32) -> std::io::Result<()> {
    let numbered = |n: u32| -> PathBuf {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    };
    if keep == 0 {
        return remove_if_present(path);
    }
    remove_if_present(&numbered(keep))?;
    for n in (1..keep).rev() {
        rename_if_present(&numbered(n), &numbered(n + 1))?;
    }
    rename_if_present(path, &numbered(1))
}

fn remove_if_present(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}

fn rename_if_present(from: &Path, to: &Path) -> std::io::Result<()> {
    match std::fs::rename(from, to) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
        _ => Ok(()),
    }
}
