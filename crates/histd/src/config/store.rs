//! The embedded store and the HTTP API: `store: { dataDir, retention: { raw, minute, hour },
//! maxBytes }`, `http_address`, `http_port`.

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
    /// `store.maxBytes` (2 GiB): the disk budget; past it the oldest data is dropped, counted.
    pub max_bytes: u64,
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
            "maxBytes": self.max_bytes,
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
        max_bytes: bytes(&section, "maxBytes", store::DEFAULT_MAX_BYTES)?,
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

/// `2GiB`, `500MB`, `512MiB`, `10G`, `1T` (binary or decimal units, `B` optional), or plain
/// bytes; `None` if it is not one.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().trim_end_matches('b') {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        "ki" => 1024.0,
        "mi" => 1024.0 * 1024.0,
        "gi" => 1024.0 * 1024.0 * 1024.0,
        "ti" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let bytes = number * scale;
    (bytes.is_finite() && bytes < 1.8e19).then_some(bytes.round() as u64)
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
    fn reads_sizes() {
        for (text, want) in [
            ("2GiB", Some(2u64 << 30)),
            ("500MB", Some(500_000_000)),
            ("512MiB", Some(512 << 20)),
            ("10G", Some(10_000_000_000)),
            ("1.5GiB", Some(3 << 29)),
            ("1048576", Some(1 << 20)),
            ("2 GiB", Some(2 << 30)),
            ("lots", None),
            ("5XB", None),
        ] {
            assert_eq!(super::parse_bytes(text), want, "{text}");
        }
    }

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
