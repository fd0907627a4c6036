//! `histd scrub`, `histd backup` and `histd restore`: a store's data directory checked, copied
//! while its daemon runs, and put back from a copy.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;

/// `histd scrub --data-dir DIR`: reads every block and checks it (its checksum, its bytes)
/// and SQLite's pages; lists what is damaged now, then the store's record of damage found
/// before (blocks left out, salvages) that no operator acknowledged. Exit 0: clean and nothing
/// unacknowledged; 1: damage found now or recorded before, or a store file that cannot be read
/// at all (a damaged header or schema is damage: issue 48, P9); 2: no store file. With
/// `acknowledge`, the record's entries are acknowledged (kept, no longer reported).
pub fn scrub(dir: &Path, acknowledge: bool) -> ExitCode {
    let path = store::data_dir::database(dir);
    if !path.exists() {
        eprintln!("histd scrub: no store at {} (--data-dir)", path.display());
        return ExitCode::from(2);
    }
    let whole = match scrub_file(&path) {
        Ok(whole) => whole,
        Err(error) => {
            eprintln!("histd scrub: damaged: {error:#}");
            return ExitCode::from(1);
        }
    };
    match past_damage(&path, acknowledge) {
        Ok(0) if whole => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(error) => {
            eprintln!("histd scrub: the record of damage: {error:#}");
            ExitCode::from(1)
        }
    }
}

/// Prints the store's record of damage no operator acknowledged yet, acknowledging it with
/// `acknowledge`; how many entries stay unacknowledged.
fn past_damage(path: &Path, acknowledge: bool) -> anyhow::Result<usize> {
    let store = store::Store::open_reader(path).with_context(|| format!("cannot read {}", path.display()))?;
    let entries = store.damage_record(true)?;
    for entry in &entries {
        println!("recorded: {entry}");
    }
    if acknowledge {
        let acknowledged = store.acknowledge_damage(crate::clock::unix_now_s() as i64)?;
        println!("{acknowledged} entries of the record of damage acknowledged (kept, no longer reported)");
        return Ok(0);
    }
    if !entries.is_empty() {
        println!(
            "{} entries of the record of damage not acknowledged (histd scrub --acknowledge, once dealt with)",
            entries.len()
        );
    }
    Ok(entries.len())
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

/// `histd backup`'s exit code when the store has damage and a backup was made all the same: it
/// holds every intact block and row, and each block left out is named.
pub const BACKED_UP_WITH_DAMAGE: u8 = 3;

/// `histd backup DEST --data-dir DIR`: a consistent copy of the store in one new file, taken
/// while a daemon writes it (a read snapshot; the writer is not stopped), then scrubbed. Of a
/// store with damage (blocks whose checksum does not hold, rows or pages that do not read, a
/// damaged first page) the backup holds everything intact and names what it left out: exit
/// [`BACKED_UP_WITH_DAMAGE`]. Exit 1: no backup (and no file named as one).
pub fn backup(dir: &Path, destination: &Path) -> ExitCode {
    match crate::sinks::store::back_up(dir, destination) {
        Ok(None) => {
            println!("backup written to {}", destination.display());
            ExitCode::SUCCESS
        }
        Ok(Some(damage)) => {
            for block in &damage.blocks {
                println!(
                    "left out: damaged block: {:?} resolution, group {}, {} to {} (unix s): {}",
                    block.resolution,
                    block.grp,
                    block.start,
                    block.start + block.resolution.block_span(),
                    block.reason
                );
            }
            println!("backup written to {}: every intact block and row; {}", destination.display(), damage.summary());
            eprintln!(
                "histd backup: the store has damage: the backup holds everything else (exit {BACKED_UP_WITH_DAMAGE}; run histd scrub)"
            );
            ExitCode::from(BACKED_UP_WITH_DAMAGE)
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
/// Without `backup` (`--latest`), the newest snapshot in `DIR/snapshots` that scrubs whole.
pub fn restore(backup: Option<&Path>, dir: &Path) -> ExitCode {
    let latest;
    let backup = match backup {
        Some(backup) => backup,
        None => match latest_whole_snapshot(dir) {
            Ok(found) => {
                latest = found;
                &latest
            }
            Err(error) => {
                eprintln!("histd restore --latest: {error:#}");
                return ExitCode::from(1);
            }
        },
    };
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

/// The newest snapshot of the data directory `dir` that scrubs whole; the newer ones that do
/// not are named.
fn latest_whole_snapshot(dir: &Path) -> anyhow::Result<PathBuf> {
    let snapshots = crate::sinks::store::snapshots::snapshots(dir);
    anyhow::ensure!(
        !snapshots.is_empty(),
        "no snapshot in {} (store.snapshots takes them)",
        dir.join(crate::sinks::store::snapshots::SNAPSHOTS_DIR).display()
    );
    for (_, path) in snapshots {
        let whole = store::Store::open_reader(&path).and_then(|copy| copy.scrub()).map(|report| report.is_clean());
        match whole {
            Ok(true) => return Ok(path),
            Ok(false) => eprintln!("histd restore --latest: {} is damaged: passed over", path.display()),
            Err(error) => eprintln!("histd restore --latest: {} does not read ({error}): passed over", path.display()),
        }
    }
    anyhow::bail!("no snapshot in {} scrubs whole", dir.display())
}

fn restore_file(backup: &Path, dir: &Path) -> anyhow::Result<Option<PathBuf>> {
    anyhow::ensure!(scrub_file(backup)?, "{} is damaged: not restored", backup.display());
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let _lock = store::data_dir::lock(dir)?;
    let target = store::data_dir::database(dir);
    let incoming = store::data_dir::restoring(dir);
    std::fs::copy(backup, &incoming).with_context(|| format!("cannot copy into {}", incoming.display()))?;
    std::fs::File::open(&incoming)?.sync_all()?;
    let kept = store::data_dir::replaced(dir, crate::clock::unix_now_s());
    // The old store goes aside whole, its write-ahead log with it.
    let replaced = store::data_dir::move_files(&target, &kept)
        .with_context(|| format!("cannot move {} aside", target.display()))?;
    std::fs::rename(&incoming, &target)?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(replaced.then_some(kept))
}
