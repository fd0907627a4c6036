//! The statsd wire protocol: Etsy statsd lines plus the DogStatsD fields modern clients send.
//!
//! Everything here borrows the input and allocates nothing per line. A packet is split into
//! lines by [`lines`]; each line is parsed by [`parse_line`] into zero or more [`Metric`]s (one
//! per value: Etsy's `k:1|c:2|c` groups and DogStatsD's `k:1:2:3|d` packing both give several);
//! a malformed value gives a [`ParseError`] and the rest of the line and packet still count.
//!
//! Key naming (Etsy's sanitisation and tag rendering) is in [`key`]; JavaScript-compatible
//! number reading in [`number`]; the inverse of the parser in [`encode`].

#![deny(missing_docs)]

pub mod encode;
pub mod key;
mod line;
pub mod number;
mod scan;
mod short_key;

pub use line::{lines, parse_line, Kind, Line, Metric, ParseError, Tags, Value, Values};
pub use scan::{scan_lines, ScanLines, Scanned, SimpleMetric};
pub use short_key::ShortKey;
