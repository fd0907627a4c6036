//! The embedded store and the HTTP API: `store: { dataDir, retention: { raw, minute, hour } }`,
//! `http_address`, `http_port`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use serde_json::{json, Value};

use super::reader::{ConfigError, Reader};

/// The HTTP port when none is given.
pub const DEFAULT_HTTP_PORT: u16 = 8127;
/// The data directory when neither `--data-dir` nor `store.dataDir` says.
pub const DEFAULT_DATA_DIR: &str = "histd-data";

/// Store and HTTP settings.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreConfig {
    /// `store.dataDir` (or `--data-dir`): where `histd.db` lives.
    pub data_dir: PathBuf,
    /// `store.retention.{raw,minute,hour}`: durations (`24h`, `30d`) or seconds.
    pub retention: store::Retention,
    /// `http_address` (127.0.0.1) and `http_port` (8127): the query API and `/health`.
    pub http: SocketAddr,
    /// Whether the HTTP port is bound at all: when something uses it (the store, the
    /// prometheus backend, `global.accept`), when `http_port` or `http_address` is given, or
    /// with `--http-port`; never with `--no-http`.
    pub serve_http: bool,
}

impl StoreConfig {
    /// The settings as `histd check-config` prints them.
    pub fn effective(&self) -> Value {
        json!({
            "dataDir": self.data_dir.display().to_string(),
            "retention": { "raw": self.retention.raw, "minute": self.retention.minute, "hour": self.retention.hour },
            "http": if self.serve_http { Value::String(self.http.to_string()) } else { Value::Null },
        })
    }
}

/// Reads `store`, `http_address`, `http_port`.
pub fn store(top: &Reader<'_>) -> Result<StoreConfig, ConfigError> {
    let section = top.object("store")?;
    let retention = section.object("retention")?;
    let defaults = store::Retention::default();
    let http_ip: IpAddr = match top.string("http_address")? {
        None => Ipv4Addr::LOCALHOST.into(),
        Some(text) => super::listen::parse_ip(&text)
            .ok_or_else(|| top.error("http_address", format!("'{text}' is not an IP address")))?,
    };
    Ok(StoreConfig {
        data_dir: section.string("dataDir")?.map_or_else(|| PathBuf::from(DEFAULT_DATA_DIR), PathBuf::from),
        retention: store::Retention {
            raw: seconds(&retention, "raw", defaults.raw)?,
            minute: seconds(&retention, "minute", defaults.minute)?,
            hour: seconds(&retention, "hour", defaults.hour)?,
        },
        http: SocketAddr::new(http_ip, top.port("http_port", DEFAULT_HTTP_PORT)?),
        serve_http: top.raw("http_port").is_some() || top.raw("http_address").is_some(),
    })
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

/// `10s`, `5m`, `24h`, `30d`, `2w`, or plain seconds; `None` if it is not one, or not positive.
pub fn parse_duration(text: &str) -> Option<i64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: i64 = number.parse().ok()?;
    let scale = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return None,
    };
    number.checked_mul(scale).filter(|&s| s > 0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_durations() {
        for (text, want) in [
            ("10s", Some(10)),
            ("5m", Some(300)),
            ("24h", Some(86_400)),
            ("30d", Some(2_592_000)),
            ("90", Some(90)),
            ("0s", None),
            ("1y", None),
            ("h", None),
            ("-5m", None),
        ] {
            assert_eq!(super::parse_duration(text), want, "{text}");
        }
    }
}
