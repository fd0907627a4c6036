//! How histd's own tools (`histd health`, `histd query`, `histd top`) ask a running histd's
//! HTTP API: one GET through the shared [`crate::http_client::Client`], so over `http://` or
//! `https://` alike (the server's certificate checked against the system's roots, or the PEM
//! bundle `SSL_CERT_FILE` names), with `HISTD_TOKEN` as a bearer token, the answer's head and
//! body capped and one deadline on the whole request (issue 48, P3: a server that sent headers
//! or a body without end took each tool to 24 GB; one that sent a byte a second held it past
//! two minutes). Whatever of an answer a tool echoes goes through [`crate::printable::escaped`] first.

use std::time::Duration;

use anyhow::Context;
use hyper::Method;

use crate::http_client::{Client, HttpUrl};
pub use crate::printable::escaped as printable;

/// How much of an answer a tool reads, and how long it waits for all of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The most the body may take; a longer answer is an error.
    pub body_bytes: usize,
    /// Connecting, sending and reading the whole answer.
    pub deadline: Duration,
}

/// `/health`: a few hundred bytes, answered at once.
pub const HEALTH: Bounds = Bounds { body_bytes: 1024 * 1024, deadline: Duration::from_secs(10) };

/// A query's points or a live view (at most `queryMaxSteps` points; 1,000 series with their
/// histograms).
pub const ANSWERS: Bounds = Bounds { body_bytes: 64 * 1024 * 1024, deadline: Duration::from_secs(30) };

/// A running histd's HTTP API: `http://host:port` or `https://host:port`, with a path prefix
/// when a proxy serves it under one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiUrl(HttpUrl);

impl ApiUrl {
    /// Reads `--url`: the reason when it is not an `http://` or `https://` URL.
    pub fn parse(url: &str) -> Result<ApiUrl, String> {
        let mut parsed = HttpUrl::parse(url)?;
        parsed.path = parsed.path.trim_end_matches('/').to_string();
        Ok(ApiUrl(parsed))
    }

    /// The API of a daemon whose HTTP port is `address`, over TLS when `tls`.
    pub fn of_address(address: std::net::SocketAddr, tls: bool) -> ApiUrl {
        let scheme = if tls { "https" } else { "http" };
        ApiUrl::parse(&format!("{scheme}://{address}")).unwrap_or_else(|_| unreachable!("an address is a URL's host"))
    }

    /// GETs `path` (with its query) within `bounds`: the status and the body as text.
    pub fn get(&self, path: &str, bounds: Bounds) -> anyhow::Result<(u16, String)> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let mut url = self.0.clone();
        url.path = format!("{}{path}", self.0.path);
        let client = Client::new(url, authorization(), bounds.deadline).with_max_body(bounds.body_bytes);
        let answer = runtime.block_on(async move {
            let mut client = client;
            client.send(Method::GET, bytes::Bytes::new()).await
        });
        let answer = answer.map_err(|why| anyhow::anyhow!("{}", printable(&why)))?;
        let body = String::from_utf8(answer.body.to_vec()).context("the answer is not UTF-8 text")?;
        Ok((answer.status, body))
    }
}

impl std::fmt::Display for ApiUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}{}", self.0.scheme(), self.0.authority(), self.0.path)
    }
}

/// `Authorization: Bearer` with `HISTD_TOKEN`, when it is set (a daemon whose read role has
/// tokens: `http.tokens.read`).
fn authorization() -> Vec<(String, String)> {
    match std::env::var("HISTD_TOKEN") {
        Ok(token) if !token.trim().is_empty() => {
            vec![("authorization".to_string(), format!("Bearer {}", token.trim()))]
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_keep_their_scheme_and_prefix() {
        let cases: &[(&str, Result<&str, ()>)] = &[
            ("http://127.0.0.1:8127", Ok("http://127.0.0.1:8127")),
            ("http://127.0.0.1:8127/", Ok("http://127.0.0.1:8127")),
            ("https://global.example:8443/", Ok("https://global.example:8443")),
            ("https://proxy/histd/", Ok("https://proxy:443/histd")),
            ("ftp://127.0.0.1:8127", Err(())),
            ("127.0.0.1:8127", Err(())),
        ];
        for (text, want) in cases {
            let got = ApiUrl::parse(text).map(|url| url.to_string()).map_err(|_| ());
            assert_eq!(got.as_deref().map_err(|_| ()), *want, "{text}");
        }
        let address = "[::1]:8127".parse().unwrap();
        assert_eq!(ApiUrl::of_address(address, true).to_string(), "https://[::1]:8127");
    }
}
