//! Batches waiting to be sent, oldest first, bounded in bytes: in memory, or with
//! `forward.spoolDir` in files that outlive the process.
//!
//! On disk each batch is one file, `<sequence, 16 hex digits>.batch`, written to a temporary
//! name, synced and renamed (a crash leaves a whole file or none), and removed once a node
//! took it. A file holds `HSPL`, version 2, the node the part was cut for (u16 length + its
//! name), the series it holds (u64 LE), the compressed batch, and a checksum trailer
//! ([`crate::integrity`]: `HSUM` and the CRC32C of all before it). At start the files left
//! behind are sent first, in sequence order. A batch sent but not yet removed when the
//! process died is sent again: the global merges its identity once.
//!
//! A file whose checksum does not verify (bit rot, a torn write) is never sent: it is set
//! aside as `*.corrupt` and its series counted as `dropped_points.corrupt`, at start or when it
//! is read to be sent. Version 1 files (written before checksums) are read unverified.

use std::collections::{HashSet, VecDeque};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;

const FILE_MAGIC: &[u8; 4] = b"HSPL";
/// The version written: with a checksum trailer.
const FILE_VERSION: u8 = 2;
/// The version written before checksums, still read.
const UNCHECKED_VERSION: u8 = 1;

/// One waiting batch.
#[derive(Debug, Clone)]
pub struct Waiting {
    /// Order of arrival (the file's name on disk).
    pub sequence: u64,
    /// The node the part was cut for (its `forward.nodes` URL).
    pub part: String,
    /// Series it holds.
    pub series: u64,
    /// Compressed bytes.
    pub bytes: u64,
    /// The compressed batch, in memory (on disk it is read when sent).
    body: Option<Bytes>,
}

/// The queue.
#[derive(Debug)]
pub struct Spool {
    dir: Option<PathBuf>,
    waiting: VecDeque<Waiting>,
    bytes: u64,
    limit: u64,
    next_sequence: u64,
    /// Why the last batch could not be written to `dir` (it was kept in memory instead),
    /// until the sink takes it to log it.
    write_failure: Option<io::Error>,
    /// Batches being sent now: never dropped to make room (their outcome is not known yet).
    sending: HashSet<u64>,
}

/// Batches the spool gave up: dropped to stay within its bytes, or found damaged.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    /// Batches.
    pub batches: u64,
    /// Series they held (of a damaged file, as its header says when it still reads).
    pub series: u64,
}

impl Spool {
    /// A spool bounded by `limit` bytes, in `dir` when given (created if missing; batches
    /// left there by an earlier run wait first). Files that cannot be read are renamed
    /// `*.corrupt` and counted.
    pub fn open(dir: Option<PathBuf>, limit: u64) -> io::Result<(Spool, Dropped)> {
        let mut spool = Spool {
            dir,
            waiting: VecDeque::new(),
            bytes: 0,
            limit,
            next_sequence: 0,
            write_failure: None,
            sending: HashSet::new(),
        };
        let mut dropped = Dropped::default();
        if let Some(dir) = spool.dir.clone() {
            std::fs::create_dir_all(&dir)?;
            for (sequence, path) in batch_files(&dir)? {
                let file = std::fs::read(&path)?;
                match read_file(&file) {
                    Ok(batch) => {
                        let (part, series, bytes) = (batch.part.to_string(), batch.series, batch.body.len() as u64);
                        spool.waiting.push_back(Waiting { sequence, part, series, bytes, body: None });
                        spool.bytes += bytes;
                    }
                    Err(error) => {
                        let series = claimed_series(&file);
                        tracing::error!(file = %path.display(), %error, series, "forward spool: a damaged batch file is set aside as .corrupt, not sent (dropped_points.corrupt)");
                        let _ = std::fs::rename(&path, path.with_extension("corrupt"));
                        dropped.batches += 1;
                        dropped.series += series;
                    }
                }
            }
            spool.next_sequence = next_sequence(&dir)?;
        }
        Ok((spool, dropped))
    }

    /// The directory batches are written to, when there is one.
    pub fn dir(&self) -> Option<&std::path::Path> {
        self.dir.as_deref()
    }

    /// Batches waiting.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Its bound in bytes (`forward.spoolBytes`).
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Compressed bytes waiting.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// True when batches are kept on disk.
    pub fn on_disk(&self) -> bool {
        self.dir.is_some()
    }

    /// Queues a batch (written and synced first on disk), then drops the oldest while over the
    /// limit (never the newest, nor one being sent: the spool may pass its limit by the
    /// batches in flight until their answers come). A batch the directory cannot take (a full disk, an I/O error)
    /// is kept in memory instead, within the same limit, and sent as the others are: the
    /// network path does not depend on the disk ([`Spool::take_write_failure`] says why).
    pub fn push(&mut self, part: &str, series: u64, body: Vec<u8>) -> io::Result<Dropped> {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        let bytes = body.len() as u64;
        let written = match &self.dir {
            Some(dir) => write_file(dir, sequence, part, series, &body),
            None => Err(io::Error::other("no spool directory")),
        };
        let body = match written {
            Ok(()) => None,
            Err(error) => {
                if self.dir.is_some() {
                    self.write_failure = Some(error);
                }
                Some(Bytes::from(body))
            }
        };
        self.waiting.push_back(Waiting { sequence, part: part.to_string(), series, bytes, body });
        self.bytes += bytes;
        let mut dropped = Dropped::default();
        while self.bytes > self.limit {
            let older = self.waiting.iter().take(self.waiting.len() - 1);
            let Some(oldest) = older.map(|batch| batch.sequence).find(|sequence| !self.sending.contains(sequence))
            else {
                break;
            };
            if let Some(gone) = self.remove(oldest)? {
                dropped.batches += 1;
                dropped.series += gone.series;
            }
        }
        Ok(dropped)
    }

    /// Marks a batch as being sent (or, `false`, as answered): a batch in flight is not dropped
    /// to make room, so it is never counted both dropped and delivered.
    pub fn set_sending(&mut self, sequence: u64, sending: bool) {
        match sending {
            true => self.sending.insert(sequence),
            false => self.sending.remove(&sequence),
        };
    }

    /// True while the batch numbered `sequence` waits (it was not sent, dropped or set aside).
    pub fn holds(&self, sequence: u64) -> bool {
        self.position(sequence).is_some()
    }

    /// Where the batch numbered `sequence` waits: batches wait in the order of their numbers
    /// (a pass over a spool of thousands asks once a batch).
    fn position(&self, sequence: u64) -> Option<usize> {
        self.waiting.binary_search_by_key(&sequence, |batch| batch.sequence).ok()
    }

    /// Why a batch could not be written to the directory since the last call (it is held in
    /// memory instead).
    pub fn take_write_failure(&mut self) -> Option<io::Error> {
        self.write_failure.take()
    }

    /// Batches and series held only in memory (none without a directory's failure): lost if
    /// the process stops before a node takes them.
    pub fn held_in_memory(&self) -> (u64, u64) {
        let in_memory = self.waiting.iter().filter(|batch| batch.body.is_some());
        in_memory.fold((0, 0), |(batches, series), batch| (batches + 1, series + batch.series))
    }

    /// What waits, oldest first (bodies in memory are shared, not copied).
    pub fn waiting(&self) -> Vec<Waiting> {
        self.oldest(usize::MAX)
    }

    /// The `count` oldest batches waiting (a Kafka send takes 64 of a spool of thousands).
    pub fn oldest(&self, count: usize) -> Vec<Waiting> {
        self.waiting.iter().take(count).cloned().collect()
    }

    /// The compressed body of a waiting batch. A file found damaged is an error of kind
    /// `InvalidData` (set it aside with [`Spool::set_aside`]).
    pub fn body(&self, batch: &Waiting) -> io::Result<Bytes> {
        match (&batch.body, &self.dir) {
            (Some(body), _) => Ok(body.clone()),
            (None, Some(dir)) => {
                let bytes = std::fs::read(file_path(dir, batch.sequence))?;
                let body = read_file(&bytes).map_err(|why| io::Error::new(io::ErrorKind::InvalidData, why))?.body;
                let start = body.as_ptr() as usize - bytes.as_ptr() as usize;
                let end = start + body.len();
                Ok(Bytes::from(bytes).slice(start..end))
            }
            (None, None) => unreachable!("a batch in memory keeps its body"),
        }
    }

    /// Removes the batch numbered `sequence`, keeping its damaged file as `*.corrupt`.
    pub fn set_aside(&mut self, sequence: u64) -> Option<Waiting> {
        if let Some(dir) = &self.dir {
            let path = file_path(dir, sequence);
            let _ = std::fs::rename(&path, path.with_extension("corrupt"));
        }
        self.remove(sequence).ok().flatten()
    }

    /// Removes the oldest batch (its file too).
    pub fn pop_front(&mut self) -> io::Result<Option<Waiting>> {
        match self.waiting.front() {
            Some(front) => self.remove(front.sequence),
            None => Ok(None),
        }
    }

    /// Removes the batch numbered `sequence` (its file too).
    pub fn remove(&mut self, sequence: u64) -> io::Result<Option<Waiting>> {
        let Some(at) = self.position(sequence) else { return Ok(None) };
        let Some(batch) = self.waiting.remove(at) else { return Ok(None) };
        self.bytes -= batch.bytes;
        self.sending.remove(&sequence);
        if let Some(dir) = &self.dir {
            match std::fs::remove_file(file_path(dir, sequence)) {
                Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
                _ => {}
            }
        }
        Ok(Some(batch))
    }
}

/// `<dir>/<sequence as 16 hex digits>.batch`.
pub fn file_path(dir: &Path, sequence: u64) -> PathBuf {
    dir.join(format!("{sequence:016x}.batch"))
}

/// The batch files in `dir` (named as [`file_path`] names them: other names are not histd's),
/// by sequence; temporary files of an interrupted write are removed.
pub fn batch_files(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.ends_with(".tmp") {
            let _ = std::fs::remove_file(&path);
        } else if let Some(sequence) = numbered(name, ".batch") {
            files.push((sequence, path));
        }
    }
    files.sort();
    Ok(files)
}

/// The first sequence number no file of `dir` has, batches and those set aside as
/// `.corrupt` alike (a new batch never takes the number, and so the place, of a kept one).
pub fn next_sequence(dir: &Path) -> io::Result<u64> {
    let mut next = 0;
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_str().unwrap_or_default();
        if let Some(sequence) = numbered(name, ".batch").or_else(|| numbered(name, ".corrupt")) {
            next = next.max(sequence + 1);
        }
    }
    Ok(next)
}

/// The number of a file named `<16 hex digits><suffix>`.
fn numbered(name: &str, suffix: &str) -> Option<u64> {
    name.strip_suffix(suffix).filter(|hex| hex.len() == 16).and_then(|hex| u64::from_str_radix(hex, 16).ok())
}

fn write_file(dir: &Path, sequence: u64, part: &str, series: u64, body: &[u8]) -> io::Result<()> {
    let part = &part.as_bytes()[..part.len().min(u16::MAX as usize)];
    let header = [&FILE_MAGIC[..], &[FILE_VERSION], &(part.len() as u16).to_le_bytes(), part, &series.to_le_bytes()];
    write_durably(dir, sequence, &[&header.concat(), body])
}

/// Writes `pieces` and their checksum trailer ([`crate::integrity`]) to batch file `sequence`
/// in `dir` so that a crash leaves the whole file or none: a temporary file, synced, renamed,
/// the directory synced.
pub fn write_durably(dir: &Path, sequence: u64, pieces: &[&[u8]]) -> io::Result<()> {
    let path = file_path(dir, sequence);
    let temporary = path.with_extension("tmp");
    let written = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        for piece in pieces {
            file.write_all(piece)?;
        }
        file.write_all(&crate::integrity::trailer(pieces))?;
        file.sync_data()?;
        std::fs::rename(&temporary, &path)
    })();
    if written.is_err() {
        // A full disk leaves no half-written file behind to take its space.
        let _ = std::fs::remove_file(&temporary);
    }
    written?;
    std::fs::File::open(dir)?.sync_all()
}

/// A batch file's fields, borrowed from its bytes.
struct BatchFile<'a> {
    part: &'a str,
    series: u64,
    body: &'a [u8],
}

/// Reads a batch file: its header, and (version 2) its checksum over everything.
fn read_file(file: &[u8]) -> Result<BatchFile<'_>, String> {
    let content = match (file.get(..4), file.get(4)) {
        (Some(magic), Some(&FILE_VERSION)) if magic == FILE_MAGIC => {
            crate::integrity::verified(file).map_err(|damage| damage.to_string())?
        }
        (Some(magic), Some(&UNCHECKED_VERSION)) if magic == FILE_MAGIC => file,
        _ => return Err("not a histd spool file (HSPL 1 or 2)".to_string()),
    };
    parse_header(content).ok_or_else(|| "the header is cut short".to_string())
}

/// The header's fields and the body after it, without checking anything else.
fn parse_header(content: &[u8]) -> Option<BatchFile<'_>> {
    let part_length = u16::from_le_bytes(content.get(5..7)?.try_into().ok()?) as usize;
    let start = 7 + part_length + 8;
    let part = std::str::from_utf8(content.get(7..7 + part_length)?).ok()?;
    let series = u64::from_le_bytes(content.get(start - 8..start)?.try_into().ok()?);
    Some(BatchFile { part, series, body: content.get(start..)? })
}

/// The series a damaged file's header claims, when it still reads and is believable (a
/// flipped bit there could claim any number).
fn claimed_series(file: &[u8]) -> u64 {
    const MOST_BELIEVABLE: u64 = 100_000_000;
    parse_header(file).map(|batch| batch.series).filter(|&series| series <= MOST_BELIEVABLE).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrity::attacks::Death;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("histd-spool-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn only_files_named_as_histd_names_them_are_batches() {
        let dir = scratch("names");
        std::fs::create_dir_all(&dir).unwrap();
        for name in
            ["0000000000000007.batch", "7.batch", "00000000000000000009.batch", "000000000000000x.batch", "a.tmp"]
        {
            std::fs::write(dir.join(name), b"x").unwrap();
        }
        let found: Vec<u64> = batch_files(&dir).unwrap().into_iter().map(|(sequence, _)| sequence).collect();
        assert_eq!(found, [7]);
        assert!(!dir.join("a.tmp").exists(), "an interrupted write's file is removed");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn batches_on_disk_outlive_the_spool_in_order() {
        let dir = scratch("reopen");
        let (mut spool, _) = Spool::open(Some(dir.clone()), 1 << 20).unwrap();
        for i in 0..3u8 {
            spool.push("http://g1:8127", 10 + u64::from(i), vec![i; 100]).unwrap();
        }
        assert_eq!(spool.pop_front().unwrap().unwrap().sequence, 0);
        drop(spool);
        std::fs::write(dir.join("0000000000000009.tmp"), b"half written").unwrap();
        let (mut spool, dropped) = Spool::open(Some(dir.clone()), 1 << 20).unwrap();
        assert_eq!(dropped, Dropped::default());
        assert_eq!((spool.len(), spool.bytes()), (2, 200));
        let front = spool.waiting()[0].clone();
        assert_eq!((front.sequence, front.part.as_str(), front.series), (1, "http://g1:8127", 11));
        assert_eq!(&spool.body(&front).unwrap()[..], &[1u8; 100][..]);
        assert_eq!(spool.remove(2).unwrap().unwrap().series, 12, "a batch behind others can go first");
        assert_eq!(spool.waiting().len(), 1);
        spool.push("http://g2:8127", 5, vec![9; 10]).unwrap();
        assert_eq!(spool.waiting.back().unwrap().sequence, 3, "numbering goes on after the files left");
        assert_eq!(batch_files(&dir).unwrap().len(), 2);
        assert!(!dir.join("0000000000000009.tmp").exists());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_oldest_go_first_past_the_limit_and_are_counted() {
        for dir in [None, Some(scratch("limit"))] {
            let (mut spool, _) = Spool::open(dir.clone(), 250).unwrap();
            let mut dropped = Dropped::default();
            for i in 0..4 {
                let more = spool.push("n", 7, vec![i; 100]).unwrap();
                dropped.batches += more.batches;
                dropped.series += more.series;
            }
            assert_eq!(dropped, Dropped { batches: 2, series: 14 });
            assert_eq!((spool.len(), spool.bytes()), (2, 200));
            assert_eq!(&spool.body(&spool.waiting()[0]).unwrap()[..], &[2u8; 100][..]);
            if let Some(dir) = dir {
                assert_eq!(batch_files(&dir).unwrap().len(), 2);
                std::fs::remove_dir_all(dir).unwrap();
            }
        }
    }

    /// A batch in flight is never dropped to make room (it was counted both dropped and
    /// delivered when its answer came): the oldest one not in flight goes; with every older
    /// one in flight, the spool passes its limit until an answer comes.
    #[test]
    fn a_batch_being_sent_is_not_dropped_for_room() {
        let (mut spool, _) = Spool::open(None, 250).unwrap();
        for i in 0..2 {
            spool.push("n", 7, vec![i; 100]).unwrap();
        }
        let first = spool.waiting()[0].sequence;
        spool.set_sending(first, true);
        assert_eq!(spool.push("n", 7, vec![2; 100]).unwrap(), Dropped { batches: 1, series: 7 });
        assert!(spool.holds(first), "the one in flight stays");
        assert_eq!(&spool.body(&spool.waiting()[1]).unwrap()[..], &[2u8; 100][..], "the next oldest went");
        spool.set_sending(spool.waiting()[1].sequence, true);
        assert_eq!(spool.push("n", 7, vec![3; 100]).unwrap(), Dropped::default(), "every older one in flight");
        assert_eq!(spool.bytes(), 300);
        spool.set_sending(first, false);
        assert_eq!(spool.push("n", 7, vec![4; 100]).unwrap(), Dropped { batches: 2, series: 14 });
        assert!(!spool.holds(first));
    }

    #[test]
    fn a_damaged_file_is_set_aside_and_counted() {
        let dir = scratch("damaged");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("0000000000000004.batch"), b"HSP").unwrap();
        let (spool, dropped) = Spool::open(Some(dir.clone()), 1 << 20).unwrap();
        assert_eq!((spool.len(), dropped.batches), (0, 1));
        assert!(dir.join("0000000000000004.corrupt").exists());
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// N9: one flipped bit anywhere in a batch file (a counter's value, the node, the source)
    /// and the file is never sent: set aside, its series counted; the others go as written.
    /// A file written before checksums (version 1) is still read.
    #[test]
    fn a_flipped_bit_is_found_at_start_and_when_read_to_be_sent() {
        let dir = scratch("bits");
        let (mut spool, _) = Spool::open(Some(dir.clone()), 1 << 20).unwrap();
        for (part, series) in [("http://a:1", 10), ("http://b:1", 20), ("http://a:1", 30)] {
            spool.push(part, series, b"snappy bytes of a batch".to_vec()).unwrap();
        }
        let flip = |sequence: u64, from_end: usize| {
            let path = file_path(&dir, sequence);
            let mut file = std::fs::read(&path).unwrap();
            let at = file.len() - from_end;
            file[at] ^= 0x08;
            std::fs::write(&path, file).unwrap();
        };
        flip(0, 12); // in the body, before the trailer
        let old = [&FILE_MAGIC[..], &[UNCHECKED_VERSION], &3u16.to_le_bytes(), b"old", &7u64.to_le_bytes(), b"v1 body"]
            .concat();
        std::fs::write(file_path(&dir, 9), old).unwrap();
        let (mut reopened, dropped) = Spool::open(Some(dir.clone()), 1 << 20).unwrap();
        assert_eq!((dropped.batches, dropped.series), (1, 10), "the damaged file, with its header's series");
        let parts: Vec<(String, u64)> = reopened.waiting().into_iter().map(|w| (w.part, w.series)).collect();
        assert_eq!(parts, [("http://b:1".to_string(), 20), ("http://a:1".to_string(), 30), ("old".to_string(), 7)]);
        let old_body = reopened.body(&reopened.waiting()[2]).unwrap();
        assert_eq!(&old_body[..], b"v1 body");
        // Damage after the start: found when the body is read to be sent.
        flip(2, 3);
        let damaged = reopened.waiting()[1].clone();
        let error = reopened.body(&damaged).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{error}");
        assert_eq!(reopened.set_aside(damaged.sequence).map(|w| w.series), Some(30));
        assert!(file_path(&dir, 2).with_extension("corrupt").exists());
        assert_eq!(reopened.len(), 2);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// N8: a directory that cannot take a batch (a full disk; here, a file where the
    /// directory was) does not lose it: the batch is held in memory, sent like the others,
    /// and no half-written file is left.
    #[test]
    fn a_batch_the_directory_cannot_take_is_held_in_memory() {
        let dir = scratch("unwritable");
        let (mut spool, _) = Spool::open(Some(dir.clone()), 1 << 20).unwrap();
        spool.push("http://a:1", 1, b"on disk".to_vec()).unwrap();
        assert!(spool.take_write_failure().is_none());
        std::fs::rename(&dir, dir.with_extension("moved")).unwrap();
        std::fs::write(&dir, b"not a directory").unwrap();
        spool.push("http://a:1", 2, b"in memory".to_vec()).unwrap();
        assert!(spool.take_write_failure().is_some(), "the failure is reported");
        assert!(spool.take_write_failure().is_none(), "once");
        assert_eq!(spool.held_in_memory(), (1, 2));
        let held = spool.waiting()[1].clone();
        assert_eq!(&spool.body(&held).unwrap()[..], b"in memory");
        std::fs::remove_file(&dir).unwrap();
        std::fs::rename(dir.with_extension("moved"), &dir).unwrap();
        assert_eq!(spool.remove(held.sequence).unwrap().map(|b| b.series), Some(2));
        assert_eq!(spool.held_in_memory(), (0, 0));
        let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(leftovers.len(), 1, "only the first batch's file: {leftovers:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Issue 36: the spool's format attacked, one way a row. Four batches (series 10, 20, 30,
    /// 40, bodies of 5000 bytes) are spooled; the attack is done to the files; the spool is
    /// opened again and every batch still waiting is read as it would be to be sent. What is
    /// sent, and what is counted as damaged (batches, and series as a damaged file's header
    /// still says), is exactly the row's.
    #[test]
    fn attacks_on_the_spool_format() {
        use crate::integrity::attacks::{apply, Attack};
        // (attack, series of the batches sent in order, batches counted damaged, their series)
        let cases: [(Attack, &[u64], u64, u64); 11] = [
            (Attack::None, &[10, 20, 30, 40], 0, 0),
            (Attack::FlipFromEnd(1, 100), &[10, 30, 40], 1, 20),
            (Attack::FlipFromStart(2, 9), &[10, 20, 40], 1, 30),
            (Attack::FlipFromEnd(3, 2), &[10, 20, 30], 1, 40),
            (Attack::FlipFromStart(0, 0), &[20, 30, 40], 1, 10),
            (Attack::ZeroPage(1), &[10, 30, 40], 1, 0),
            (Attack::Truncate(3), &[10, 20, 30], 1, 40),
            (Attack::AppendGarbage(0), &[20, 30, 40], 1, 10),
            (Attack::Swap(1, 2), &[10, 30, 20, 40], 0, 0),
            (Attack::Empty(2), &[10, 20, 40], 1, 0),
            (Attack::TornWrite(4), &[10, 20, 30, 40], 0, 0),
        ];
        for (attack, sent, damaged, damaged_series) in cases {
            let dir = scratch("attacks");
            let (mut spool, _) = Spool::open(Some(dir.clone()), 1 << 20).unwrap();
            for series in [10u64, 20, 30, 40] {
                spool.push("http://g1:8127", series, vec![series as u8; 5000]).unwrap();
            }
            drop(spool);
            apply(&dir, attack);
            let (mut spool, dropped) = Spool::open(Some(dir.clone()), 1 << 20).unwrap();
            let (mut counted, mut counted_series, mut got) = (dropped.batches, dropped.series, Vec::new());
            for batch in spool.waiting() {
                match spool.body(&batch) {
                    Ok(body) => {
                        assert_eq!(body.len(), 5000, "{attack:?}: a body read whole");
                        got.push(batch.series);
                    }
                    Err(error) => {
                        assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{attack:?}");
                        counted += 1;
                        counted_series += batch.series;
                        spool.set_aside(batch.sequence);
                    }
                }
            }
            assert_eq!((got.as_slice(), counted, counted_series), (sent, damaged, damaged_series), "{attack:?}");
            let corrupt = std::fs::read_dir(&dir)
                .unwrap()
                .filter(|e| e.as_ref().unwrap().path().extension() == Some("corrupt".as_ref()))
                .count();
            assert_eq!(corrupt as u64, damaged, "{attack:?}: each damaged file is kept aside");
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    /// One step of the crash model.
    #[derive(Debug, Clone)]
    enum Step {
        /// A batch of this many series is spooled.
        Append(u64),
        /// The oldest batch is sent and removed.
        Send,
        /// The process dies while spooling a batch of this many series.
        DieDuringAppend(u64, Death),
        /// The process dies between two steps; the spool is opened again.
        Restart,
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        let death = crate::integrity::attacks::death();
        prop_oneof![
            4 => (1..1000u64).prop_map(Step::Append),
            3 => Just(Step::Send),
            1 => ((1..1000u64), death).prop_map(|(series, death)| Step::DieDuringAppend(series, death)),
            1 => Just(Step::Restart),
        ]
    }

    /// What an append that died at `death` leaves in `dir` as batch `sequence`.
    fn leave_death(dir: &Path, sequence: u64, series: u64, death: Death) {
        let scratch = dir.join("whole");
        std::fs::create_dir_all(&scratch).unwrap();
        write_file(&scratch, 0, "n", series, &[7u8; 300]).unwrap();
        let whole = std::fs::read(file_path(&scratch, 0)).unwrap();
        std::fs::remove_dir_all(&scratch).unwrap();
        crate::integrity::attacks::die_during_write(&file_path(dir, sequence), &whole, death);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Issue 36: random appends, sends and deaths at every write step, checked against a
        /// model: every batch whose append returned survives every restart, in order, until it
        /// is sent; a sent one never comes back; an append that died survives only when its
        /// rename was done, is counted as damaged when its file was torn, and leaves nothing
        /// otherwise (no temporary file outlives the next open).
        #[test]
        fn the_spool_keeps_exactly_what_it_acknowledged_through_any_death(steps in proptest::collection::vec(step(), 1..40)) {
            let dir = scratch("crash-model");
            let (mut spool, _) = Spool::open(Some(dir.clone()), u64::MAX).unwrap();
            let mut model: VecDeque<u64> = VecDeque::new();
            let mut damaged = 0;
            for step in steps {
                match step {
                    Step::Append(series) => {
                        spool.push("n", series, vec![7; 300]).unwrap();
                        model.push_back(series);
                    }
                    Step::Send => {
                        let sent = spool.pop_front().unwrap().map(|batch| batch.series);
                        proptest::prop_assert_eq!(sent, model.pop_front());
                    }
                    Step::DieDuringAppend(series, death) => {
                        let sequence = spool.next_sequence;
                        drop(spool);
                        leave_death(&dir, sequence, series, death);
                        let (reopened, dropped) = Spool::open(Some(dir.clone()), u64::MAX).unwrap();
                        spool = reopened;
                        match death {
                            Death::AfterRename => model.push_back(series),
                            Death::Torn => damaged += 1,
                            _ => {}
                        }
                        proptest::prop_assert_eq!(dropped.batches, u64::from(matches!(death, Death::Torn)));
                    }
                    Step::Restart => {
                        drop(spool);
                        let (reopened, dropped) = Spool::open(Some(dir.clone()), u64::MAX).unwrap();
                        spool = reopened;
                        proptest::prop_assert_eq!(dropped, Dropped::default());
                    }
                }
                let waiting: Vec<u64> = spool.waiting().into_iter().map(|batch| batch.series).collect();
                proptest::prop_assert_eq!(&waiting, &model.iter().copied().collect::<Vec<_>>());
                for batch in spool.waiting() {
                    proptest::prop_assert_eq!(spool.body(&batch).unwrap().len(), 300);
                }
            }
            let left = std::fs::read_dir(&dir).unwrap().filter_map(Result::ok).map(|e| e.file_name().into_string().unwrap());
            let (corrupt, temporary): (Vec<String>, Vec<String>) =
                left.filter(|name| !name.ends_with(".batch")).partition(|name| name.ends_with(".corrupt"));
            proptest::prop_assert_eq!(corrupt.len(), damaged);
            proptest::prop_assert!(temporary.iter().all(|name| name.ends_with(".tmp")), "{:?}", temporary);
            std::fs::remove_dir_all(dir).unwrap();
        }
    }
}
