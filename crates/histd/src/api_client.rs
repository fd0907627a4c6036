//! How histd's own tools (`histd health`, `histd query`, `histd top`) ask a running histd's
//! HTTP API: one GET through the shared [`crate::http_client::Client`], so over `http://` or
//! `https://` alike (the server's certificate checked against the system's roots, or the PEM
//! bundle `SSL_CERT_FILE` names, and `--ca-file`; a client certificate with `--cert` and
//! `--key`; or all of it from the daemon's own `--config`: [`ApiArgs`]), with `HISTD_TOKEN`
//! as a bearer token, the answer's head and
//! body capped and one deadline on the whole request (issue 48, P3: a server that sent headers
//! or a body without end took each tool to 24 GB; one that sent a byte a second held it past
//! two minutes). Whatever of an answer a tool echoes goes through [`crate::printable::escaped`] first.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hyper::Method;
use tokio_rustls::rustls::ClientConfig;

use crate::http_client::{Client, HttpUrl};
pub use crate::printable::escaped as printable;

/// Where a tool finds a running histd and how it proves itself there: the arguments `histd
/// health`, `query` and `top` share.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ApiArgs {
    /// A running histd's HTTP API, http:// or https:// (default: from --config, else
    /// http://127.0.0.1:8127).
    #[arg(long)]
    pub url: Option<String>,
    /// The daemon's config file: its HTTP address, https when it has http.tls (whose
    /// certificate file is trusted too), and a token of http.tokens.read when HISTD_TOKEN is
    /// not set.
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// A PEM file of CA certificates to trust besides the system's (or SSL_CERT_FILE's).
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
    /// A client certificate (PEM) to present to a daemon that asks for one
    /// (http.tls.clientCAFile).
    #[arg(long, requires = "key")]
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, requires = "cert")]
    pub key: Option<PathBuf>,
}

/// The default API: a histd on this host, its default HTTP port.
const DEFAULT_URL: &str = "http://127.0.0.1:8127";

impl ApiArgs {
    /// The API these arguments name, with what to trust and present; the reason, naming the
    /// flag or the config key, when they name none.
    pub fn endpoint(&self) -> Result<Endpoint, String> {
        let mut trusted: Vec<PathBuf> = self.ca_file.iter().cloned().collect();
        let mut token = std::env::var("HISTD_TOKEN").ok().map(|token| token.trim().to_string());
        token = token.filter(|token| !token.is_empty());
        let url = match (&self.url, &self.config) {
            (Some(url), _) => ApiUrl::parse(url).map_err(|why| format!("--url {}: {why}", printable(url)))?,
            (None, Some(path)) => {
                let config = crate::config::Config::from_file(path).map_err(|error| format!("{error:#}"))?;
                if !config.http_port.serve {
                    return Err(format!(
                        "{} serves no HTTP API: add http_port (or the store backend) to it",
                        path.display()
                    ));
                }
                if let Some(tls) = &config.http.tls {
                    trusted.push(tls.cert.clone());
                }
                if token.is_none() {
                    let http = &config.http;
                    token = crate::access::a_read_token(http).map_err(|why| format!("http.tokens.read: {why}"))?;
                }
                ApiUrl::of_address(reachable(config.http_port.address), config.http.tls.is_some())
            }
            (None, None) => ApiUrl::parse(DEFAULT_URL).unwrap_or_else(|_| unreachable!("a URL")),
        };
        let identity = self.cert.clone().zip(self.key.clone());
        let tls = match (trusted.is_empty(), &identity) {
            (true, None) => None,
            _ => Some(client_tls(&trusted, identity.as_ref())?),
        };
        Ok(Endpoint { url, tls, token })
    }
}

/// The address a tool on this host reaches a daemon listening on `address` at: the loopback
/// address for one bound to every address.
fn reachable(address: std::net::SocketAddr) -> std::net::SocketAddr {
    match address.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => ([127, 0, 0, 1], address.port()).into(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => (std::net::Ipv6Addr::LOCALHOST, address.port()).into(),
        _ => address,
    }
}

/// TLS trusting the system's roots and the certificates of `trusted` (PEM files), presenting
/// `identity` when given.
fn client_tls(trusted: &[PathBuf], identity: Option<&(PathBuf, PathBuf)>) -> Result<Arc<ClientConfig>, String> {
    let mut roots = crate::http_client::system_roots().unwrap_or_else(|_| tokio_rustls::rustls::RootCertStore::empty());
    for file in trusted {
        for certificate in crate::tls::certificates(file)? {
            roots
                .add(certificate)
                .map_err(|error| format!("{}: not a certificate to trust: {error}", file.display()))?;
        }
    }
    crate::tls::client_config_trusting(roots, identity)
}

/// A running histd's API, and the TLS to reach it with (`None`: the system's roots, no client
/// certificate).
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The API's URL.
    pub url: ApiUrl,
    tls: Option<Arc<ClientConfig>>,
    /// Presented as `Authorization: Bearer`.
    token: Option<String>,
}

impl Endpoint {
    /// GETs `path` (with its query) within `bounds`: the status and the body as text.
    pub fn get(&self, path: &str, bounds: Bounds) -> anyhow::Result<(u16, String)> {
        let authorization = self.token.iter().map(|token| ("authorization".to_string(), format!("Bearer {token}")));
        self.url.get_with(path, bounds, self.tls.clone(), authorization.collect())
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.url.fmt(f)
    }
}

/// What a 401 or 403 from histd means for a tool, and what to set; `None` for other statuses.
pub fn refusal(status: u16, body: &str) -> Option<String> {
    let said = printable(body);
    match status {
        401 => Some(format!(
            "HTTP 401: histd asks for a token: set HISTD_TOKEN to one of its read role's (http.tokens.read): {said}"
        )),
        403 => Some(format!(
            "HTTP 403: histd refused the credential: HISTD_TOKEN (or the --cert certificate) is not one of its read role's: {said}"
        )),
        _ => None,
    }
}

/// What a tool adds when histd cannot be reached.
pub const UNREACHABLE_HINT: &str =
    "is it running? --url or --config; over https: --ca-file for a CA of your own, --cert and --key for a client certificate";

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

    /// GETs `path` (with its query) within `bounds` over `tls` (`None`: the system's roots)
    /// with `headers`: the status and the body as text.
    fn get_with(
        &self,
        path: &str,
        bounds: Bounds,
        tls: Option<Arc<ClientConfig>>,
        headers: Vec<(String, String)>,
    ) -> anyhow::Result<(u16, String)> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let mut url = self.0.clone();
        url.path = format!("{}{path}", self.0.path);
        let client = Client::new(url, headers, bounds.deadline).with_max_body(bounds.body_bytes).with_tls(tls);
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

/// Writes `text` on standard output. A reader that went away (`histd top --once | head`) ends
/// the output quietly, as Unix tools do, instead of failing with `Broken pipe`.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => written,
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
