//! The file backend: each flush appended to a file you can `tail`, ship and replay, in
//! Net::Statsd::Server's File format (`c<TAB>name<TAB>value`, `g`, `s` with the members,
//! `t<TAB>name.<stat><TAB>value`) or as JSON lines (one object per series, a timer's
//! circllhist in base64). One write per flush; rotated by size (`file.maxBytes`,
//! `file.keep`); reopened when logrotate moves or removes it. Errors are counted in `stats`
//! (`file.errors`, `file.dropped_points.rejected`) and never block ingest.

pub mod config;
pub mod encode;
mod sink;
#[cfg(test)]
mod tests;

use serde_json::Value;

pub use config::FileConfig;

use super::{Backend, Context, Shared, Started};
use crate::config_reader::keys::KeyDoc;
use crate::config_reader::{ConfigError, Reader};

/// The file backend: each flush appended to a file.
pub struct File;

impl Backend for File {
    const NAME: &'static str = "file";
    const KEYS: &'static [KeyDoc] = config::KEYS;
    /// `None` unless `backends` lists it (then `file.name` is required).
    type Settings = Option<FileConfig>;

    fn read(top: &Reader<'_>, listed: bool) -> Result<Option<FileConfig>, ConfigError> {
        config::file(top, listed)
    }

    fn effective(settings: &Option<FileConfig>) -> Value {
        settings.as_ref().map_or(Value::Null, FileConfig::effective)
    }

    /// Its settings, `prefixStats` and `sinkQueueBytes`.
    type Identity = (Option<FileConfig>, String, u64);

    fn identity(settings: &Option<FileConfig>, shared: &Shared) -> Self::Identity {
        (settings.clone(), shared.prefix_stats.clone(), shared.sink_queue_bytes)
    }

    fn start(settings: &Option<FileConfig>, context: Context) -> anyhow::Result<Started> {
        let settings = settings.clone().ok_or_else(|| anyhow::anyhow!("file.name: the file backend needs a file"))?;
        let prefix = context.shared.prefix_stats.clone();
        Ok(Started::task(sink::spawn(settings, prefix, context)))
    }
}
