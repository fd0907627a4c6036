//! What the HTTP sinks share: a target URL ([`HttpUrl`]) and a [`Client`], one HTTP/1.1
//! connection kept open between requests and made anew when it closes or fails.
//!
//! An answer is bounded: its head (status line and headers) to [`MAX_HEAD_BYTES`], its body to
//! the client's cap ([`DEFAULT_MAX_BODY_BYTES`] unless set), and the whole request, connecting
//! included, to the client's timeout: a receiver that sends headers or a body without end, or
//! a byte a second, costs a bounded buffer and a bounded wait, never the host's memory (issue
//! 48, P3).
//!
//! `https://` URLs are reached over TLS (rustls): the server's certificate must chain to a
//! root the system trusts (Debian's `/etc/ssl/certs`; `SSL_CERT_FILE` or `SSL_CERT_DIR` name
//! other ones, as for OpenSSL) and name the URL's host.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

/// The most an answer's head (status line and headers) may take.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// The most an answer's body may take unless a client says otherwise
/// ([`Client::with_max_body`]): receivers answer a send with a status and a short message.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// 2xx.
    Delivered,
    /// 5xx or 429, or no answer (connection refused, reset, timed out): try again later.
    Retry(String),
    /// Another status: the receiver refuses this request for good.
    Rejected(String),
}

impl Outcome {
    /// How the plain rules read an answer: 2xx delivered, 5xx and 429 retried, any other
    /// status refused.
    pub fn of(answer: &Answer) -> Outcome {
        match answer.status {
            200..=299 => Outcome::Delivered,
            429 | 500..=599 => Outcome::Retry(answer.summary()),
            _ => Outcome::Rejected(answer.summary()),
        }
    }
}

/// What a receiver answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The body (a protocol's partial-success message, an error text).
    pub body: Bytes,
    /// `Retry-After` in seconds, when the answer had one.
    pub retry_after: Option<Duration>,
}

impl Answer {
    /// The status and the start of the body, for a log line.
    pub fn summary(&self) -> String {
        let text = String::from_utf8_lossy(&self.body).chars().take(300).collect::<String>();
        format!("HTTP {}: {}", self.status, text.trim())
    }
}

/// An HTTP target: `http://host:port/path` or `https://host:port/path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    /// The host name or address.
    pub host: String,
    /// The port (80 when the URL has none, 443 for https).
    pub port: u16,
    /// The path and query (`/api/v1/write`).
    pub path: String,
    /// Reached over TLS (`https://`).
    pub tls: bool,
}

impl HttpUrl {
    /// Reads `http://host[:port][/path]` or `https://host[:port][/path]`.
    pub fn parse(url: &str) -> Result<HttpUrl, String> {
        let (rest, tls) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (rest, false),
            (None, Some(rest)) => (rest, true),
            (None, None) => return Err("expected a URL starting with http:// or https://".into()),
        };
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash..]),
            None => (rest, "/"),
        };
        // `[v6]` or `[v6]:port`, else `host` or `host:port`.
        let (host, port) = match authority.strip_prefix('[') {
            Some(bracketed) => {
                let (host, after) = bracketed.split_once(']').ok_or("an IPv6 address lacks its closing ']'")?;
                match after {
                    "" => (host, None),
                    _ => (host, Some(after.strip_prefix(':').ok_or(format!("'{after}' after ']' is not ':port'"))?)),
                }
            }
            None => match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            },
        };
        let port = match port {
            Some(port) => port.parse::<u16>().map_err(|_| format!("'{port}' is not a port"))?,
            None if tls => 443,
            None => 80,
        };
        if host.is_empty() {
            return Err("the URL has no host".into());
        }
        Ok(HttpUrl { host: host.to_string(), port, path: path.to_string(), tls })
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.tls {
            "https"
        } else {
            "http"
        }
    }

    /// `host:port`, as the `Host` header has it.
    pub fn authority(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        }
    }
}

/// A client for one URL.
pub struct Client {
    url: HttpUrl,
    headers: Vec<(String, String)>,
    timeout: Duration,
    connection: Option<SendRequest<Full<Bytes>>>,
    /// TLS settings of its own (a CA, a client certificate); else every client's.
    tls: Option<Arc<ClientConfig>>,
    /// A token file whose token goes with every request.
    token: Option<Arc<crate::secret_file::TokenFile>>,
    /// The most an answer's body may take.
    max_body: usize,
}

impl Client {
    /// A client that sends `headers` with every request (the content's type and encoding
    /// among them) and waits `timeout` for each, answer included.
    pub fn new(url: HttpUrl, headers: Vec<(String, String)>, timeout: Duration) -> Client {
        Client { url, headers, timeout, connection: None, tls: None, max_body: DEFAULT_MAX_BODY_BYTES, token: None }
    }

    /// Sends the token `file` holds at each request as `Authorization: Bearer` (read again
    /// whenever the file changes).
    pub fn with_token_file(mut self, file: Option<Arc<crate::secret_file::TokenFile>>) -> Client {
        self.token = file;
        self
    }

    /// This client with answers' bodies capped at `bytes` (a longer one is a failed request).
    pub fn with_max_body(mut self, bytes: usize) -> Client {
        self.max_body = bytes;
        self
    }

    /// This client with TLS settings of its own (`https://` URLs): a CA of its own, a client
    /// certificate (see [`crate::tls::client_config`]).
    pub fn with_tls(mut self, tls: Option<Arc<ClientConfig>>) -> Client {
        self.tls = tls;
        self
    }

    /// GETs `path` on the URL's host (a health check).
    pub async fn get(&mut self, path: &str) -> Outcome {
        self.request(Method::GET, path, Bytes::new()).await
    }

    /// Sends `body` to the URL's path with `method` (with the client's headers); the answer,
    /// or why there was none (refused, reset, timed out).
    pub async fn send(&mut self, method: Method, body: Bytes) -> Result<Answer, String> {
        let path = self.url.path.clone();
        self.answer(method, &path, body).await
    }

    async fn request(&mut self, method: Method, path: &str, body: Bytes) -> Outcome {
        match self.answer(method, path, body).await {
            Ok(answer) => Outcome::of(&answer),
            Err(reason) => Outcome::Retry(reason),
        }
    }

    /// One request within the timeout; a connection that failed or timed out is dropped (the
    /// next request connects again).
    async fn answer(&mut self, method: Method, path: &str, body: Bytes) -> Result<Answer, String> {
        let answered = tokio::time::timeout(self.timeout, self.try_request(method, path, body)).await;
        let failure = match answered {
            Ok(Ok(answer)) => return Ok(answer),
            Ok(Err(error)) => error,
            Err(_) => format!("no answer within {} ms", self.timeout.as_millis()),
        };
        self.connection = None;
        Err(failure)
    }

    async fn try_request(&mut self, method: Method, path: &str, body: Bytes) -> Result<Answer, String> {
        let mut builder = Request::builder()
            .method(method.clone())
            .uri(path)
            .header("host", self.url.authority())
            .header("user-agent", concat!("histd/", env!("CARGO_PKG_VERSION")));
        // A GET has no content to describe, but carries the rest (its credentials).
        for (name, value) in &self.headers {
            if method != Method::GET || !name.starts_with("content-") {
                builder = builder.header(name, value);
            }
        }
        if let Some(token) = &self.token {
            builder = builder.header("authorization", token.bearer());
        }
        let request = builder.body(Full::new(body)).map_err(|e| format!("bad request header: {e}"))?;
        let limit = self.max_body;
        let host = self.url.host.clone();
        let sender = self.connected().await?;
        let response = sender.send_request(request).await.map_err(|e| match tls_error_in(&e) {
            // TLS 1.3: a server refuses a client certificate after the client's handshake ends.
            Some(failure) => format!("request failed: {}", tls_failure(failure, &host)),
            None => format!("request failed: {e}"),
        })?;
        read_answer(response, limit).await
    }

    async fn connected(&mut self) -> Result<&mut SendRequest<Full<Bytes>>, String> {
        if let Some(sender) = &mut self.connection {
            if sender.ready().await.is_err() {
                self.connection = None;
            }
        }
        if self.connection.is_none() {
            let stream = connect(&self.url.host, self.url.port).await?;
            let _ = stream.set_nodelay(true);
            let sender = match self.url.tls {
                false => http1(stream).await?,
                true => http1(self.tls_handshake(stream).await?).await?,
            };
            self.connection = Some(sender);
        }
        Ok(self.connection.as_mut().unwrap_or_else(|| unreachable!("set above")))
    }

    /// TLS over `stream`, checking the server's certificate against the trusted roots and the
    /// URL's host.
    async fn tls_handshake(&self, stream: TcpStream) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
        let host = &self.url.host;
        let name = ServerName::try_from(host.clone()).map_err(|_| format!("'{host}' is not a name TLS can check"))?;
        let config = match &self.tls {
            Some(config) => config.clone(),
            None => tls_config()?,
        };
        TlsConnector::from(config).connect(name, stream).await.map_err(|e| {
            let why = e.get_ref().and_then(|inner| inner.downcast_ref()).map(|failure| tls_failure(failure, host));
            format!("TLS with {} failed: {}", self.url.authority(), why.unwrap_or_else(|| e.to_string()))
        })
    }
}

/// The TLS error behind `error`, if one is in its chain of sources.
fn tls_error_in<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a tokio_rustls::rustls::Error> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(found) = error.downcast_ref::<tokio_rustls::rustls::Error>() {
            return Some(found);
        }
        next = error.source();
    }
    None
}

/// What went wrong in a TLS handshake, in words that say what to mend.
fn tls_failure(failure: &tokio_rustls::rustls::Error, host: &str) -> String {
    use tokio_rustls::rustls::{AlertDescription, CertificateError, Error};
    match failure {
        Error::InvalidCertificate(why) => match why {
            CertificateError::UnknownIssuer => {
                "the server's certificate is signed by no CA this client trusts (UnknownIssuer: give its CA)"
                    .to_string()
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                "the server's certificate has expired (Expired)".to_string()
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "the server's certificate is not valid yet, or this machine's clock is behind (NotValidYet)".to_string()
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                format!(
                    "the server's certificate is not for '{host}': none of its names or addresses is (NotValidForName)"
                )
            }
            other => format!("the server's certificate is refused: {other:?}"),
        },
        Error::AlertReceived(AlertDescription::CertificateRequired) => {
            "the server asks for a client certificate".to_string()
        }
        Error::AlertReceived(
            AlertDescription::BadCertificate | AlertDescription::UnknownCA | AlertDescription::CertificateUnknown,
        ) => "the server refused the client certificate (not signed by a CA it trusts)".to_string(),
        Error::AlertReceived(AlertDescription::CertificateExpired) => {
            "the server refused the client certificate: it has expired".to_string()
        }
        other => other.to_string(),
    }
}

/// The status, `Retry-After` and body (at most `max_body` bytes) of `response`.
async fn read_answer(response: hyper::Response<hyper::body::Incoming>, max_body: usize) -> Result<Answer, String> {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = http_body_util::Limited::new(response.into_body(), max_body).collect().await.map_err(|e| {
        match e.downcast_ref::<http_body_util::LengthLimitError>() {
            Some(_) => format!("the answer's body is longer than {max_body} bytes"),
            None => format!("reading the answer: {e}"),
        }
    })?;
    Ok(Answer { status, body: body.to_bytes(), retry_after })
}

/// One `GET path` over `io` (a connection already open), its answer read within the bounds
/// every [`Client`] keeps (a head of [`MAX_HEAD_BYTES`], a body of `max_body`): what a client
/// makes of a server's bytes, without a network (the fuzz target `cli_answer`).
pub async fn get_over<T>(io: T, path: &str, max_body: usize) -> Result<Answer, String>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut sender = http1(io).await?;
    let request = Request::get(path)
        .header("host", "histd")
        .body(Full::new(Bytes::new()))
        .map_err(|e| format!("bad request header: {e}"))?;
    let response = sender.send_request(request).await.map_err(|e| format!("request failed: {e}"))?;
    read_answer(response, max_body).await
}

/// How long one of a host's addresses may take to accept a connection before the next is
/// tried (a host that drops packets would otherwise hold the request for the kernel's SYN
/// retries, minutes).
const CONNECT_WAIT: Duration = Duration::from_secs(5);

/// A connection to `host`'s first address that accepts one within [`CONNECT_WAIT`].
async fn connect(host: &str, port: u16) -> Result<TcpStream, String> {
    let addresses = tokio::net::lookup_host((host, port)).await.map_err(|e| format!("cannot resolve {host}: {e}"))?;
    let mut failure = format!("{host} has no address");
    for address in addresses {
        match tokio::time::timeout(CONNECT_WAIT, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(error)) => failure = format!("cannot connect to {address}: {error}"),
            Err(_) => failure = format!("cannot connect to {address}: no answer within {} s", CONNECT_WAIT.as_secs()),
        }
    }
    Err(failure)
}

/// An HTTP/1.1 connection over `io`, driven by a task of its own; its sender.
async fn http1<T>(io: T) -> Result<SendRequest<Full<Bytes>>, String>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD_BYTES)
        .handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("HTTP handshake failed: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// What every https client trusts, read once: the system's roots (or those `SSL_CERT_FILE` /
/// `SSL_CERT_DIR` name); TLS 1.2 and 1.3, HTTP/1.1 offered by ALPN.
fn tls_config() -> Result<Arc<ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    CONFIG.get_or_init(read_tls_config).clone()
}

fn read_tls_config() -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS settings: {e}"))?
        .with_root_certificates(system_roots()?)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The system's trusted roots (or those `SSL_CERT_FILE` / `SSL_CERT_DIR` name).
pub fn system_roots() -> Result<RootCertStore, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _unparsable) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
        return Err(format!(
            "no trusted root certificate found for https ({}): install Debian's ca-certificates, or set SSL_CERT_FILE to a PEM bundle",
            if errors.is_empty() { "the system store is empty".to_string() } else { errors.join("; ") }
        ));
    }
    Ok(roots)
}

/// `text` percent-encoded for a query string.
pub(crate) fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::HttpUrl;

    #[test]
    fn urls_are_read_or_refused_with_the_reason() {
        let url = |host: &str, port, path: &str| Ok(HttpUrl { host: host.into(), port, path: path.into(), tls: false });
        let tls = |host: &str, port, path: &str| Ok(HttpUrl { host: host.into(), port, path: path.into(), tls: true });
        let cases: &[(&str, Result<HttpUrl, String>)] = &[
            ("http://127.0.0.1:8428/api/v1/write", url("127.0.0.1", 8428, "/api/v1/write")),
            ("http://vm/api/v1/write?extra_label=a", url("vm", 80, "/api/v1/write?extra_label=a")),
            ("http://[::1]:9090/api/v1/write", url("::1", 9090, "/api/v1/write")),
            ("http://[::1]/api/v1/write", url("::1", 80, "/api/v1/write")),
            ("http://localhost:9090", url("localhost", 9090, "/")),
            ("https://vm/api/v1/write", tls("vm", 443, "/api/v1/write")),
            (
                "https://trap.noit.circonus.net:8443/module/httptrap/x/y",
                tls("trap.noit.circonus.net", 8443, "/module/httptrap/x/y"),
            ),
            ("https://[::1]/", tls("::1", 443, "/")),
        ];
        for (text, want) in cases {
            assert_eq!(&HttpUrl::parse(text), want, "{text}");
        }
        for bad in [
            "ftp://vm/api/v1/write",
            "vm:8428/api/v1/write",
            "http://:80/",
            "http://vm:port/",
            "http://[::1/",
            "http://[::1]x/",
        ] {
            assert!(HttpUrl::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(HttpUrl::parse("http://[::1]:9090/").unwrap().authority(), "[::1]:9090");
    }
}
