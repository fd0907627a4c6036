//! `global.journalDir`: every batch this global acknowledges is first written here (synced),
//! and removed once a flush has carried it to the sinks. A global killed between the two
//! merges its journal again at its next start, so what it acknowledged is not lost; the
//! identities come back with it, so a copy that arrives later is still merged once.
//!
//! One file per batch, `<sequence>.batch`, holding the body as received (compressed).

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sinks::forward::spool::{batch_files, file_path, write_durably};

/// The journal directory and the next sequence number.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    next: AtomicU64,
}

/// A batch left by an earlier run.
#[derive(Debug)]
pub struct Left {
    /// Its sequence number (its file).
    pub sequence: u64,
    /// The body as received.
    pub body: Vec<u8>,
}

impl Journal {
    /// Opens `dir` (created if missing) and reads what an earlier run left, oldest first.
    pub fn open(dir: PathBuf) -> io::Result<(Journal, Vec<Left>)> {
        std::fs::create_dir_all(&dir)?;
        let mut left = Vec::new();
        let mut next = 0;
        for (sequence, path) in batch_files(&dir)? {
            left.push(Left { sequence, body: std::fs::read(&path)? });
            next = sequence + 1;
        }
        Ok((Journal { dir, next: AtomicU64::new(next) }, left))
    }

    /// Writes a body durably; its sequence number.
    pub fn write(&self, body: &[u8]) -> io::Result<u64> {
        let sequence = self.next.fetch_add(1, Ordering::Relaxed);
        write_durably(&self.dir, sequence, &[body])?;
        Ok(sequence)
    }

    /// Removes the batches a flush carried to the sinks (or that cannot be read).
    pub fn remove(&self, sequences: &[u64]) {
        for &sequence in sequences {
            if let Err(error) = std::fs::remove_file(file_path(&self.dir, sequence)) {
                tracing::warn!(%error, sequence, "global.journalDir: cannot remove a flushed batch (it would be merged again at the next start)");
            }
        }
    }

    /// Sets a batch that cannot be read aside as `*.corrupt`.
    pub fn set_aside(&self, sequence: u64) {
        let path = file_path(&self.dir, sequence);
        let _ = std::fs::rename(&path, path.with_extension("corrupt"));
    }
}
