//! The influx backend: each flush as InfluxDB line protocol (encode.rs: Telegraf's statsd
//! schema) to a write endpoint: InfluxDB 1.x `/write`, 2.x and 3.x `/api/v2/write`, or any
//! receiver of line protocol. Deliveries go through the delivery engine: 5xx, 429 and failed
//! connections retried (`Retry-After` obeyed), other answers dropped and counted, held in a
//! retry buffer bounded in bytes, and the last flush sent at shutdown. A partial write (400 or
//! 422 `partial write: ... dropped=N`: points InfluxDB refused, e.g. a field whose type another
//! writer fixed, the rest written) is delivered with its N points counted in
//! `dropped_points.rejected`.
//!
//! Adding this backend was this folder and one line in `config/backends.rs`'s list (and the
//! `mod` line every Rust module needs).

pub mod config;
pub mod encode;
#[cfg(test)]
mod tests;

use hyper::Method;
use serde_json::Value;
use tokio::task::JoinHandle;

pub use config::InfluxConfig;

use super::delivery::{plain_judge, spawn_http_sink, Verdict};
use super::{Backend, Context, FileContents, Shared, Started};
use crate::config_reader::keys::KeyDoc;
use crate::config_reader::{ConfigError, Reader};
use crate::http_client::Answer;

/// The influx backend: line protocol to InfluxDB.
pub struct Influx;

impl Backend for Influx {
    const NAME: &'static str = "influx";
    const KEYS: &'static [KeyDoc] = config::KEYS;
    /// `None` unless `backends` lists it (then `influx.url` is required).
    type Settings = Option<InfluxConfig>;

    fn read(top: &Reader<'_>, listed: bool) -> Result<Option<InfluxConfig>, ConfigError> {
        config::influx(top, listed)
    }

    fn effective(settings: &Option<InfluxConfig>) -> Value {
        settings.as_ref().map_or(Value::Null, InfluxConfig::effective)
    }

    fn check_files(settings: &Option<InfluxConfig>) -> Vec<String> {
        settings.as_ref().map_or_else(Vec::new, |c| c.http.check_files("influx"))
    }

    /// Its settings (header values included), its TLS files' bytes and `sinkQueueBytes`.
    type Identity = (Option<InfluxConfig>, FileContents, u64);

    fn identity(settings: &Option<InfluxConfig>, shared: &Shared) -> Self::Identity {
        let files = settings.as_ref().map(|settings| settings.http.files()).unwrap_or_default();
        (settings.clone(), files, shared.sink_queue_bytes)
    }

    fn start(settings: &Option<InfluxConfig>, context: Context) -> anyhow::Result<Started> {
        let settings = settings.clone().ok_or_else(|| anyhow::anyhow!("influx.url: the influx backend needs a URL"))?;
        Ok(Started::task(spawn(settings, context)?))
    }
}

/// Starts the influx backend's task.
fn spawn(config: InfluxConfig, context: Context) -> anyhow::Result<JoinHandle<()>> {
    let headers = vec![("content-type".to_string(), "text/plain; charset=utf-8".to_string())];
    let destination = config.http.destination("influx", Method::POST, headers, judge, "influx")?;
    let layout = config.layout();
    Ok(spawn_http_sink(move |snapshot| encode::encode(snapshot, &layout), destination, context))
}

/// InfluxDB's reading of an answer: a partial write is delivered less the points it dropped;
/// the rest as plain HTTP.
pub fn judge(answer: &Answer) -> Verdict {
    match answer.status {
        400 | 422 => match partial_write(&answer.body) {
            Some(rejected) => Verdict::Delivered { rejected, reason: Some(answer.summary()) },
            None => plain_judge(answer),
        },
        _ => plain_judge(answer),
    }
}

/// The points a partial write dropped: `{"error":"partial write: ... dropped=N"}`.
pub fn partial_write(body: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(body).ok()?;
    let (_, after) = text.split_once("partial write")?.1.rsplit_once("dropped=")?;
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}
