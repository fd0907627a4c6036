//! The fleet: what a local histd and a global histd share to forward mergeable intervals.
//!
//! - [`format`]: the forward batch format (docs/forward-format.md): a flush's mergeable
//!   series, snappy-compressed, with an identity the global merges once;
//! - [`cut`]: a flush cut into one batch per node (or Kafka partition) by [`ring`]'s
//!   rendezvous hashing, each within a size;
//! - [`spool`]: the local's batches waiting for a node, bounded in bytes, on disk when asked;
//! - [`journal`]: the global's record of batches acknowledged and not yet flushed;
//! - [`integrity`]: the checksum trailer of every file the spool and the journal write;
//! - [`signing`]: the HMAC proof of a batch's source on Kafka;
//! - [`kafka`]: the settings both sides give librdkafka, and the local's producer;
//! - [`secret_file`]: files holding a secret (tokens, keys, passwords), read with care.
//!
//! Nothing here knows the daemon: the daemon's forward backend (`sinks/forward/`), its
//! receiving service (`global/`) and its proxy (`proxy/`) use this crate.

pub mod cut;
pub mod format;
pub mod integrity;
pub mod journal;
pub mod kafka;
pub mod ring;
pub mod secret_file;
pub mod signing;
pub mod spool;

/// The wall clock in milliseconds since the Unix epoch.
fn unix_now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64)
}

/// A lock that ignores poisoning (a thread that panicked holding it left consistent data).
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
