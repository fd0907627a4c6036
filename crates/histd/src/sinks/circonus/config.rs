//! The `circonus` section: where flushes go (a Circonus HTTPTrap check or an IRONdb node) and,
//! for IRONdb, which check the metrics belong to.

use serde_json::{json, Value};

use crate::config_reader::keys::{histd, KeyDoc};
use crate::config_reader::{ConfigError, Reader};
use crate::http_client::HttpUrl;
use crate::sinks::http_settings::HttpSettings;

/// One request's size: a flush larger than this is split.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// The payload a receiver takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CirconusFormat {
    /// A Circonus broker's HTTPTrap JSON: `{"name": {"_type": "h", "_value": "<base64>"}}`.
    HttpTrap,
    /// IRONdb's `/raw` TSV: `M` records for numbers, `H1` records for histograms, all of the
    /// check `check`.
    Irondb {
        /// `` TARGET`MODULE`c_ACCOUNT_BUNDLE::MODULE`uuid ``, built from the section's keys.
        check: String,
    },
}

/// The circonus backend's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct CirconusConfig {
    /// `circonus.url` (required with the backend): the HTTPTrap check's submission URL, or an
    /// IRONdb node's `http://host:8112/raw`; and what every HTTP destination is given
    /// (`maxRequestBytes` 4 MiB).
    pub http: HttpSettings,
    /// `circonus.format` (`httptrap`) and what `irondb` needs.
    pub format: CirconusFormat,
}

impl CirconusConfig {
    /// The settings as `histd check-config` prints them (the URL's path, an HTTPTrap secret,
    /// and header values hidden).
    pub fn effective(&self) -> Value {
        let url = &self.http.url;
        let mut shown = self.http.effective();
        shown.insert("url".into(), json!(format!("{}://{}/…", url.scheme(), url.authority())));
        let format = match &self.format {
            CirconusFormat::HttpTrap => "httptrap".to_string(),
            CirconusFormat::Irondb { check } => format!("irondb ({check})"),
        };
        shown.insert("format".into(), json!(format));
        Value::Object(shown)
    }

    /// The largest request.
    pub fn max_request_bytes(&self) -> usize {
        self.http.max_request_bytes.unwrap_or(DEFAULT_MAX_REQUEST_BYTES)
    }
}

/// Reads `circonus.*`; `required` (the backend is on) makes `url` mandatory.
pub fn circonus(top: &Reader<'_>, required: bool) -> Result<Option<CirconusConfig>, ConfigError> {
    let section = top.object("circonus")?;
    let Some(url_text) = section.string("url")? else {
        return match required {
            true => Err(section.error(
                "url",
                "the circonus backend needs the HTTPTrap submission URL or IRONdb's http://host:8112/raw",
            )),
            false => Ok(None),
        };
    };
    let url = HttpUrl::parse(&url_text).map_err(|message| section.error("url", message))?;
    let format = match section.string("format")?.as_deref() {
        None | Some("httptrap") => CirconusFormat::HttpTrap,
        Some("irondb") => CirconusFormat::Irondb { check: irondb_check(&section)? },
        Some(other) => return Err(section.error("format", format!("expected httptrap or irondb, got '{other}'"))),
    };
    Ok(Some(CirconusConfig { http: HttpSettings::read(&section, url, Some(DEFAULT_MAX_REQUEST_BYTES))?, format }))
}

/// The `UUID` field of IRONdb's records: `` TARGET`MODULE`c_ACCOUNT_BUNDLE::MODULE`uuid ``.
fn irondb_check(section: &Reader<'_>) -> Result<String, ConfigError> {
    let uuid = section
        .string("checkUuid")?
        .ok_or_else(|| section.error("checkUuid", "IRONdb needs the check's UUID its metrics belong to"))?
        .to_ascii_lowercase();
    let is_uuid = uuid.len() == 36
        && uuid
            .char_indices()
            .all(|(i, c)| if [8, 13, 18, 23].contains(&i) { c == '-' } else { c.is_ascii_hexdigit() });
    if !is_uuid {
        return Err(section.error("checkUuid", format!("'{uuid}' is not a UUID (8-4-4-4-12 hex digits)")));
    }
    let id = |key: &str| -> Result<u64, ConfigError> { section.whole(key, 1, 1) };
    let (account, bundle) = (id("accountId")?, id("checkBundleId")?);
    let target = section.string("target")?.unwrap_or_else(crate::sinks::host_name);
    let module = section.string("module")?.unwrap_or_else(|| "histd".to_string());
    for (key, value) in [("target", &target), ("module", &module)] {
        if value.is_empty() || value.contains(['`', '\t', '\n']) {
            return Err(section.error(key, format!("'{value}' must be non-empty, without backticks, tabs or newlines")));
        }
    }
    Ok(format!("{target}`{module}`c_{account}_{bundle}::{module}`{uuid}"))
}

/// Its keys, for README's table (`config/keys.rs`).
pub const KEYS: &[KeyDoc] = crate::with_http_keys!("circonus", "added to every request (an IRONdb proxy's credentials)", [
    histd(&["circonus.url"], "required with the `circonus` backend", "a Circonus HTTPTrap check's submission URL (`http://broker:43191/module/httptrap/<uuid>/<secret>`), or an IRONdb node's `http://host:8112/raw`; `https://` goes over TLS, checked as for remote write (a Circonus broker's certificate chains to Circonus' own CA: give it in `SSL_CERT_FILE` with the system's roots)"),
    histd(&["circonus.format"], "`httptrap`", "`httptrap`: one JSON object per flush, `{\"name\": {\"_type\": \"h\", \"_value\": \"<base64 circllhist>\"}}`, counters and gauges as `n`, sets as `L`; `irondb`: `/raw` TSV, `M` records for numbers and `H1` records for histograms"),
    histd(&["circonus.checkUuid"], "required with `format: \"irondb\"`", "the check the metrics belong to (IRONdb's record `UUID` is `` target`module`c_<accountId>_<checkBundleId>::module`<checkUuid> ``)"),
    histd(&["circonus.accountId", "circonus.checkBundleId"], "1", "the account (how IRONdb partitions data) and check bundle in that identifier"),
    histd(&["circonus.target", "circonus.module"], "the host name, `histd`", "the check's target and module in that identifier"),
    histd(&["circonus.maxRequestBytes"], "4194304 (4 MiB)", "a flush larger than this is sent in several requests"),
]);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn settings_are_read_or_refused_naming_the_key() {
        let read = |text: &str| {
            Config::from_text(text).map(|config| config.settings::<crate::sinks::circonus::Circonus>().clone())
        };
        let config =
            read("{ backends: ['circonus'], circonus: { url: 'http://broker:43191/module/httptrap/abc/secret' } }")
                .unwrap()
                .unwrap();
        assert_eq!(config.format, CirconusFormat::HttpTrap);
        assert!(!config.effective().to_string().contains("secret"));
        let config = read(
            "{ circonus: { url: 'http://irondb:8112/raw', format: 'irondb', checkUuid: '1B988FD7-D1E1-48EC-848E-55709511D43F',
               accountId: 123, checkBundleId: 987654, target: 'web1', module: 'statsd' } }",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            config.format,
            CirconusFormat::Irondb {
                check: "web1`statsd`c_123_987654::statsd`1b988fd7-d1e1-48ec-848e-55709511d43f".into()
            }
        );
        assert_eq!(read("{}").unwrap(), None);
        for (text, key) in [
            ("{ backends: ['circonus'] }", "circonus.url"),
            ("{ circonus: { url: 'ftp://x' } }", "circonus.url"),
            ("{ circonus: { url: 'http://x', format: 'json' } }", "circonus.format"),
            ("{ circonus: { url: 'http://x', format: 'irondb' } }", "circonus.checkUuid"),
            ("{ circonus: { url: 'http://x', format: 'irondb', checkUuid: 'abc' } }", "circonus.checkUuid"),
            ("{ circonus: { url: 'http://x', format: 'irondb', checkUuid: '1b988fd7-d1e1-48ec-848e-55709511d43f', accountId: 0 } }", "circonus.accountId"),
            ("{ circonus: { url: 'http://x', format: 'irondb', checkUuid: '1b988fd7-d1e1-48ec-848e-55709511d43f', target: 'a`b' } }", "circonus.target"),
        ] {
            let error = read(text).unwrap_err().to_string();
            assert!(error.contains(key), "{text}: {error}");
        }
    }
}
