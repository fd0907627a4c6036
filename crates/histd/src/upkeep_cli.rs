//! `histd scrub`, `histd backup` and `histd restore`: a store's data directory checked, copied
//! while its daemon runs, and put back from a copy.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;

use crate::sinks::store::DATABASE;

/// `histd scrub --data-dir DIR`: reads every block and checks it (its checksum, its bytes)
/// and SQLite's pages; lists what is damaged. Exit 0: clean; 1: damage found, or a store file
/// that cannot be read at all (a damaged header or schema is damage: issue 48, P9); 2: no
/// store file.
pub fn scrub(dir: &Path) -> ExitCode {
    let path = dir.join(DATABASE);
    if !path.exists() {
        eprintln!("histd scrub: no store at {} (--data-dir)", path.display());
        return ExitCode::from(2);
    }
    match scrub_file(&path) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("histd scrub: damaged: {error:#}");
            ExitCode::from(1)
        }
    }
}

/// Scrubs one database file, printing what it found; whether it is clean.
fn scrub_file(path: &Path) -> anyhow::Result<bool> {
    anyhow::ensure!(path.exists(), "no store at {} (--data-dir)", path.display());
    let store = store::Store::open_reader(path).with_context(|| format!("cannot read {}", path.display()))?;
    let report = store.scrub().with_context(|| format!("cannot read {}", path.display()))?;
    for block in &report.damaged {
        println!(
            "damaged block: {:?} resolution, group {}, {} to {} (unix s): {}",
            block.resolution,
            block.grp,
            block.start,
            block.start + block.resolution.block_span(),
            block.reason
        );
    }
    for line in &report.pages {
        println!("damaged page: {line}");
    }
    println!(
        "{}: {} blocks checked, {} damaged, {} page problems",
        path.display(),
        report.blocks,
        report.damaged.len(),
        report.pages.len()
    );
    Ok(report.is_clean())
}

/// `histd backup DEST --data-dir DIR`: a consistent copy of the store in one new file, taken
/// while a daemon writes it (a read snapshot; the writer is not stopped), then scrubbed.
pub fn backup(dir: &Path, destination: &Path) -> ExitCode {
    let copied = (|| -> anyhow::Result<bool> {
        let source = dir.join(DATABASE);
        anyhow::ensure!(source.exists(), "no store at {} (--data-dir)", source.display());
        anyhow::ensure!(!destination.exists(), "{} exists already", destination.display());
        // Written whole as DEST.partial, checked, synced, then renamed: a backup killed or
        // failing half way never leaves a file named as the backup.
        let partial = PathBuf::from(format!("{}.partial", destination.display()));
        let _ = std::fs::remove_file(&partial);
        let store = store::Store::open_reader(&source).with_context(|| format!("cannot read {}", source.display()))?;
        if let Err(error) = store.backup_to(&partial) {
            // A copy that could not be written whole (a full disk) leaves nothing behind.
            let _ = std::fs::remove_file(&partial);
            return Err(anyhow::Error::new(error).context(format!("cannot write the backup {}", partial.display())));
        }
        if !scrub_file(&partial)? {
            return Ok(false);
        }
        std::fs::File::open(&partial)?.sync_all()?;
        std::fs::rename(&partial, destination)
            .with_context(|| format!("cannot rename {} to {}", partial.display(), destination.display()))?;
        if let Some(parent) = destination.parent().filter(|parent| !parent.as_os_str().is_empty()) {
            std::fs::File::open(parent)?.sync_all()?;
        }
        Ok(true)
    })();
    match copied {
        Ok(true) => {
            println!("backup written to {}", destination.display());
            ExitCode::SUCCESS
        }
        Ok(false) => {
            eprintln!("histd backup: the copy is damaged (the store itself may be: run histd scrub)");
            ExitCode::from(1)
        }
        Err(error) => {
            eprintln!("histd backup: {error:#}");
            ExitCode::from(1)
        }
    }
}

/// `histd restore BACKUP --data-dir DIR`: puts a backup back as the directory's store, with
/// the daemon stopped (refused while one holds the directory). The backup is scrubbed first;
/// the store it replaces is kept beside it as `histd.db.replaced-<unix s>`.
pub fn restore(backup: &Path, dir: &Path) -> ExitCode {
    match restore_file(backup, dir) {
        Ok(kept) => {
            println!("restored {} into {}", backup.display(), dir.display());
            if let Some(kept) = kept {
                println!("the store it replaced is kept as {}", kept.display());
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("histd restore: {error:#}");
            ExitCode::from(1)
        }
    }
}

fn restore_file(backup: &Path, dir: &Path) -> anyhow::Result<Option<PathBuf>> {
    anyhow::ensure!(scrub_file(backup)?, "{} is damaged: not restored", backup.display());
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let _lock = crate::sinks::store::lock_data_dir(dir)?;
    let target = dir.join(DATABASE);
    let incoming = dir.join(format!("{DATABASE}.restoring"));
    std::fs::copy(backup, &incoming).with_context(|| format!("cannot copy into {}", incoming.display()))?;
    std::fs::File::open(&incoming)?.sync_all()?;
    let kept = dir.join(format!("{DATABASE}.replaced-{}", crate::clock::unix_now_s()));
    // The old store goes aside whole, its write-ahead log with it.
    let replaced = crate::sinks::store::move_files(&target, &kept)
        .with_context(|| format!("cannot move {} aside", target.display()))?;
    std::fs::rename(&incoming, &target)?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(replaced.then_some(kept))
}
