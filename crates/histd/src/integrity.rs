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
