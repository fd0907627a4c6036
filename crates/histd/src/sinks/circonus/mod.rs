//! The circonus backend: each flush to a Circonus broker's HTTPTrap check (JSON, `PUT`) or to
//! IRONdb's `/raw` endpoint (`M` and `H1` records), the only systems whose native histogram
//! is circllhist: a timer's histogram leaves as the very bytes histd keeps and stores, so
//! nothing is re-binned or lost. Deliveries are retried like remote write's (5xx, 429 and
//! failed connections; `Retry-After` obeyed), held in a retry buffer bounded in bytes, and
//! the last flush is sent at shutdown.

pub mod config;
pub mod encode;
#[cfg(test)]
mod tests;

use hyper::Method;
use serde_json::Value;
use tokio::task::JoinHandle;

pub use config::CirconusConfig;
use config::CirconusFormat;

use super::delivery::{plain_judge, spawn_http_sink};
use super::{Backend, Context, FileContents, Shared, Started};
use crate::config_reader::keys::KeyDoc;
use crate::config_reader::{ConfigError, Reader};

/// The circonus backend: histograms as circllhist to an HTTPTrap check or IRONdb.
pub struct Circonus;

impl Backend for Circonus {
    const NAME: &'static str = "circonus";
    const KEYS: &'static [KeyDoc] = config::KEYS;
    /// `None` unless `backends` lists it (then `circonus.url` is required).
    type Settings = Option<CirconusConfig>;

    fn read(top: &Reader<'_>, listed: bool) -> Result<Option<CirconusConfig>, ConfigError> {
        config::circonus(top, listed)
    }

    fn effective(settings: &Option<CirconusConfig>) -> Value {
        settings.as_ref().map_or(Value::Null, CirconusConfig::effective)
    }

    fn check_files(settings: &Option<CirconusConfig>) -> Vec<String> {
        settings.as_ref().map_or_else(Vec::new, |c| c.http.check_files("circonus"))
    }

    /// Its settings (header values included), its TLS files' bytes and `sinkQueueBytes`.
    type Identity = (Option<CirconusConfig>, FileContents, u64);

    fn identity(settings: &Option<CirconusConfig>, shared: &Shared) -> Self::Identity {
        let files = settings.as_ref().map(|settings| settings.http.files()).unwrap_or_default();
        (settings.clone(), files, shared.sink_queue_bytes)
    }

    fn start(settings: &Option<CirconusConfig>, context: Context) -> anyhow::Result<Started> {
        let settings =
            settings.clone().ok_or_else(|| anyhow::anyhow!("circonus.url: the circonus backend needs a URL"))?;
        Ok(Started::task(spawn(settings, context)?))
    }
}

/// Starts the circonus backend's task.
fn spawn(config: CirconusConfig, context: Context) -> anyhow::Result<JoinHandle<()>> {
    let content_type = match config.format {
        CirconusFormat::HttpTrap => "application/json",
        CirconusFormat::Irondb { .. } => "text/tab-separated-values",
    };
    let headers = vec![("content-type".to_string(), content_type.to_string())];
    let destination = config.http.destination("circonus", Method::PUT, headers, plain_judge, "circonus")?;
    let max = config.max_request_bytes();
    let format = config.format;
    Ok(spawn_http_sink(move |snapshot| encode::encode(snapshot, &format, max), destination, context))
}
