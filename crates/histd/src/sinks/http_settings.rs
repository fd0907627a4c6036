//! What every HTTP destination is given, read by one rule (otlp, influx, circonus, each
//! prometheus remote-write target): its URL, the headers added to every request, one
//! request's deadline, the requests held while it fails, the largest request, and the TLS
//! that reaches an `https://` URL (CAs of one's own, a client certificate). Each backend reads
//! its URL its own way (a default, a path added) and hands it to [`HttpSettings::read`]; its
//! keys are documented by one maker ([`with_http_keys!`](crate::with_http_keys)).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio_rustls::rustls::ClientConfig;

use super::delivery::http::{Destination, Judge};
use crate::config_reader::{string_object, ConfigError, Reader};
use crate::http_client::HttpUrl;
use hyper::Method;

/// Requests held while the receiver fails, by default.
pub const DEFAULT_RETRY_BUFFER_BYTES: u64 = 64 * 1024 * 1024;
/// One request's deadline, by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// One HTTP destination's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpSettings {
    /// Where requests go.
    pub url: HttpUrl,
    /// `headers` (none): added to every request (`Authorization`, API keys); their values are
    /// credentials, never printed.
    pub headers: Vec<(String, String)>,
    /// `timeoutMs` (10000): one request's deadline.
    pub timeout: Duration,
    /// `retryBufferBytes` (64 MiB): requests held while the receiver fails; past it the oldest
    /// are dropped (`dropped_points.buffer_full`).
    pub retry_buffer_bytes: u64,
    /// `maxRequestBytes`, for the destinations that split a flush (`None` for the others).
    pub max_request_bytes: Option<usize>,
    /// `tls` (`caFile`, `certFile`, `keyFile`): the CAs to trust in place of the system's
    /// roots, and a client certificate to present.
    pub tls: crate::tls::ClientFiles,
}

impl HttpSettings {
    /// The settings in `section` for `url`; `max_request_bytes` is the default of a destination
    /// that splits a flush (`None`: it reads no `maxRequestBytes`). A bad value names its key.
    pub fn read(section: &Reader<'_>, url: HttpUrl, max_request_bytes: Option<usize>) -> Result<Self, ConfigError> {
        let max_request_bytes = match max_request_bytes {
            None => None,
            Some(default) => Some(section.whole("maxRequestBytes", default as u64, 4096)? as usize),
        };
        Ok(HttpSettings {
            url,
            headers: string_object(section, "headers")?,
            timeout: section.milliseconds("timeoutMs", DEFAULT_TIMEOUT)?,
            retry_buffer_bytes: section.whole("retryBufferBytes", DEFAULT_RETRY_BUFFER_BYTES, 1024)?,
            max_request_bytes,
            tls: client_files(section)?,
        })
    }

    /// What `histd check-config` prints of them (header names, not their values).
    pub fn effective(&self) -> serde_json::Map<String, Value> {
        let mut shown = serde_json::Map::new();
        shown.insert("headers".into(), json!(self.headers.iter().map(|(name, _)| name).collect::<Vec<_>>()));
        shown.insert("timeoutMs".into(), json!(self.timeout.as_millis() as u64));
        shown.insert("retryBufferBytes".into(), json!(self.retry_buffer_bytes));
        if let Some(bytes) = self.max_request_bytes {
            shown.insert("maxRequestBytes".into(), json!(bytes));
        }
        if self.tls != crate::tls::ClientFiles::default() {
            let identity = self.tls.identity.as_ref();
            shown.insert(
                "tls".into(),
                json!({ "caFile": self.tls.ca, "certFile": identity.map(|(cert, _)| cert), "keyFile": identity.map(|(_, key)| key) }),
            );
        }
        shown
    }

    /// The files it reads at start (its TLS files), for a reload to compare.
    pub fn files(&self) -> crate::sinks::FileContents {
        crate::sinks::FileContents::of(self.tls.paths())
    }

    /// Where the sink named `name` sends: `headers` of its protocol first, then the configured
    /// ones; answers read by `judge`. The TLS files that do not read are named with `section`.
    pub fn destination(
        &self,
        name: &str,
        method: Method,
        mut headers: Vec<(String, String)>,
        judge: Judge,
        section: &str,
    ) -> anyhow::Result<Destination> {
        headers.extend(self.headers.iter().cloned());
        Ok(Destination {
            name: name.to_string(),
            url: self.url.clone(),
            method,
            headers,
            timeout: self.timeout,
            retry_buffer_bytes: self.retry_buffer_bytes,
            tls: self.client_tls().map_err(|why| anyhow::anyhow!("{section}.tls: {why}"))?,
            judge,
        })
    }

    /// What `histd check-config` says of the files `tls` names, read as the sink reads them
    /// at start (each problem named under `section`).
    pub fn check_files(&self, section: &str) -> Vec<String> {
        self.client_tls().err().map(|why| format!("{section}.tls: {why}")).into_iter().collect()
    }

    /// The TLS to reach the URL with, when `tls` names files (else the system's roots).
    fn client_tls(&self) -> Result<Option<Arc<ClientConfig>>, String> {
        if self.tls == crate::tls::ClientFiles::default() {
            return Ok(None);
        }
        crate::tls::client_config(&self.tls, crate::http_client::system_roots).map(Some)
    }
}

/// `tls: { caFile, certFile, keyFile }` of a section (a certificate needs its key).
pub fn client_files(section: &Reader<'_>) -> Result<crate::tls::ClientFiles, ConfigError> {
    let tls = section.object("tls")?;
    let file = |key: &str| tls.string(key).map(|path| path.map(std::path::PathBuf::from));
    let identity = match (file("certFile")?, file("keyFile")?) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        (Some(_), None) => return Err(tls.error("keyFile", "a client certificate (certFile) needs its keyFile")),
        (None, Some(_)) => return Err(tls.error("certFile", "a keyFile needs its certificate (certFile)")),
    };
    Ok(crate::tls::ClientFiles { ca: file("caFile")?, identity })
}

/// A backend's key table (`&[KeyDoc]`) with the keys every HTTP destination has appended
/// under `$section` (`headers`, `timeoutMs`, `retryBufferBytes`, `maxRequestBytes` and `tls`):
/// one wording for all of them. `$headers` says what the headers are for.
#[macro_export]
macro_rules! with_http_keys {
    ($section:literal, $headers:literal, [$($key:expr),* $(,)?]) => {
        &[
            $($key,)*
            $crate::config_reader::keys::histd(&[concat!($section, ".headers")], "none", $headers),
            $crate::config_reader::keys::histd(&[concat!($section, ".timeoutMs")], "10000", "one request's deadline"),
            $crate::config_reader::keys::histd(
                &[concat!($section, ".retryBufferBytes")],
                "67108864 (64 MiB)",
                concat!("requests held while the receiver fails or asks to wait (5xx, 429, no answer); past it the oldest are dropped (`", $section, ".dropped_points.buffer_full`)"),
            ),
            $crate::config_reader::keys::histd(
                &[concat!($section, ".tls.caFile"), concat!($section, ".tls.certFile"), concat!($section, ".tls.keyFile")],
                "none (the system's roots)",
                "for an `https://` URL: a PEM file of the CA certificates to trust in place of the system's roots, and a client certificate with its key to present (mutual TLS); read when the sink starts (a reload that changes them, or the bytes in them, restarts it)",
            ),
        ]
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, max: Option<usize>) -> Result<HttpSettings, ConfigError> {
        let top = crate::config_reader::object_literal(text).unwrap();
        let reader = Reader::root(&top, &crate::config_reader::KeysRead::default());
        let section = reader.object("to")?;
        HttpSettings::read(&section, HttpUrl::parse("https://receiver:443/write").unwrap(), max)
    }

    /// One rule for every HTTP destination: defaults, given values, and each bad value named
    /// by its key.
    #[test]
    fn every_http_destination_reads_its_settings_by_one_rule() {
        let defaults = read("{}", Some(4096)).unwrap();
        assert_eq!(
            (defaults.timeout, defaults.retry_buffer_bytes, defaults.max_request_bytes, defaults.headers.len()),
            (DEFAULT_TIMEOUT, DEFAULT_RETRY_BUFFER_BYTES, Some(4096), 0)
        );
        assert_eq!(read("{}", None).unwrap().max_request_bytes, None);
        let given = read(
            "{ to: { headers: { Authorization: 'Bearer x' }, timeoutMs: 500, retryBufferBytes: 2048, \
               maxRequestBytes: 8192, tls: { caFile: '/ca.pem' } } }",
            Some(4096),
        )
        .unwrap();
        assert_eq!(given.headers, [("Authorization".to_string(), "Bearer x".to_string())]);
        assert_eq!(
            (given.timeout, given.retry_buffer_bytes, given.max_request_bytes),
            (Duration::from_millis(500), 2048, Some(8192))
        );
        assert_eq!(given.tls.ca.as_deref(), Some(std::path::Path::new("/ca.pem")));
        let shown = Value::Object(given.effective()).to_string();
        assert!(shown.contains("Authorization") && !shown.contains("Bearer x"), "{shown}");
        let rotated = HttpSettings { headers: vec![("Authorization".into(), "Bearer y".into())], ..given.clone() };
        assert!(given != rotated, "a reload compares the values");
        let problems = given.check_files("to");
        assert!(
            problems.len() == 1 && problems[0].starts_with("to.tls: ") && problems[0].contains("/ca.pem"),
            "{problems:?}"
        );
        assert!(defaults.check_files("to").is_empty(), "no files, nothing to check");
        for (text, key) in [
            ("{ to: { timeoutMs: 'soon' } }", "to.timeoutMs"),
            ("{ to: { retryBufferBytes: 10 } }", "to.retryBufferBytes"),
            ("{ to: { maxRequestBytes: 10 } }", "to.maxRequestBytes"),
            ("{ to: { headers: { a: 1 } } }", "to.headers"),
            ("{ to: { tls: { certFile: '/c.pem' } } }", "to.tls.keyFile"),
        ] {
            let error = read(text, Some(4096)).unwrap_err();
            assert_eq!(error.key, key, "{text}: {error}");
        }
    }
}
