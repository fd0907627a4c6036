//! `histd scrub`, `histd backup` and `histd restore`: a store's data directory checked, copied
//! while its daemon runs, and put back from a copy.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;

use crate::sinks::store::DATABASE;

/// `histd scrub --data-dir DIR`: reads every block and checks it (its checksum, its bytes)
/// and SQLite's pages; lists what is damaged now, then the store's record of damage found
/// before (blocks left out, salvages) that no operator acknowledged. Exit 0: clean and nothing
/// unacknowledged; 1: damage found now or recorded before, or a store file that cannot be read
/// at all (a damaged header or schema is damage: issue 48, P9); 2: no store file. With
/// `acknowledge`, the record's entries are acknowledged (kept, no longer reported).
pub fn scrub(dir: &Path, acknowledge: bool) -> ExitCode {
    let path = dir.join(DATABASE);
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
    match back_up(dir, destination) {
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
            let salvaged = &damage.salvaged;
            println!(
                "backup written to {}: every intact block and row; left out: {} damaged blocks, {} unreadable pages, {} unreadable rows, {} points of series whose group row was lost{}",
                destination.display(),
                damage.blocks.len(),
                salvaged.unreadable_pages,
                salvaged.unreadable_rows,
                salvaged.orphaned_points,
                if salvaged.first_page_rebuilt { " (the store's first page is damaged: read through a rebuilt one)" } else { "" }
            );
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

/// What a backup of a store with damage left out.
struct Damage {
    /// The blocks whose checksum or bytes did not hold.
    blocks: Vec<store::DamagedBlock>,
    /// What the copy could not read.
    salvaged: store::Salvaged,
}

/// Writes the backup; the damage it left out, if the store has any.
fn back_up(dir: &Path, destination: &Path) -> anyhow::Result<Option<Damage>> {
    let source = dir.join(DATABASE);
    anyhow::ensure!(source.exists(), "no store at {} (--data-dir)", source.display());
    anyhow::ensure!(!destination.exists(), "{} exists already", destination.display());
    // Written whole as DEST.partial, checked, synced, then renamed: a backup killed or failing
    // half way never leaves a file named as the backup.
    let partial = PathBuf::from(format!("{}.partial", destination.display()));
    let _ = std::fs::remove_file(&partial);
    let whole = (|| -> Result<bool, store::StoreError> {
        let store = store::Store::open_reader(&source)?;
        store.backup_to(&partial)?;
        Ok(store::Store::open_reader(&partial)?.scrub()?.is_clean())
    })();
    let damage = match whole {
        Ok(true) => None,
        Ok(false) => Some(copy_intact(&source, &partial)?),
        Err(error) if error.is_damaged_file() => Some(copy_intact(&source, &partial)?),
        Err(error) => {
            // A copy that could not be written whole (a full disk) leaves nothing behind.
            let _ = std::fs::remove_file(&partial);
            return Err(anyhow::Error::new(error).context(format!("cannot write the backup {}", partial.display())));
        }
    };
    // Damage the copy itself has (a disk that wrote it wrong) still fails the backup.
    if !scrub_file(&partial)? {
        anyhow::bail!("the copy {} is damaged (the store itself may be: run histd scrub)", partial.display());
    }
    std::fs::File::open(&partial)?.sync_all()?;
    std::fs::rename(&partial, destination)
        .with_context(|| format!("cannot rename {} to {}", partial.display(), destination.display()))?;
    if let Some(parent) = destination.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(damage.filter(|damage| {
        let salvaged = &damage.salvaged;
        !damage.blocks.is_empty()
            || salvaged.unreadable_pages + salvaged.unreadable_rows + salvaged.orphaned_points > 0
            || salvaged.first_page_rebuilt
    }))
}

/// The backup of a store whose copy was not whole: its intact rows copied into a fresh store
/// at `partial`, read in one snapshot while a daemon may write; a store SQLite cannot open (a
/// damaged first page) is copied first, and the copy read through a rebuilt first page.
fn copy_intact(source: &Path, partial: &Path) -> anyhow::Result<Damage> {
    let fresh = |partial: &Path| -> anyhow::Result<()> {
        let _ = std::fs::remove_file(partial);
        drop(store::Store::open(partial, store::Options::default()).context("cannot make the backup's store")?);
        Ok(())
    };
    fresh(partial)?;
    let now = crate::clock::unix_now_s() as i64;
    let copied = match store::copy_intact(source, partial, now) {
        Err(error) if error.is_damaged_file() => {
            fresh(partial)?;
            let copy = PathBuf::from(format!("{}.source", partial.display()));
            std::fs::copy(source, &copy).with_context(|| format!("cannot copy the store to {}", copy.display()))?;
            let salvaged = store::salvage_intact(&copy, partial, now);
            let _ = std::fs::remove_file(&copy);
            let _ = std::fs::remove_file(format!("{}.first-page", copy.display()));
            salvaged
        }
        other => other,
    };
    let (salvaged, blocks) = copied.with_context(|| format!("cannot read {}", source.display()))?;
    Ok(Damage { blocks, salvaged })
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
