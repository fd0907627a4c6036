//! The `influx` section: the write endpoint (InfluxDB 1.x `/write`, 2.x and 3.x
//! `/api/v2/write`, or any receiver of line protocol) and how points are named.

use std::time::Duration;

use serde_json::{json, Value};

use super::encode::Layout;
use crate::config_reader::keys::{histd, KeyDoc};
use crate::config_reader::{string_object, ConfigError, Reader};
use crate::http_client::HttpUrl;

/// What waits while the receiver fails.
pub const DEFAULT_RETRY_BUFFER_BYTES: u64 = 64 * 1024 * 1024;
/// One request's size: a flush larger than this is split (InfluxDB's own advice is batches of
/// about 5,000 lines; 1 MiB holds that many short ones).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// The influx backend's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct InfluxConfig {
    /// `influx.url` (required with the backend), with `precision=s` added.
    pub url: HttpUrl,
    /// The URL as given (for `check-config`, its query hidden: it may hold a password).
    pub url_text: String,
    /// `influx.headers` (none): sent with every request (`Authorization: Token ...`).
    pub headers: Vec<(String, String)>,
    /// `influx.separator` (`_`) and `influx.tags` (none).
    pub separator: String,
    /// Tags added to every point.
    pub tags: Vec<(String, String)>,
    /// `influx.timeoutMs` (10000).
    pub timeout: Duration,
    /// `influx.retryBufferBytes` (64 MiB).
    pub retry_buffer_bytes: u64,
    /// `influx.maxRequestBytes` (1 MiB).
    pub max_request_bytes: usize,
}

impl InfluxConfig {
    /// The settings as `histd check-config` prints them (the URL's query and header values
    /// hidden).
    pub fn effective(&self) -> Value {
        json!({
            "url": format!("{}://{}/…", self.url.scheme(), self.url.authority()),
            "headers": self.headers.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            "separator": self.separator,
            "tags": self.tags.iter().map(|(tag, value)| (tag.clone(), Value::from(value.as_str()))).collect::<serde_json::Map<_, _>>(),
            "timeoutMs": self.timeout.as_millis() as u64,
            "retryBufferBytes": self.retry_buffer_bytes,
            "maxRequestBytes": self.max_request_bytes,
        })
    }

    /// How the encoder names and packs points.
    pub fn layout(&self) -> Layout {
        Layout { separator: self.separator.clone(), tags: self.tags.clone(), max_request_bytes: self.max_request_bytes }
    }
}

/// Reads `influx.*`; `required` (the backend is on) makes `url` mandatory.
pub fn influx(top: &Reader<'_>, required: bool) -> Result<Option<InfluxConfig>, ConfigError> {
    let section = top.object("influx")?;
    let Some(url_text) = section.string("url")? else {
        return match required {
            true => Err(section.error(
                "url",
                "the influx backend needs the write endpoint: http://host:8086/write?db=NAME (InfluxDB 1.x) or \
                 http://host:8086/api/v2/write?org=ORG&bucket=BUCKET (2.x, 3.x)",
            )),
            false => Ok(None),
        };
    };
    if url_text.contains("precision=") {
        return Err(section.error("url", "histd writes unix seconds and adds precision=s itself: leave precision out"));
    }
    let with_precision = format!("{url_text}{}precision=s", if url_text.contains('?') { '&' } else { '?' });
    let url = HttpUrl::parse(&with_precision).map_err(|message| section.error("url", message))?;
    let tags = string_object(&section, "tags")?;
    if let Some((tag, _)) = tags.iter().find(|(tag, value)| tag.is_empty() || value.is_empty() || tag.contains('\n')) {
        return Err(section.error("tags", format!("'{tag}': a tag needs a name and a value")));
    }
    Ok(Some(InfluxConfig {
        url,
        url_text,
        headers: string_object(&section, "headers")?,
        separator: section.string("separator")?.unwrap_or_else(|| "_".to_string()),
        tags,
        timeout: section.milliseconds("timeoutMs", Duration::from_secs(10))?,
        retry_buffer_bytes: section.whole("retryBufferBytes", DEFAULT_RETRY_BUFFER_BYTES, 1024)?,
        max_request_bytes: section.whole("maxRequestBytes", DEFAULT_MAX_REQUEST_BYTES as u64, 4096)? as usize,
    }))
}

/// Its keys, for README's table (`config/keys.rs`).
pub const KEYS: &[KeyDoc] = &[
    histd(&["influx.url"], "required with the `influx` backend", "the line-protocol write endpoint: InfluxDB 1.x `http://host:8086/write?db=NAME` (with `&u=...&p=...` or a header for a user), 2.x and 3.x `http://host:8086/api/v2/write?org=ORG&bucket=BUCKET`, or another receiver (VictoriaMetrics `/write`); histd adds `precision=s`. `https://` goes over TLS, checked as for remote write"),
    histd(&["influx.headers"], "none", "added to every request: `{ Authorization: \"Token ...\" }` for InfluxDB 2.x and 3.x"),
    histd(&["influx.separator"], "`_`", "what `.` in a series name becomes in its measurement (Telegraf's `metric_separator`); `.` keeps names as they are"),
    histd(&["influx.tags"], "none", "tags added to every point (`{ host: \"web-1\" }`, as Telegraf's global tags); a series' own tag of the same name wins"),
    histd(&["influx.timeoutMs"], "10000", "one request's deadline"),
    histd(&["influx.retryBufferBytes"], "67108864 (64 MiB)", "requests held while the receiver fails (5xx, 429, no answer); past it the oldest are dropped (`influx.dropped_points.buffer_full`)"),
    histd(&["influx.maxRequestBytes"], "1048576 (1 MiB)", "a flush larger than this is sent in several requests, split at line ends"),
];

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn settings_are_read_or_refused_naming_the_key() {
        let read = |text: &str| {
            Config::from_text(text).map(|config| config.settings::<crate::sinks::influx::Influx>().clone())
        };
        let config = read(
            "{ backends: ['influx'], influx: { url: 'http://db:8086/write?db=histd&u=me&p=secret', tags: { host: 'web-1' } } }",
        )
        .unwrap()
        .unwrap();
        assert_eq!(config.url.path, "/write?db=histd&u=me&p=secret&precision=s");
        assert_eq!((config.separator.as_str(), config.tags.clone()), ("_", vec![("host".into(), "web-1".into())]));
        assert!(!config.effective().to_string().contains("secret"));
        let config =
            read("{ influx: { url: 'https://db/api/v2/write?org=o&bucket=b', separator: '.' } }").unwrap().unwrap();
        assert_eq!(
            (config.url.path.as_str(), config.separator.as_str()),
            ("/api/v2/write?org=o&bucket=b&precision=s", ".")
        );
        assert_eq!(
            read("{ influx: { url: 'http://db:8086/write' } }").unwrap().unwrap().url.path,
            "/write?precision=s"
        );
        assert_eq!(read("{}").unwrap(), None);
        for (text, key) in [
            ("{ backends: ['influx'] }", "influx.url"),
            ("{ influx: { url: 'ftp://x' } }", "influx.url"),
            ("{ influx: { url: 'http://x/write?db=a&precision=ms' } }", "influx.url"),
            ("{ influx: { url: 'http://x/write', tags: { host: '' } } }", "influx.tags"),
            ("{ influx: { url: 'http://x/write', maxRequestBytes: 10 } }", "influx.maxRequestBytes"),
        ] {
            let error = read(text).unwrap_err().to_string();
            assert!(error.contains(key), "{text}: {error}");
        }
    }
}
