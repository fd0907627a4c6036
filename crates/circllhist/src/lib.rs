//! Circonus/OpenHistogram log-linear histograms ("circllhist"), bit-compatible with the C
//! reference libcircllhist: the same bins, the same statistics to the last bit, the same
//! binary and base64 forms, without its two bugs (truncated count lengths, and the `n + 1`
//! overflow of a saturated bin).
//!
//! ```
//! use circllhist::{Histogram, QuantileType};
//! let mut h = Histogram::new();
//! for ms in [12, 15, 15, 230] {
//!     h.insert_int_scale(ms, -3, 1); // milliseconds, as seconds, binned exactly
//! }
//! assert_eq!(h.count(), 4);
//! assert_eq!(h.count_above(0.2, true), 1); // one request took 0.2 s or more
//! let p50 = h.quantiles(&[0.5], QuantileType::Type1).unwrap()[0];
//! assert!((0.015..0.016).contains(&p50));
//! assert_eq!(Histogram::from_base64(&h.to_base64()).unwrap(), h);
//! ```

#![deny(missing_docs)]

mod bucket;
mod codec;
mod decade_counts;
mod histogram;
mod pow10;
mod stats;

pub use bucket::Bucket;
pub use codec::{decode_base64, encode_base64, DecodeError};
pub use decade_counts::DecadeCounts;
pub use histogram::{Histogram, Underflow};
pub use stats::{QuantileType, QueryError};
