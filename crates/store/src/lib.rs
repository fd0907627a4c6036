//! histd's embedded store: every flush on SQLite (WAL, one writer) as one compressed block per
//! group of series, compacted every ten minutes into per-group blocks whose numbers and
//! histograms are packed column by column (see `codec`), rolled up per minute and per hour by
//! exact merges (counts add, min/max combine, circllhists merge bin by bin), trimmed per
//! resolution by retention and to a disk budget, and read back for queries.
//!
//! Time is always an argument: nothing here reads a clock.

#![deny(missing_docs)]

mod blocks;
mod checked_rows;
pub mod codec;
mod compact;
mod damage_record;
pub mod data_dir;
mod first_page;
mod forget;
mod log_positions;
mod migrate;
mod prune;
pub mod query;
pub mod range;
mod read;
mod row;
mod salvage;
mod schema;
mod series;
mod upkeep;
mod usage;
mod write;

pub use checked_rows::DamagedRow;
pub use damage_record::DamageEntry;
pub use first_page::{header_damage, Rebuilt};
pub use forget::Forgotten;
pub use query::{bins_of, parse, parse_selector, Expr, Function, ParseError, TypeMismatch, MAX_DEPTH};
pub use read::{DamagedBlock, SeriesInfo};
pub use row::Row;
pub use salvage::{copy_intact, salvage, salvage_intact, Salvaged};
pub use schema::{Resolution, PERIOD};
pub use series::{Kind, Selector, SeriesKey};
pub use upkeep::{ScrubReport, ScrubStep};
pub use usage::{Footprint, Usage};
pub use write::{FlushRows, Options, Retention, Store, DEFAULT_MAX_BYTES};

/// What can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused (a full disk, a corrupt file, a locked database).
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A stored block does not decode.
    #[error("the {resolution:?} block of group {grp} at {start} is corrupt: {reason}")]
    CorruptBlock {
        /// Its resolution.
        resolution: Resolution,
        /// Its group.
        grp: i64,
        /// Its start, unix seconds.
        start: i64,
        /// What the decoder said.
        reason: &'static str,
    },
    /// A backup cannot be written where it was asked.
    #[error("backup: {0}")]
    Backup(String),
    /// Series or group rows whose checksum does not hold: the file is damaged.
    #[error("rows do not match their checksums: {}", checked_rows::list(.0))]
    DamagedRows(Vec<DamagedRow>),
    /// A damaged store file cannot be salvaged.
    #[error("salvage: {0}")]
    Salvage(String),
    /// The store file is there but empty, with no write-ahead log: it was emptied since it was
    /// made (histd writes its first page when it makes it).
    #[error("the store file is empty (0 bytes, no write-ahead log): what it held is gone")]
    EmptiedFile,
    /// The store file's header is not one histd writes (first_page.rs): a damaged first page.
    #[error("the file's header is damaged: {0}")]
    DamagedHeader(String),
    /// A histogram of a store of the first format does not decode (while migrating it).
    #[error("stored histogram of series {series} at {ts} is corrupt: {reason}")]
    CorruptHistogram {
        /// The series id.
        series: i64,
        /// The row's time.
        ts: i64,
        /// What the decoder said.
        reason: circllhist::DecodeError,
    },
}

impl StoreError {
    /// Whether the database file itself is damaged (SQLite finds it malformed, or not a
    /// database at all: a bad header, a truncated or overwritten file), as opposed to a failure
    /// of the disk or the system (no space, no permission, locked).
    pub fn is_damaged_file(&self) -> bool {
        match self {
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(error, _)) => {
                matches!(error.code, rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
            }
            StoreError::DamagedRows(_) | StoreError::EmptiedFile | StoreError::DamagedHeader(_) => true,
            _ => false,
        }
    }
}
