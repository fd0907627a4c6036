//! `histd backup`'s copy, shared with the daemon's snapshots (snapshots.rs): a consistent copy
//! of the store in one new file, taken while the writer goes on; of a store with damage, a copy
//! of everything intact, naming what it left out.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// What a backup of a store with damage left out.
pub struct Damage {
    /// The blocks whose checksum or bytes did not hold.
    pub blocks: Vec<store::DamagedBlock>,
    /// What the copy could not read.
    pub salvaged: store::Salvaged,
}

impl Damage {
    /// What the backup left out, in one line.
    pub fn summary(&self) -> String {
        let salvaged = &self.salvaged;
        format!(
            "left out: {} damaged blocks, {} unreadable pages, {} unreadable rows, {} points of series whose group row was lost{}",
            self.blocks.len(),
            salvaged.unreadable_pages,
            salvaged.unreadable_rows,
            salvaged.orphaned_points,
            if salvaged.first_page_rebuilt { " (the store's first page is damaged: read through a rebuilt one)" } else { "" }
        )
    }
}

/// Writes the backup; the damage it left out, if the store has any.
pub fn back_up(dir: &Path, destination: &Path) -> anyhow::Result<Option<Damage>> {
    let source = store::data_dir::database(dir);
    anyhow::ensure!(source.exists(), "no store at {} (--data-dir)", source.display());
    anyhow::ensure!(!destination.exists(), "{} exists already", destination.display());
    // Written whole as DEST.partial, checked, synced, then renamed: a backup killed or failing
    // half way never leaves a file named as the backup, and a failing one leaves nothing.
    let partial = PathBuf::from(format!("{}.partial", destination.display()));
    remove_copy(&partial);
    let written = write_copy(&source, &partial);
    if written.is_err() {
        remove_copy(&partial);
    }
    let damage = written?;
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

/// Writes the copy of the store file `source` as `partial`, scrubbed and synced; what it left
/// out when the store has damage.
fn write_copy(source: &Path, partial: &Path) -> anyhow::Result<Option<Damage>> {
    let whole = (|| -> Result<bool, store::StoreError> {
        let store = store::Store::open_reader(source)?;
        store.backup_to(partial)?;
        Ok(store::Store::open_reader(partial)?.scrub()?.is_clean())
    })();
    let damage = match whole {
        Ok(true) => None,
        Ok(false) => Some(copy_intact(source, partial)?),
        Err(error) if error.is_damaged_file() => Some(copy_intact(source, partial)?),
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!("cannot write the backup {}", partial.display())))
        }
    };
    // Damage the copy itself has (a disk that wrote it wrong) still fails the backup.
    let copy_whole = store::Store::open_reader(partial).and_then(|copy| copy.scrub()).map(|report| report.is_clean());
    if !copy_whole.with_context(|| format!("cannot read the copy {}", partial.display()))? {
        anyhow::bail!("the copy {} is damaged (the store itself may be: run histd scrub)", partial.display());
    }
    std::fs::File::open(partial)?.sync_all()?;
    Ok(damage)
}

/// Removes a copy that did not end, with the files SQLite and the copy keep beside it.
fn remove_copy(partial: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal", ".source", ".source.first-page"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", partial.display()));
    }
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
