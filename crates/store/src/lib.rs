//! histd's embedded store: every flush on SQLite (WAL, one writer), rolled up per minute and per
//! hour by exact merges (counts add, min/max combine, circllhists merge bin by bin), trimmed
//! per resolution by retention, and read back for queries.
//!
//! Time is always an argument: nothing here reads a clock.

#![deny(missing_docs)]

pub mod query;
mod read;
mod row;
mod schema;
mod series;
mod write;

pub use query::{bins_of, parse, parse_selector, Expr, Function, ParseError, TypeMismatch, MAX_DEPTH};
pub use read::SeriesInfo;
pub use row::Row;
pub use schema::Resolution;
pub use series::{Kind, Selector, SeriesKey};
pub use write::{rows_of, Retention, Store};

/// What can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused (a full disk, a corrupt file, a locked database).
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A stored histogram does not decode.
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
