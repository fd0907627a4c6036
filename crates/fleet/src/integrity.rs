//! Checksums on what histd writes to disk: a file is its content followed by a trailer of
//! `HSUM` and the CRC32C of the content (4 bytes, little-endian). A reader that finds the
//! trailer missing or the sum wrong knows the file is damaged (a flipped bit, a torn or
//! truncated write) and never takes its content for data. CRC32C (Castagnoli) is what ext4,
//! iSCSI and RocksDB use; the `crc32c` crate computes it with the CPU's instruction.

/// What ends a checksummed file.
const TRAILER_MAGIC: &[u8; 4] = b"HSUM";
/// The trailer's length: the magic and the sum.
pub const TRAILER_BYTES: usize = 8;

/// The trailer of a file whose content is `pieces`, in order.
pub fn trailer(pieces: &[&[u8]]) -> [u8; TRAILER_BYTES] {
    let sum = pieces.iter().fold(0, |sum, piece| crc32c::crc32c_append(sum, piece));
    let mut out = [0; TRAILER_BYTES];
    out[..4].copy_from_slice(TRAILER_MAGIC);
    out[4..].copy_from_slice(&sum.to_le_bytes());
    out
}

/// Why a checksummed file does not verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// Shorter than a trailer, or not ending in one (truncated, or never whole).
    NoTrailer,
    /// The content's sum is not the one written.
    Mismatch,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Damage::NoTrailer => "no checksum trailer (truncated or torn)",
            Damage::Mismatch => "checksum mismatch (the content changed after it was written)",
        })
    }
}

/// The content of a checksummed `file`, when its trailer verifies.
pub fn verified(file: &[u8]) -> Result<&[u8], Damage> {
    let Some(split) = file.len().checked_sub(TRAILER_BYTES) else { return Err(Damage::NoTrailer) };
    let (content, trailer) = file.split_at(split);
    if &trailer[..4] != TRAILER_MAGIC {
        return Err(Damage::NoTrailer);
    }
    let written = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
    if crc32c::crc32c(content) != written {
        return Err(Damage::Mismatch);
    }
    Ok(content)
}

/// Damage done on purpose to a directory of numbered files (`<16 digits>.batch`), for the
/// tables that attack the spool's and the journal's formats.
#[cfg(test)]
pub(crate) mod attacks {
    use std::path::Path;

    /// One way a file is damaged.
    #[derive(Debug, Clone, Copy)]
    pub enum Attack {
        /// Nothing done.
        None,
        /// One bit flipped, this many bytes from the file's start.
        FlipFromStart(u64, usize),
        /// One bit flipped, this many bytes before the file's end.
        FlipFromEnd(u64, usize),
        /// Its first 4096 bytes (a page) zeroed.
        ZeroPage(u64),
        /// Cut to half its length.
        Truncate(u64),
        /// 17 bytes of garbage appended.
        AppendGarbage(u64),
        /// Two files' contents swapped.
        Swap(u64, u64),
        /// Emptied.
        Empty(u64),
        /// A write torn before its rename: a half-written `.tmp` beside the files.
        TornWrite(u64),
    }

    /// How a write ends when the process dies during it (`write_durably`'s steps).
    #[derive(Debug, Clone, Copy)]
    pub enum Death {
        /// Before the temporary file was created.
        BeforeWriting,
        /// Half the temporary file written.
        HalfWritten,
        /// The temporary file whole, not yet renamed.
        BeforeRename,
        /// Renamed: the file is in place.
        AfterRename,
        /// Renamed, but the file's tail never reached the disk (a torn write).
        Torn,
    }

    /// Any of the deaths.
    pub fn death() -> impl proptest::strategy::Strategy<Value = Death> {
        use proptest::prelude::*;
        prop_oneof![
            Just(Death::BeforeWriting),
            Just(Death::HalfWritten),
            Just(Death::BeforeRename),
            Just(Death::AfterRename),
            Just(Death::Torn),
        ]
    }

    /// What a write of `whole` to `path` that died at `death` leaves.
    pub fn die_during_write(path: &Path, whole: &[u8], death: Death) {
        match death {
            Death::BeforeWriting => {}
            Death::HalfWritten => std::fs::write(path.with_extension("tmp"), &whole[..whole.len() / 2]).unwrap(),
            Death::BeforeRename => std::fs::write(path.with_extension("tmp"), whole).unwrap(),
            Death::AfterRename => std::fs::write(path, whole).unwrap(),
            Death::Torn => std::fs::write(path, &whole[..whole.len() * 2 / 3]).unwrap(),
        }
    }

    fn path(dir: &Path, sequence: u64) -> std::path::PathBuf {
        dir.join(format!("{sequence:016}.batch"))
    }

    fn edit(dir: &Path, sequence: u64, change: impl FnOnce(&mut Vec<u8>)) {
        let mut file = std::fs::read(path(dir, sequence)).unwrap();
        change(&mut file);
        std::fs::write(path(dir, sequence), file).unwrap();
    }

    /// Does `attack` to the files of `dir`.
    pub fn apply(dir: &Path, attack: Attack) {
        match attack {
            Attack::None => {}
            Attack::FlipFromStart(file, at) => edit(dir, file, |bytes| bytes[at] ^= 0x10),
            Attack::FlipFromEnd(file, at) => edit(dir, file, |bytes| {
                let at = bytes.len() - at;
                bytes[at] ^= 0x10;
            }),
            Attack::ZeroPage(file) => edit(dir, file, |bytes| {
                let end = bytes.len().min(4096);
                bytes[..end].fill(0);
            }),
            Attack::Truncate(file) => edit(dir, file, |bytes| bytes.truncate(bytes.len() / 2)),
            Attack::AppendGarbage(file) => edit(dir, file, |bytes| bytes.extend_from_slice(b"not part of a file")),
            Attack::Swap(a, b) => {
                let (first, second) = (std::fs::read(path(dir, a)).unwrap(), std::fs::read(path(dir, b)).unwrap());
                std::fs::write(path(dir, a), second).unwrap();
                std::fs::write(path(dir, b), first).unwrap();
            }
            Attack::Empty(file) => std::fs::write(path(dir, file), b"").unwrap(),
            Attack::TornWrite(sequence) => {
                let whole = std::fs::read(path(dir, 0)).unwrap();
                std::fs::write(dir.join(format!("{sequence:016}.tmp")), &whole[..whole.len() / 2]).unwrap();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(content: &[u8]) -> Vec<u8> {
        [content, &trailer(&[content])].concat()
    }

    #[test]
    fn a_whole_file_verifies_and_any_damage_is_found() {
        let content = b"HSPL\x02node\x01\x00\x00\x00\x00\x00\x00\x00snappy bytes".to_vec();
        let file = sealed(&content);
        assert_eq!(verified(&file), Ok(&content[..]));
        assert_eq!(trailer(&[&content[..4], &content[4..]]), trailer(&[&content]), "pieces sum as one");
        // Every single flipped bit, anywhere (content or trailer), is found.
        for bit in 0..file.len() * 8 {
            let mut damaged = file.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(verified(&damaged).is_err(), "bit {bit}");
        }
        for length in 0..file.len() {
            assert!(verified(&file[..length]).is_err(), "truncated to {length}");
        }
        assert_eq!(verified(b""), Err(Damage::NoTrailer));
        assert_eq!(verified(&sealed(b"")), Ok(&b""[..]), "an empty content is whole");
    }
}
