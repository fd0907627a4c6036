//! The bytes of a stored block: bit-level primitives, number columns, histogram columns, and
//! the block that holds a group of series over a span of time. Pure functions, no SQLite.

pub mod bits;
pub mod block;
pub mod column;
pub mod hists;

/// A stored block that does not decode, with what was wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt(pub &'static str);

impl std::fmt::Display for Corrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Corrupt {}
