//! The embedded store: `store: { dataDir, retention: { raw, minute, hour }, maxBytes,
//! scrubInterval }`.

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::config_reader::keys::{histd, KeyDoc};
use crate::config_reader::{parse_bytes, parse_duration, ConfigError, Reader};

/// The data directory when neither `--data-dir` nor `store.dataDir` says.
pub const DEFAULT_DATA_DIR: &str = "histd-data";

/// The store's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreConfig {
    /// `store.dataDir` (or `--data-dir`): where `histd.db` lives.
    pub data_dir: PathBuf,
    /// `store.retention.{raw,minute,hour}`: durations (`24h`, `30d`) or seconds.
    pub retention: store::Retention,
    /// `store.maxBytes` (2 GiB): the disk budget; past it the oldest data is dropped, counted.
    pub max_bytes: u64,
    /// `store.scrubInterval` (`1d`; `0`: never): how often every block is read and checked,
    /// a slice after each flush.
    pub scrub_interval: Option<std::time::Duration>,
    /// `store.snapshots: { interval, keep }` (off): backups beside the store, rotated.
    pub snapshots: Option<super::snapshots::SnapshotSettings>,
}

impl StoreConfig {
    /// The settings as `histd check-config` prints them.
    pub fn effective(&self) -> Value {
        json!({
            "dataDir": self.data_dir.display().to_string(),
            "retention": { "raw": self.retention.raw, "minute": self.retention.minute, "hour": self.retention.hour },
            "maxBytes": self.max_bytes,
            "scrubInterval": self.scrub_interval.map_or(0, |interval| interval.as_secs()),
            "snapshots": self.snapshots.map_or(Value::Null, |s| json!({ "interval": s.interval.as_secs(), "keep": s.keep })),
        })
    }
}

/// Reads `store`.
pub fn store(top: &Reader<'_>) -> Result<StoreConfig, ConfigError> {
    let section = top.object("store")?;
    let retention = section.object("retention")?;
    let defaults = store::Retention::default();
    Ok(StoreConfig {
        data_dir: section.string("dataDir")?.map_or_else(|| PathBuf::from(DEFAULT_DATA_DIR), PathBuf::from),
        retention: store::Retention {
            raw: seconds(&retention, "raw", defaults.raw)?,
            minute: seconds(&retention, "minute", defaults.minute)?,
            hour: seconds(&retention, "hour", defaults.hour)?,
        },
        max_bytes: bytes(&section, "maxBytes", store::DEFAULT_MAX_BYTES)?,
        scrub_interval: scrub_interval(&section)?,
        snapshots: snapshots(&section)?,
    })
}

/// `store.snapshots: { interval, keep }`: off without an interval (or with `0`); `keep` is 3
/// unless said, at least 1.
fn snapshots(section: &Reader<'_>) -> Result<Option<super::snapshots::SnapshotSettings>, ConfigError> {
    let snapshots = section.object("snapshots")?;
    let interval = match snapshots.raw("interval") {
        None if snapshots.raw("keep").is_some() => {
            return Err(snapshots.error("keep", "needs store.snapshots.interval (how often a snapshot is taken)"))
        }
        None => return Ok(None),
        Some(Value::Number(n)) if n.as_f64() == Some(0.0) => return Ok(None),
        Some(Value::String(text)) if text.trim() == "0" => return Ok(None),
        Some(_) => std::time::Duration::from_secs(seconds(&snapshots, "interval", 86_400)? as u64),
    };
    let keep = snapshots.whole("keep", 3, 1)? as usize;
    Ok(Some(super::snapshots::SnapshotSettings { interval, keep }))
}

/// `store.scrubInterval`: a duration (`1d`, `12h`) or seconds; `0` turns the scrub off.
fn scrub_interval(section: &Reader<'_>) -> Result<Option<std::time::Duration>, ConfigError> {
    const DAY: u64 = 86_400;
    match section.raw("scrubInterval") {
        None => Ok(Some(std::time::Duration::from_secs(DAY))),
        Some(Value::Number(n)) if n.as_f64() == Some(0.0) => Ok(None),
        Some(Value::String(text)) if text.trim() == "0" => Ok(None),
        Some(_) => Ok(Some(std::time::Duration::from_secs(seconds(section, "scrubInterval", DAY as i64)? as u64))),
    }
}

fn seconds(section: &Reader<'_>, key: &str, default: i64) -> Result<i64, ConfigError> {
    match section.raw(key) {
        None => Ok(default),
        Some(Value::Number(n)) if n.as_i64().is_some_and(|s| s > 0) => Ok(n.as_i64().unwrap_or(default)),
        Some(Value::String(text)) => parse_duration(text)
            .ok_or_else(|| section.error(key, format!("'{text}' is not a duration like 90s, 30m, 24h, 30d"))),
        Some(other) => Err(section.error(key, format!("expected a duration like 24h, got {other}"))),
    }
}

/// The least `store.maxBytes` accepted: 16 MiB.
const LEAST_MAX_BYTES: u64 = 16 << 20;

fn bytes(section: &Reader<'_>, key: &str, default: u64) -> Result<u64, ConfigError> {
    let parsed = match section.raw(key) {
        None => return Ok(default),
        Some(Value::Number(n)) => n.as_f64().filter(|b| b.fract() == 0.0 && *b >= 0.0 && *b < 1e19).map(|b| b as u64),
        Some(Value::String(text)) => parse_bytes(text),
        Some(_) => None,
    };
    match parsed {
        Some(bytes) if bytes >= LEAST_MAX_BYTES => Ok(bytes),
        Some(bytes) => Err(section.error(key, format!("{bytes} bytes is below the least budget, 16MiB"))),
        None => Err(section.error(key, "expected a size like 2GiB, 500MB or a number of bytes".to_string())),
    }
}

/// Its keys, for README's table (`config/keys.rs`).
pub const KEYS: &[KeyDoc] = &[
    histd(&["store.dataDir"], "`histd-data` (or `--data-dir`)", "where the store keeps `histd.db`"),
    histd(&["store.retention.raw", "store.retention.minute", "store.retention.hour"], "`24h` / `30d` / `365d`", "how long each resolution is kept (durations or seconds)").in_place(),
    histd(&["store.scrubInterval"], "`1d`", "how often every stored block is read and its checksum checked, a slice of 64 blocks after each flush (so a pass costs a little at every flush, not a stall); a damaged block is logged with its group and span and counted in `store.store_scrub_damaged_blocks`; `0` turns it off. `histd scrub` does the same offline").in_place(),
    histd(&["store.snapshots.interval", "store.snapshots.keep"], "off / `3`", "snapshots to roll back to: every `interval` (`1d`, `6h`) a backup of the store (the same copy as `histd backup`, scrubbed; a store with damage is copied without it, logged) into `<dataDir>/snapshots/histd-<unix s>.db`, the `keep` newest kept; `histd restore --latest` puts the newest whole one back. Off by default: each costs about the store's size on the same disk, beyond `store.maxBytes`. Counted: `store_snapshots_taken`, `store_snapshots_with_damage`, `store_snapshot_failures`").in_place(),
    histd(&["store.maxBytes"], "`2GiB`", "the store's disk budget (database and log; `500MB`, `2GiB` or bytes, at least 16 MiB): past it the oldest blocks are dropped first, and counted (`store_budget_dropped_points`)").in_place(),
];
