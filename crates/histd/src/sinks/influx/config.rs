//! The `influx` section: the write endpoint (InfluxDB 1.x `/write`, 2.x and 3.x
//! `/api/v2/write`, or any receiver of line protocol) and how points are named.

use serde_json::{json, Value};

use super::encode::Layout;
use crate::config_reader::keys::{histd, KeyDoc};
use crate::config_reader::{string_object, ConfigError, Reader};
use crate::http_client::HttpUrl;
use crate::sinks::http_settings::HttpSettings;

/// One request's size: a flush larger than this is split (InfluxDB's own advice is batches of
/// about 5,000 lines; 1 MiB holds that many short ones).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// The influx backend's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct InfluxConfig {
    /// `influx.url` (required with the backend), with `precision=s` added, and what every HTTP
    /// destination is given (`headers`: `Authorization: Token ...`; `maxRequestBytes` 1 MiB).
    pub http: HttpSettings,
    /// `influx.separator` (`_`) and `influx.tags` (none).
    pub separator: String,
    /// Tags added to every point.
    pub tags: Vec<(String, String)>,
}

impl InfluxConfig {
    /// The settings as `histd check-config` prints them (the URL's query and header values
    /// hidden).
    pub fn effective(&self) -> Value {
        let url = &self.http.url;
        let mut shown = self.http.effective();
        shown.insert("url".into(), json!(format!("{}://{}/…", url.scheme(), url.authority())));
        shown.insert("separator".into(), json!(self.separator));
        let tags = self.tags.iter().map(|(tag, value)| (tag.clone(), Value::from(value.as_str())));
        shown.insert("tags".into(), Value::Object(tags.collect()));
        Value::Object(shown)
    }

    /// How the encoder names and packs points.
    pub fn layout(&self) -> Layout {
        let max_request_bytes = self.http.max_request_bytes.unwrap_or(DEFAULT_MAX_REQUEST_BYTES);
        Layout { separator: self.separator.clone(), tags: self.tags.clone(), max_request_bytes }
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
        http: HttpSettings::read(&section, url, Some(DEFAULT_MAX_REQUEST_BYTES))?,
        separator: section.string("separator")?.unwrap_or_else(|| "_".to_string()),
        tags,
    }))
}

/// Its keys, for README's table (`config/keys.rs`).
pub const KEYS: &[KeyDoc] = crate::with_http_keys!("influx", "added to every request: `{ Authorization: \"Token ...\" }` for InfluxDB 2.x and 3.x", [
    histd(&["influx.url"], "required with the `influx` backend", "the line-protocol write endpoint: InfluxDB 1.x `http://host:8086/write?db=NAME` (with `&u=...&p=...` or a header for a user), 2.x and 3.x `http://host:8086/api/v2/write?org=ORG&bucket=BUCKET`, or another receiver (VictoriaMetrics `/write`); histd adds `precision=s`. `https://` goes over TLS, checked as for remote write"),
    histd(&["influx.separator"], "`_`", "what `.` in a series name becomes in its measurement (Telegraf's `metric_separator`); `.` keeps names as they are"),
    histd(&["influx.tags"], "none", "tags added to every point (`{ host: \"web-1\" }`, as Telegraf's global tags); a series' own tag of the same name wins"),
    histd(&["influx.maxRequestBytes"], "1048576 (1 MiB)", "a flush larger than this is sent in several requests, split at line ends"),
]);

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
        assert_eq!(config.http.url.path, "/write?db=histd&u=me&p=secret&precision=s");
        assert_eq!((config.separator.as_str(), config.tags.clone()), ("_", vec![("host".into(), "web-1".into())]));
        assert!(!config.effective().to_string().contains("secret"));
        let config =
            read("{ influx: { url: 'https://db/api/v2/write?org=o&bucket=b', separator: '.' } }").unwrap().unwrap();
        assert_eq!(
            (config.http.url.path.as_str(), config.separator.as_str()),
            ("/api/v2/write?org=o&bucket=b&precision=s", ".")
        );
        assert_eq!(
            read("{ influx: { url: 'http://db:8086/write' } }").unwrap().unwrap().http.url.path,
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
