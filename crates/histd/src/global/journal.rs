//! `global.journalDir`: every batch this global acknowledges is first written here (synced),
//! and removed once a flush has carried it to the sinks. A global killed between the two
//! merges its journal again at its next start, so what it acknowledged is not lost; the
//! identities come back with it, so a copy that arrives later is still merged once.
//!
//! One file per batch, `<sequence>.batch`: [`HEADER`], the name of the credential that sent it
//! (a length byte pair, then the name), then the body as received (compressed). A file an
//! earlier version wrote holds only the body (no snappy body can begin with the header: its
//! five `0xff` bytes are a length varint longer than snappy allows), read as sent with none.

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

/// The first bytes of a journal file that names its credential.
const HEADER: &[u8; 9] = b"\xff\xff\xff\xff\xffHJRN";

/// A batch left by an earlier run.
#[derive(Debug)]
pub struct Left {
    /// Its sequence number (its file).
    pub sequence: u64,
    /// The body as received.
    pub body: Vec<u8>,
    /// The credential that sent it (empty: none).
    pub credential: String,
}

/// Splits a journal file into its credential and body (`None`: a header that does not read).
pub(crate) fn parse(mut file: Vec<u8>) -> Option<(String, Vec<u8>)> {
    if !file.starts_with(HEADER) {
        return Some((String::new(), file));
    }
    let at = HEADER.len();
    let length = usize::from(u16::from_le_bytes([*file.get(at)?, *file.get(at + 1)?]));
    let name = std::str::from_utf8(file.get(at + 2..at + 2 + length)?).ok()?.to_string();
    file.drain(..at + 2 + length);
    Some((name, file))
}

impl Journal {
    /// Opens `dir` (created if missing) and reads what an earlier run left, oldest first.
    pub fn open(dir: PathBuf) -> io::Result<(Journal, Vec<Left>)> {
        std::fs::create_dir_all(&dir)?;
        let mut left = Vec::new();
        let mut next = 0;
        for (sequence, path) in batch_files(&dir)? {
            next = sequence + 1;
            match parse(std::fs::read(&path)?) {
                Some((credential, body)) => left.push(Left { sequence, body, credential }),
                None => {
                    tracing::error!(
                        sequence,
                        "global.journalDir: a batch's header does not read: set aside as .corrupt"
                    );
                    let _ = std::fs::rename(&path, path.with_extension("corrupt"));
                }
            }
        }
        Ok((Journal { dir, next: AtomicU64::new(next) }, left))
    }

    /// Writes a body sent with `credential` durably; its sequence number.
    pub fn write(&self, body: &[u8], credential: &str) -> io::Result<u64> {
        let sequence = self.next.fetch_add(1, Ordering::Relaxed);
        let name = &credential.as_bytes()[..credential.len().min(usize::from(u16::MAX))];
        let length = (name.len() as u16).to_le_bytes();
        write_durably(&self.dir, sequence, &[HEADER, &length, name, body])?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_name_their_credential_and_old_files_read_as_sent_with_none() {
        let body = crate::sinks::forward::format::compress(b"HFWD");
        let mut named = HEADER.to_vec();
        named.extend_from_slice(&5u16.to_le_bytes());
        named.extend_from_slice(b"web-1");
        named.extend_from_slice(&body);
        type Case<'a> = (Vec<u8>, Option<(&'a str, &'a [u8])>);
        let cases: Vec<Case> = vec![
            (body.clone(), Some(("", &body))),
            (named, Some(("web-1", &body))),
            (HEADER.to_vec(), None),
            ([&HEADER[..], &[9, 0], b"web"].concat(), None),
        ];
        for (file, want) in cases {
            let got = parse(file.clone());
            assert_eq!(got.as_ref().map(|(c, b)| (c.as_str(), b.as_slice())), want, "{file:?}");
        }
        assert!(snap::raw::decompress_len(HEADER).is_err(), "no snappy body begins with the header");
    }
}
