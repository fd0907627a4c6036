//! `global.journalDir`: every batch this global acknowledges is first written here (synced),
//! and removed once every sink has taken the flush that carried it (the store wrote it,
//! forward spooled it, ...). A global killed between the two merges its journal again at its
//! next start, so what it acknowledged is not lost; the identities come back with it, so a
//! copy that arrives later is still merged once.
//!
//! One file per batch, `<sequence>.batch`: [`HEADER`], the name of the credential that sent it
//! (a length byte pair, then the name), the body as received (compressed), and a checksum
//! trailer ([`crate::integrity`]). A file whose checksum does not verify is never merged: it is
//! set aside as `*.corrupt` and counted (`messages.journal_corrupt_batches`). Files earlier
//! versions wrote are read unverified: [`UNCHECKED_HEADER`] (no trailer), or only the body
//! (no snappy body can begin with a header: its five `0xff` bytes are a length varint longer
//! than snappy allows), read as sent with no credential.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::spool::{batch_files, file_path, next_sequence, write_durably};

/// The journal directory and the next sequence number.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    next: AtomicU64,
}

/// The first bytes of a journal file: it names its credential and ends in a checksum.
const HEADER: &[u8; 9] = b"\xff\xff\xff\xff\xffHJR2";
/// The first bytes of a file written before checksums: it names its credential.
const UNCHECKED_HEADER: &[u8; 9] = b"\xff\xff\xff\xff\xffHJRN";

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

/// Splits a journal file into its credential and body; why not, when it is damaged (its
/// checksum, or a header that does not read).
pub fn parse(mut file: Vec<u8>) -> Result<(String, Vec<u8>), String> {
    if file.starts_with(HEADER) {
        let length = crate::integrity::verified(&file).map_err(|damage| damage.to_string())?.len();
        file.truncate(length);
    } else if !file.starts_with(UNCHECKED_HEADER) {
        return Ok((String::new(), file));
    }
    let at = HEADER.len();
    let cut = || "the header is cut short".to_string();
    let length = usize::from(u16::from_le_bytes([*file.get(at).ok_or_else(cut)?, *file.get(at + 1).ok_or_else(cut)?]));
    let name = file.get(at + 2..at + 2 + length).ok_or_else(cut)?;
    let name = std::str::from_utf8(name).map_err(|_| "the credential is not UTF-8".to_string())?.to_string();
    file.drain(..at + 2 + length);
    Ok((name, file))
}

impl Journal {
    /// Opens `dir` (created if missing) and reads what an earlier run left, oldest first,
    /// with the number of files found damaged (set aside as `*.corrupt`, not merged).
    pub fn open(dir: PathBuf) -> io::Result<(Journal, Vec<Left>, u64)> {
        std::fs::create_dir_all(&dir)?;
        let mut left = Vec::new();
        let (mut next, mut damaged) = (0, 0);
        for (sequence, path) in batch_files(&dir)? {
            next = sequence + 1;
            match parse(std::fs::read(&path)?) {
                Ok((credential, body)) => left.push(Left { sequence, body, credential }),
                Err(why) => {
                    tracing::error!(
                        sequence,
                        %why,
                        "global.journalDir: a damaged batch is set aside as .corrupt, not merged (journal_corrupt_batches)"
                    );
                    let _ = std::fs::rename(&path, path.with_extension("corrupt"));
                    damaged += 1;
                }
            }
        }
        let next = next.max(next_sequence(&dir)?);
        Ok((Journal { dir, next: AtomicU64::new(next) }, left, damaged))
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
        let body = crate::format::compress(b"HFWD");
        let name = |header: &[u8], credential: &[u8]| {
            [header, &(credential.len() as u16).to_le_bytes(), credential, &body].concat()
        };
        let sealed = |content: Vec<u8>| [content.clone(), crate::integrity::trailer(&[&content]).to_vec()].concat();
        let checked = sealed(name(HEADER, b"web-1"));
        let mut flipped = checked.clone();
        flipped[HEADER.len() + 4] ^= 0x10; // a bit of the credential's name
        let mut value_flipped = checked.clone();
        let last_body_byte = checked.len() - crate::integrity::TRAILER_BYTES - 1;
        value_flipped[last_body_byte] ^= 0x01; // a bit of the batch
        type Case<'a> = (Vec<u8>, Option<(&'a str, &'a [u8])>);
        let cases: Vec<Case> = vec![
            (checked.clone(), Some(("web-1", &body))),
            (flipped, None),
            (value_flipped, None),
            (checked[..checked.len() - 1].to_vec(), None),
            (sealed(HEADER.to_vec()), None),
            (body.clone(), Some(("", &body))),
            (name(UNCHECKED_HEADER, b"web-1"), Some(("web-1", &body))),
            (UNCHECKED_HEADER.to_vec(), None),
            ([&UNCHECKED_HEADER[..], &[9, 0], b"web"].concat(), None),
        ];
        for (file, want) in cases {
            let got = parse(file.clone());
            assert_eq!(got.as_ref().ok().map(|(c, b)| (c.as_str(), b.as_slice())), want, "{file:?}");
        }
        assert!(snap::raw::decompress_len(HEADER).is_err(), "no snappy body begins with the header");
        assert!(snap::raw::decompress_len(UNCHECKED_HEADER).is_err());
    }

    /// N9: a damaged file at start is set aside, counted, and never merged.
    #[test]
    fn damaged_files_are_set_aside_and_counted_at_start() {
        let dir = std::env::temp_dir().join(format!("histd-journal-damage-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (journal, _, _) = Journal::open(dir.clone()).unwrap();
        let body = crate::format::compress(b"HFWD batch");
        for credential in ["a", "b", "c"] {
            journal.write(&body, credential).unwrap();
        }
        let path = file_path(&dir, 1);
        let mut file = std::fs::read(&path).unwrap();
        let at = file.len() - crate::integrity::TRAILER_BYTES - 2;
        file[at] ^= 0x04;
        std::fs::write(&path, file).unwrap();
        let (_, left, damaged) = Journal::open(dir.clone()).unwrap();
        assert_eq!(damaged, 1);
        assert_eq!(left.iter().map(|l| l.credential.as_str()).collect::<Vec<_>>(), ["a", "c"]);
        assert!(path.with_extension("corrupt").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 36: the journal's format attacked, one way a row. Four batches (credentials a, b,
    /// c, d; a few KiB each) are journaled; the attack is done to the files; the journal is
    /// opened again and what it left is decoded as a global's restart does. What is merged, and
    /// what is counted as damaged (set aside at open, or not a batch once read), is exactly the
    /// row's.
    #[test]
    fn attacks_on_the_journal_format() {
        use crate::format::{compress, decode, BatchId, BatchWriter};
        use crate::integrity::attacks::{apply, Attack};
        let batch = |part: &str| {
            let id = BatchId {
                source: "web-1".into(),
                interval_start_ms: 1_700_000_000_000,
                interval_ms: 10_000,
                part: part.into(),
                chunk: 0,
            };
            let mut writer = BatchWriter::new(id);
            for i in 0..400 {
                writer.counter(&format!("api.requests.{part}.{i}"), f64::from(i));
            }
            compress(&writer.finish())
        };
        // (attack, credentials of the batches merged in order, batches counted damaged)
        let cases: [(Attack, &[&str], u64); 11] = [
            (Attack::None, &["a", "b", "c", "d"], 0),
            (Attack::FlipFromEnd(1, 100), &["a", "c", "d"], 1),
            (Attack::FlipFromStart(2, 11), &["a", "b", "d"], 1),
            (Attack::FlipFromEnd(3, 2), &["a", "b", "c"], 1),
            (Attack::FlipFromStart(0, 0), &["b", "c", "d"], 1),
            (Attack::ZeroPage(1), &["a", "c", "d"], 1),
            (Attack::Truncate(3), &["a", "b", "c"], 1),
            (Attack::AppendGarbage(0), &["b", "c", "d"], 1),
            (Attack::Swap(1, 2), &["a", "c", "b", "d"], 0),
            (Attack::Empty(2), &["a", "b", "d"], 1),
            (Attack::TornWrite(4), &["a", "b", "c", "d"], 0),
        ];
        for (attack, merged, damaged) in cases {
            let dir = std::env::temp_dir().join(format!("histd-journal-attacks-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let (journal, _, _) = Journal::open(dir.clone()).unwrap();
            for credential in ["a", "b", "c", "d"] {
                journal.write(&batch(credential), credential).unwrap();
            }
            apply(&dir, attack);
            let (_, left, mut counted) = Journal::open(dir.clone()).unwrap();
            let mut got = Vec::new();
            for Left { body, credential, .. } in left {
                match decode(&body, 64 << 20) {
                    Ok(batch) => {
                        assert_eq!(batch.interval.counters.len(), 400, "{attack:?}: a batch read whole");
                        assert_eq!(batch.id.part, credential, "{attack:?}: the credential is the one it was sent with");
                        got.push(credential);
                    }
                    Err(_) => counted += 1,
                }
            }
            assert_eq!(
                (got.iter().map(String::as_str).collect::<Vec<_>>().as_slice(), counted),
                (merged, damaged),
                "{attack:?}"
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    /// One step of the journal's crash model.
    #[derive(Debug, Clone)]
    enum Step {
        /// A batch is journaled with this credential.
        Write(u8),
        /// A flush carried the oldest: it is removed.
        Carried,
        /// The process dies while journaling a batch with this credential.
        DieDuringWrite(u8, crate::integrity::attacks::Death),
        /// The process dies between two steps; the journal is opened again.
        Restart,
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0..26u8).prop_map(Step::Write),
            3 => Just(Step::Carried),
            1 => ((0..26u8), crate::integrity::attacks::death()).prop_map(|(c, death)| Step::DieDuringWrite(c, death)),
            1 => Just(Step::Restart),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// Issue 36: random writes, removals and deaths at every write step, against a model:
        /// what a global acknowledged (its write returned) and no flush carried is what the
        /// next start replays, in order; a write that died is replayed only when its rename
        /// was done, and is counted as damaged when its file was torn.
        #[test]
        fn the_journal_replays_exactly_what_was_acknowledged_and_not_flushed(steps in proptest::collection::vec(step(), 1..40)) {
            use crate::integrity::attacks::{die_during_write, Death};
            let dir = std::env::temp_dir().join(format!("histd-journal-model-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let credential = |c: u8| char::from(b'a' + c).to_string();
            let (mut journal, _, _) = Journal::open(dir.clone()).unwrap();
            let mut model: std::collections::VecDeque<(u64, String)> = Default::default();
            let mut damaged = 0;
            for step in steps {
                match step {
                    Step::Write(c) => {
                        let sequence = journal.write(b"body", &credential(c)).unwrap();
                        model.push_back((sequence, credential(c)));
                    }
                    Step::Carried => {
                        if let Some((sequence, _)) = model.pop_front() {
                            journal.remove(&[sequence]);
                        }
                    }
                    Step::DieDuringWrite(c, death) => {
                        let sequence = journal.next.load(Ordering::Relaxed);
                        let scratch = dir.join("whole");
                        let (whole_journal, _, _) = Journal::open(scratch.clone()).unwrap();
                        whole_journal.write(b"body", &credential(c)).unwrap();
                        let whole = std::fs::read(file_path(&scratch, 0)).unwrap();
                        std::fs::remove_dir_all(&scratch).unwrap();
                        drop(journal);
                        die_during_write(&file_path(&dir, sequence), &whole, death);
                        let (reopened, left, found_damaged) = Journal::open(dir.clone()).unwrap();
                        journal = reopened;
                        match death {
                            Death::AfterRename => model.push_back((sequence, credential(c))),
                            Death::Torn => damaged += 1,
                            _ => {}
                        }
                        proptest::prop_assert_eq!(found_damaged, u64::from(matches!(death, Death::Torn)));
                        let replayed: Vec<(u64, String)> = left.into_iter().map(|l| (l.sequence, l.credential)).collect();
                        proptest::prop_assert_eq!(&replayed, &model.iter().cloned().collect::<Vec<_>>());
                    }
                    Step::Restart => {
                        drop(journal);
                        let (reopened, left, found_damaged) = Journal::open(dir.clone()).unwrap();
                        journal = reopened;
                        proptest::prop_assert_eq!(found_damaged, 0);
                        let replayed: Vec<(u64, String)> = left.into_iter().map(|l| (l.sequence, l.credential)).collect();
                        proptest::prop_assert_eq!(&replayed, &model.iter().cloned().collect::<Vec<_>>());
                    }
                }
            }
            let corrupt = std::fs::read_dir(&dir).unwrap().filter_map(Result::ok)
                .filter(|e| e.file_name().to_str().unwrap_or_default().ends_with(".corrupt")).count();
            proptest::prop_assert_eq!(corrupt, damaged);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
