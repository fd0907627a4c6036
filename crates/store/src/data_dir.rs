//! A store's data directory: the file names in it, the lock that makes one process its
//! writer, and how a store file is moved with its write-ahead log (set aside when damaged,
//! replaced by a restore). The daemon, `histd backup`/`restore`/`scrub` and `histd query` all
//! find the store by these names.

use std::fs::File;
use std::path::{Path, PathBuf};

/// The store's database file in its data directory.
pub const DATABASE: &str = "histd.db";

/// The lock file in the data directory: it holds the owner's pid.
pub const LOCK_FILE: &str = "histd.lock";

/// The database file of the data directory `dir`.
pub fn database(dir: &Path) -> PathBuf {
    dir.join(DATABASE)
}

/// Where a restore writes the incoming store before it takes the database's name.
pub fn restoring(dir: &Path) -> PathBuf {
    dir.join(format!("{DATABASE}.restoring"))
}

/// Where a restore keeps the store it replaced, named by the time (unix seconds).
pub fn replaced(dir: &Path, unix_s: u64) -> PathBuf {
    dir.join(format!("{DATABASE}.replaced-{unix_s}"))
}

/// Where a damaged store file at `path` is set aside, named by the time (unix seconds).
pub fn damaged(path: &Path, unix_s: u64) -> PathBuf {
    PathBuf::from(format!("{}.damaged-{unix_s}", path.display()))
}

/// Why the data directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it (its pid, when the lock file says).
    #[error("the data directory {dir} is in use by {holder} (store.dataDir / --data-dir: one histd per directory)")]
    InUse {
        /// The directory.
        dir: PathBuf,
        /// `histd pid N`, or `another process`.
        holder: String,
    },
    /// The lock file could not be opened or written.
    #[error("cannot use the lock file {path}: {source}")]
    File {
        /// The lock file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
}

/// Makes this process the data directory's one writer: an exclusive `flock` on its lock file,
/// held for as long as the returned file is open (the kernel releases it when the process ends,
/// however it ends). A second process on the same directory gets [`LockError::InUse`], naming
/// the directory and the pid that holds it.
pub fn lock(dir: &Path) -> Result<File, LockError> {
    use std::io::{Read, Seek, Write};
    use std::os::fd::AsRawFd;
    let path = dir.join(LOCK_FILE);
    let failed = |source| LockError::File { path: path.clone(), source };
    let mut file =
        std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(failed)?;
    // SAFETY: flock on an open descriptor this function owns; no memory is touched.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        let holder = holder.trim();
        let holder = if holder.is_empty() { "another process".to_string() } else { format!("histd pid {holder}") };
        return Err(LockError::InUse { dir: dir.to_path_buf(), holder });
    }
    file.set_len(0).map_err(failed)?;
    file.rewind().map_err(failed)?;
    write!(file, "{}", std::process::id()).map_err(failed)?;
    Ok(file)
}

/// Renames a store file with its write-ahead log and shared memory, where they exist (a log
/// left behind would be replayed into whatever file takes the name: SQLite finds it by the
/// database's name). True when the store file itself was there.
pub fn move_files(from: &Path, to: &Path) -> std::io::Result<bool> {
    let mut moved = false;
    for suffix in ["", "-wal", "-shm"] {
        let file = format!("{}{suffix}", from.display());
        if Path::new(&file).exists() {
            std::fs::rename(&file, format!("{}{suffix}", to.display()))?;
            moved |= suffix.is_empty();
        }
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_writer_per_directory_and_its_pid_named() {
        let dir = std::env::temp_dir().join(format!("store-data-dir-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let held = lock(&dir).unwrap();
        // flock locks belong to the open file: a second open in this process is refused too.
        let second = lock(&dir).unwrap_err().to_string();
        assert!(second.contains("in use by histd pid") && second.contains(&std::process::id().to_string()), "{second}");
        drop(held);
        lock(&dir).expect("free once the holder closed it");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_store_moves_with_its_log() {
        let dir = std::env::temp_dir().join(format!("store-data-dir-move-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let from = database(&dir);
        for suffix in ["", "-wal"] {
            std::fs::write(format!("{}{suffix}", from.display()), suffix).unwrap();
        }
        let to = damaged(&from, 7);
        assert!(move_files(&from, &to).unwrap());
        assert!(to.exists() && PathBuf::from(format!("{}-wal", to.display())).exists() && !from.exists());
        assert!(!move_files(&from, &to).unwrap(), "nothing left to move");
        assert_eq!(replaced(&dir, 5), dir.join("histd.db.replaced-5"));
        assert_eq!(restoring(&dir), dir.join("histd.db.restoring"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
