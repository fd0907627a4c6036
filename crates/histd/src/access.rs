//! Who may ask what of the HTTP port (`http.*`): the policy the HTTP guard applies to every
//! request before its handler (`http/guard.rs` is the middleware), and the credentials in force.
//!
//! - **Host** (DNS rebinding): the `Host` header must name an IP address, `localhost`, or a
//!   name in `http.hostnames`; a page whose name was rebound to this machine is refused (403).
//! - **Roles**: each route is `read` (the page, queries, `/metrics`, `/health`), `write`
//!   (`POST /api/v1/forward`) or `admin` (`POST /-/reload`, `POST /-/clear`,
//!   `DELETE /api/v1/series`). A role with tokens (`http.tokens.<role>`: a file of `NAME TOKEN`
//!   lines) takes `Authorization: Bearer TOKEN` with one of them, compared in constant time;
//!   admin tokens open every route, and any token opens `/health` (a local's health checks
//!   carry its write token; open when the read role is). A role listed in `http.tls.clientCertRoles` is also opened by a
//!   client certificate that chains to `http.tls.clientCAFile` (its subject's CN is the
//!   credential's name). No credential is 401, a wrong one 403; both counted.
//! - **Browsers**: a state-changing request (write or admin) from another web origin
//!   (`Origin`, `Sec-Fetch-Site`) is refused, and the forward route takes only its own content
//!   type and encoding, which no page can send without a preflight (405 here).
//! - Every answer carries a content security policy, frame and sniffing protection.
//!
//! The name of the write token that sent a batch is its credential: a global remembers batch
//! identities per credential, so one local cannot claim another's batches.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::http::{header, HeaderMap, Method};
use serde_json::{json, Value};

use crate::config_reader::{ConfigError, Reader};

/// What a route does, for its credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Reads: the page, queries, `/metrics`, `/health`.
    Read,
    /// Writes series: forwarded batches.
    Write,
    /// Changes or deletes state: reload, clear, forget series.
    Admin,
}

impl Role {
    /// Every role, in the order of [`Credentials::tokens`].
    pub const ALL: [Role; 3] = [Role::Read, Role::Write, Role::Admin];

    /// Its name in config keys and answers.
    pub fn name(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        }
    }

    /// The role of a request.
    pub fn of(method: &Method, path: &str) -> Role {
        match (method, path) {
            (&Method::POST, "/api/v1/forward") => Role::Write,
            (&Method::POST, "/-/reload" | "/-/clear") | (&Method::DELETE, _) => Role::Admin,
            (method, _) if method != Method::GET && method != Method::HEAD => Role::Admin,
            _ => Role::Read,
        }
    }
}

/// `http.*`: who may use the HTTP port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpSecurity {
    /// `http.hostnames`: host names a request's `Host` may carry besides addresses and
    /// `localhost` (the names clients use to reach this histd).
    pub hostnames: Vec<String>,
    /// `http.tokens.read`, `.write`, `.admin`: token files, per role.
    pub token_files: [Option<PathBuf>; 3],
    /// `http.openToNetwork`: allow the read, write or admin role without a credential on an address
    /// other than loopback (histd refuses to start so otherwise).
    pub open_to_network: bool,
    /// `http.tls`: serve HTTPS with these files (and check client certificates).
    pub tls: Option<crate::tls::ServerFiles>,
    /// `http.tls.clientCertRoles`: the roles a verified client certificate opens.
    pub cert_roles: [bool; 3],
}

impl HttpSecurity {
    /// The settings as `histd check-config` prints them (file names, never tokens).
    pub fn effective(&self) -> Value {
        let files: serde_json::Map<String, Value> = Role::ALL
            .iter()
            .zip(&self.token_files)
            .map(|(role, file)| (role.name().to_string(), json!(file)))
            .collect();
        let tls = self.tls.as_ref().map(|tls| {
            let roles: Vec<&str> =
                Role::ALL.iter().filter(|r| self.cert_roles[**r as usize]).map(|r| r.name()).collect();
            json!({
                "certFile": tls.cert, "keyFile": tls.key, "clientCAFile": tls.client_ca,
                "requireClientCert": tls.require_client_cert, "clientCertRoles": roles,
            })
        });
        json!({ "hostnames": self.hostnames, "tokens": files, "openToNetwork": self.open_to_network, "tls": tls })
    }

    /// True when `role` needs a credential: it has tokens, or client certificates open it.
    pub fn guards(&self, role: Role) -> bool {
        self.token_files[role as usize].is_some() || self.cert_roles[role as usize]
    }

    /// Reads the token files.
    pub fn load(&self) -> Result<Credentials, String> {
        let mut tokens: [Vec<(String, Vec<u8>)>; 3] = Default::default();
        for (role, file) in Role::ALL.iter().zip(&self.token_files) {
            if let Some(path) = file {
                tokens[*role as usize] =
                    read_tokens(path).map_err(|why| format!("http.tokens.{}: {why}", role.name()))?;
            }
        }
        let hostnames = self.hostnames.iter().map(|h| h.to_ascii_lowercase()).collect();
        Ok(Credentials { tokens, hostnames, cert_roles: self.cert_roles })
    }

    /// `Err` when the HTTP port at `address` would let anyone on a network read every series
    /// (the page, `/metrics`, the query API), write series (with `accepts_batches`) or delete
    /// data: such a port needs tokens, or says so.
    pub fn check_exposure(&self, address: IpAddr, accepts_batches: bool) -> Result<(), ConfigError> {
        if address.is_loopback() || self.open_to_network {
            return Ok(());
        }
        let open: Vec<&str> = [(Role::Admin, true), (Role::Write, accepts_batches), (Role::Read, true)]
            .into_iter()
            .filter(|(role, used)| *used && !self.guards(*role))
            .map(|(role, _)| role.name())
            .collect();
        if open.is_empty() {
            return Ok(());
        }
        Err(ConfigError {
            key: "http.openToNetwork".to_string(),
            message: format!(
                "the HTTP port is on {address}, where anyone who reaches it could use the {} role{} without a \
                 credential: give http.tokens.{} a token file, or set http.openToNetwork: true (e.g. behind a \
                 firewall or a port published on the host's loopback only)",
                spoken_list(&open),
                if open.len() > 1 { "s" } else { "" },
                open[0],
            ),
        })
    }
}

/// `a`, `a and b`, `a, b and c`.
fn spoken_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Reads `http.*`.
pub fn read(top: &Reader<'_>) -> Result<HttpSecurity, ConfigError> {
    let section = top.object("http")?;
    let mut hostnames = Vec::new();
    for (index, name) in section.array("hostnames")?.iter().enumerate() {
        let name = name.as_str().filter(|n| !n.is_empty() && !n.contains(['/', ' ', ':']));
        let name =
            name.ok_or_else(|| section.error(&format!("hostnames[{index}]"), "expected a host name (no port)"))?;
        hostnames.push(name.to_string());
    }
    let tokens = section.object("tokens")?;
    let mut token_files: [Option<PathBuf>; 3] = Default::default();
    for role in Role::ALL {
        token_files[role as usize] = tokens.string(role.name())?.map(PathBuf::from);
    }
    let (tls, cert_roles) = read_tls(&section)?;
    Ok(HttpSecurity { hostnames, token_files, open_to_network: section.bool("openToNetwork", false)?, tls, cert_roles })
}

/// Reads `http.tls`: `{certFile, keyFile, clientCAFile, requireClientCert, clientCertRoles}`.
fn read_tls(section: &Reader<'_>) -> Result<(Option<crate::tls::ServerFiles>, [bool; 3]), ConfigError> {
    let tls = section.object("tls")?;
    let (cert, key) = (tls.string("certFile")?, tls.string("keyFile")?);
    let client_ca = tls.string("clientCAFile")?.map(PathBuf::from);
    let require_client_cert = tls.bool("requireClientCert", false)?;
    let mut cert_roles = [false; 3];
    for (index, role) in tls.array("clientCertRoles")?.iter().enumerate() {
        let key = format!("clientCertRoles[{index}]");
        let found = Role::ALL.into_iter().find(|r| role.as_str() == Some(r.name()));
        let found = found.ok_or_else(|| tls.error(&key, format!("{role} is not a role: read, write or admin")))?;
        cert_roles[found as usize] = true;
    }
    match (cert, key) {
        (None, None) if client_ca.is_none() && cert_roles == [false; 3] && !require_client_cert => {
            Ok((None, cert_roles))
        }
        (Some(cert), Some(key)) => {
            if client_ca.is_none() && (require_client_cert || cert_roles != [false; 3]) {
                return Err(tls.error("clientCAFile", "client certificates are checked against a CA: name its file"));
            }
            let files = crate::tls::ServerFiles { cert: cert.into(), key: key.into(), client_ca, require_client_cert };
            Ok((Some(files), cert_roles))
        }
        (None, _) => Err(tls.error("certFile", "HTTPS needs the server's certificate file (PEM)")),
        (Some(_), None) => Err(tls.error("keyFile", "HTTPS needs the server's private key file (PEM)")),
    }
}

/// The shortest token taken: guessing one must be out of reach.
pub const MIN_TOKEN_BYTES: usize = 16;

/// The first token of the file of the read role (else of the admin role) that `security`
/// names: what histd's own tools present when pointed at the daemon's config. `None` when
/// the roles have no token files.
pub fn a_read_token(security: &HttpSecurity) -> Result<Option<String>, String> {
    let file =
        security.token_files[Role::Read as usize].as_ref().or(security.token_files[Role::Admin as usize].as_ref());
    let Some(file) = file else { return Ok(None) };
    let tokens = read_tokens(file)?;
    Ok(tokens.into_iter().next().map(|(_, token)| String::from_utf8_lossy(&token).into_owned()))
}

/// Reads a token file: one token a line, `NAME TOKEN` or `TOKEN` alone (named `token<line>`);
/// blank lines and `#` comments skipped.
fn read_tokens(path: &Path) -> Result<Vec<(String, Vec<u8>)>, String> {
    // The caller names the key (`http.tokens.<role>`): the reason alone here.
    let text = crate::secret_file::read(path, "the token file")?;
    let mut tokens = Vec::new();
    for (number, line) in text.lines().enumerate().map(|(i, line)| (i + 1, line.trim())) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, token) = match line.split_once(char::is_whitespace) {
            Some((name, token)) => (name.to_string(), token.trim()),
            None => (format!("token{number}"), line),
        };
        crate::secret_file::check_strength(token, MIN_TOKEN_BYTES, "a token (`NAME TOKEN` or `TOKEN`)")
            .map_err(|why| format!("{} line {number}: {why}", path.display()))?;
        tokens.push((name, token.as_bytes().to_vec()));
    }
    if tokens.is_empty() {
        return Err(format!("{} holds no token", path.display()));
    }
    Ok(tokens)
}

/// The tokens in force, per role, the roles client certificates open, and the host names
/// taken.
#[derive(Debug, Default)]
pub struct Credentials {
    tokens: [Vec<(String, Vec<u8>)>; 3],
    hostnames: Vec<String>,
    cert_roles: [bool; 3],
}

/// The verified client certificate of a connection: its subject's common name (a certificate
/// without one is no credential). Put on every request of the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCertificate(pub String);

/// Who sent a request, as far as the guard knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// The name of the token presented (empty: none was needed).
    pub credential: String,
}

/// Why a request is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The `Host` names a host that is not this histd's.
    Host(String),
    /// A state-changing request a web page could have sent.
    Origin(String),
    /// No credential for a role that needs one.
    Unauthorized(Role),
    /// A credential that does not open the role.
    Forbidden(Role),
}

impl Credentials {
    /// Decides on a request of `role` to `path` with `headers`, over a connection that
    /// presented `peer` (a verified client certificate).
    pub fn admit(
        &self,
        role: Role,
        path: &str,
        headers: &HeaderMap,
        peer: Option<&PeerCertificate>,
    ) -> Result<Caller, Refused> {
        self.admit_signed_in(role, path, headers, peer, None)
    }

    /// [`Credentials::admit`], for a browser signed in with the read token named `session`
    /// (http/session.rs): it opens the read role as that token does, while the token is in
    /// force.
    pub fn admit_signed_in(
        &self,
        role: Role,
        path: &str,
        headers: &HeaderMap,
        peer: Option<&PeerCertificate>,
        session: Option<&str>,
    ) -> Result<Caller, Refused> {
        let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
        let host = text(header::HOST).unwrap_or("");
        if !self.host_is_ours(host) {
            return Err(Refused::Host(host.to_string()));
        }
        if role != Role::Read {
            same_origin(host, text(header::ORIGIN), headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()))?;
        }
        if let (Some(name), Role::Read, None) = (session, role, text(header::AUTHORIZATION)) {
            return Ok(Caller { credential: format!("session:{name}") });
        }
        let any_role = path == "/health";
        let by_certificate = if any_role { self.cert_roles.contains(&true) } else { self.cert_roles[role as usize] };
        if let Some(PeerCertificate(name)) = peer.filter(|_| by_certificate) {
            return Ok(Caller { credential: format!("cert:{name}") });
        }
        self.credential(role, path, text(header::AUTHORIZATION), by_certificate)
    }

    /// Admits a request that needs no credential but changes a browser's state (signing in or
    /// out): its host must be ours and it must come from this histd's own page.
    pub fn admit_from_own_page(&self, headers: &HeaderMap) -> Result<(), Refused> {
        let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
        let host = text(header::HOST).unwrap_or("");
        if !self.host_is_ours(host) {
            return Err(Refused::Host(host.to_string()));
        }
        same_origin(host, text(header::ORIGIN), headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()))
    }

    /// The name of the read (or admin) token `token` is, compared in constant time; `None`
    /// for any other text.
    pub fn read_token_named(&self, token: &str) -> Option<String> {
        let presented = token.as_bytes();
        let mut found = None;
        for (name, known) in self.tokens[Role::Read as usize].iter().chain(&self.tokens[Role::Admin as usize]) {
            if constant_time_eq(known, presented) {
                found = Some(name.clone());
            }
        }
        found.filter(|_| !presented.is_empty())
    }

    /// True when a read (or admin) token whose SHA-256 is `digest` is in force: a session
    /// lives only as long as the token it was opened with.
    pub fn holds_read_token(&self, digest: &[u8; 32]) -> bool {
        let tokens = self.tokens[Role::Read as usize].iter().chain(&self.tokens[Role::Admin as usize]);
        let mut held = false;
        for (_, token) in tokens {
            held |= constant_time_eq(&token_digest(token), digest);
        }
        held
    }

    /// True when the read role needs a credential (a browser is shown the sign-in form).
    pub fn read_is_guarded(&self) -> bool {
        !self.tokens[Role::Read as usize].is_empty() || self.cert_roles[Role::Read as usize]
    }

    fn host_is_ours(&self, host: &str) -> bool {
        let name = match host.strip_prefix('[') {
            Some(rest) => return rest.split_once(']').is_some_and(|(ip, _)| ip.parse::<std::net::Ipv6Addr>().is_ok()),
            None => host.rsplit_once(':').map_or(host, |(name, _)| name),
        };
        name.eq_ignore_ascii_case("localhost")
            || name.parse::<std::net::Ipv4Addr>().is_ok()
            || self.hostnames.iter().any(|ours| name.eq_ignore_ascii_case(ours))
    }

    /// The caller when `authorization` opens `role` (any token opens `/health`, admin tokens
    /// every route; a role without tokens, that `by_certificate` does not guard either, is open).
    fn credential(
        &self,
        role: Role,
        path: &str,
        authorization: Option<&str>,
        by_certificate: bool,
    ) -> Result<Caller, Refused> {
        let any_role = path == "/health";
        if any_role && !self.read_is_guarded() {
            // `/health` is the read role's: open with it.
            return Ok(Caller::default());
        }
        let accepted: Vec<&(String, Vec<u8>)> = if any_role {
            self.tokens.iter().flatten().collect()
        } else {
            self.tokens[role as usize].iter().chain(&self.tokens[Role::Admin as usize]).collect()
        };
        let tokens =
            if any_role { self.tokens.iter().any(|t| !t.is_empty()) } else { !self.tokens[role as usize].is_empty() };
        if !tokens && !by_certificate {
            return Ok(Caller::default());
        }
        let presented = authorization.and_then(bearer_token);
        let Some(presented) = presented else { return Err(Refused::Unauthorized(role)) };
        let mut found = None;
        for (name, token) in accepted {
            if constant_time_eq(token, presented.as_bytes()) {
                found = Some(name);
            }
        }
        found.map(|name| Caller { credential: name.clone() }).ok_or(Refused::Forbidden(role))
    }
}

/// The token of an `Authorization: Bearer TOKEN` value (the scheme's case does not matter:
/// RFC 9110).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Compares without stopping at the first difference (the time says nothing of the token).
fn constant_time_eq(expected: &[u8], presented: &[u8]) -> bool {
    let mut difference = u8::from(expected.len() != presented.len());
    for (index, &byte) in presented.iter().enumerate() {
        difference |= byte ^ expected.get(index).copied().unwrap_or(!byte);
    }
    difference == 0
}

/// Refuses a state-changing request that a page of another site sent.
fn same_origin(host: &str, origin: Option<&str>, fetch_site: Option<&str>) -> Result<(), Refused> {
    if let Some(site) = fetch_site.filter(|site| !matches!(*site, "same-origin" | "none")) {
        return Err(Refused::Origin(format!("refused a {site} request from a web page")));
    }
    if let Some(origin) = origin {
        // A form posted from a page whose referrer policy is `no-referrer` (histd's) says
        // `Origin: null`; the browser's own `Sec-Fetch-Site` then tells where it came from.
        if origin == "null" && fetch_site == Some("same-origin") {
            return Ok(());
        }
        let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
        if origin_host != host {
            return Err(Refused::Origin(format!("refused from the web origin '{origin}'")));
        }
    }
    Ok(())
}

/// The SHA-256 of a token: what a session keeps of the token it was opened with.
pub fn token_digest(token: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, token);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// The guard's state: the credentials in force (replaced by a reload).
#[derive(Debug, Default)]
pub struct Guard {
    credentials: Mutex<Arc<Credentials>>,
}

impl Guard {
    /// A guard with `credentials`.
    pub fn new(credentials: Credentials) -> Guard {
        Guard { credentials: Mutex::new(Arc::new(credentials)) }
    }

    /// Puts new credentials in force (a reload read the token files again).
    pub fn replace(&self, credentials: Credentials) {
        *crate::clock::lock(&self.credentials) = Arc::new(credentials);
    }

    /// The credentials in force.
    pub fn current(&self) -> Arc<Credentials> {
        crate::clock::lock(&self.credentials).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(read: &[(&str, &str)], write: &[(&str, &str)], admin: &[(&str, &str)]) -> Credentials {
        let list =
            |tokens: &[(&str, &str)]| tokens.iter().map(|(n, t)| (n.to_string(), t.as_bytes().to_vec())).collect();
        Credentials {
            tokens: [list(read), list(write), list(admin)],
            hostnames: vec!["global.example".into()],
            cert_roles: [false; 3],
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn routes_have_roles() {
        let cases = [
            (Method::GET, "/api/v1/query", Role::Read),
            (Method::GET, "/", Role::Read),
            (Method::POST, "/api/v1/forward", Role::Write),
            (Method::POST, "/-/reload", Role::Admin),
            (Method::POST, "/-/clear", Role::Admin),
            (Method::DELETE, "/api/v1/series", Role::Admin),
            (Method::PUT, "/api/v1/series", Role::Admin),
        ];
        for (method, path, role) in cases {
            assert_eq!(Role::of(&method, path), role, "{method} {path}");
        }
    }

    #[test]
    fn hosts_origins_and_tokens_decide() {
        let open = credentials(&[], &[], &[]);
        let guarded = credentials(
            &[("dash", "read-token-0123456789")],
            &[("web-1", "write-token-web-1-xyz"), ("web-2", "write-token-web-2-xyz")],
            &[("ops", "admin-token-0123456789")],
        );
        let host = ("host", "127.0.0.1:8127");
        type Case<'a> = (&'a Credentials, Role, &'a str, HeaderMap, Result<&'a str, Refused>);
        let cases: Vec<Case> = vec![
            (&open, Role::Read, "/", headers(&[host]), Ok("")),
            (
                &open,
                Role::Read,
                "/",
                headers(&[("host", "attacker.example:8127")]),
                Err(Refused::Host("attacker.example:8127".into())),
            ),
            (&open, Role::Read, "/", headers(&[("host", "GLOBAL.example:8127")]), Ok("")),
            (&open, Role::Read, "/", headers(&[("host", "[::1]:8127")]), Ok("")),
            (&open, Role::Read, "/", headers(&[]), Err(Refused::Host(String::new()))),
            (
                &open,
                Role::Write,
                "/api/v1/forward",
                headers(&[host, ("origin", "http://evil.example")]),
                Err(Refused::Origin("refused from the web origin 'http://evil.example'".into())),
            ),
            (
                &open,
                Role::Admin,
                "/-/reload",
                headers(&[host, ("sec-fetch-site", "cross-site")]),
                Err(Refused::Origin("refused a cross-site request from a web page".into())),
            ),
            (
                &open,
                Role::Admin,
                "/-/reload",
                headers(&[host, ("origin", "http://127.0.0.1:8127"), ("sec-fetch-site", "same-origin")]),
                Ok(""),
            ),
            (&open, Role::Read, "/", headers(&[host, ("origin", "http://evil.example")]), Ok("")),
            (&guarded, Role::Read, "/api/v1/query", headers(&[host]), Err(Refused::Unauthorized(Role::Read))),
            (
                &guarded,
                Role::Read,
                "/api/v1/query",
                headers(&[host, ("authorization", "Bearer read-token-0123456789")]),
                Ok("dash"),
            ),
            (
                &guarded,
                Role::Read,
                "/api/v1/query",
                headers(&[host, ("authorization", "Bearer admin-token-0123456789")]),
                Ok("ops"),
            ),
            (
                &guarded,
                Role::Read,
                "/api/v1/query",
                headers(&[host, ("authorization", "Bearer write-token-web-1-xyz")]),
                Err(Refused::Forbidden(Role::Read)),
            ),
            (
                &guarded,
                Role::Read,
                "/health",
                headers(&[host, ("authorization", "Bearer write-token-web-2-xyz")]),
                Ok("web-2"),
            ),
            (
                &guarded,
                Role::Write,
                "/api/v1/forward",
                headers(&[host, ("authorization", "Bearer write-token-web-2-xyz")]),
                Ok("web-2"),
            ),
            (
                &guarded,
                Role::Write,
                "/api/v1/forward",
                headers(&[host, ("authorization", "Bearer write-token-web-2-xy")]),
                Err(Refused::Forbidden(Role::Write)),
            ),
            (
                &guarded,
                Role::Write,
                "/api/v1/forward",
                headers(&[host, ("authorization", "Basic d3JpdGU=")]),
                Err(Refused::Unauthorized(Role::Write)),
            ),
            (
                &guarded,
                Role::Admin,
                "/-/clear",
                headers(&[host, ("authorization", "Bearer read-token-0123456789")]),
                Err(Refused::Forbidden(Role::Admin)),
            ),
        ];
        for (credentials, role, path, headers, want) in cases {
            let got = credentials.admit(role, path, &headers, None).map(|caller| caller.credential);
            assert_eq!(got.as_deref(), want.as_ref().map(|s| *s), "{role:?} {path} {headers:?}");
        }
    }

    #[test]
    fn requests_from_other_origins_are_told_apart_from_the_page_s_own() {
        // (Origin, Sec-Fetch-Site, admitted)
        let cases: &[(Option<&str>, Option<&str>, bool)] = &[
            (None, None, true),
            (Some("http://127.0.0.1:8127"), Some("same-origin"), true),
            (Some("http://evil.example"), None, false),
            (None, Some("cross-site"), false),
            (Some("null"), Some("same-origin"), true),
            (Some("null"), None, false),
            (Some("null"), Some("cross-site"), false),
        ];
        for (origin, site, admitted) in cases {
            assert_eq!(same_origin("127.0.0.1:8127", *origin, *site).is_ok(), *admitted, "{origin:?} {site:?}");
        }
    }

    #[test]
    fn client_certificates_open_their_roles() {
        let mut credentials = credentials(&[], &[], &[("ops", "admin-token-0123456789")]);
        credentials.cert_roles[Role::Write as usize] = true;
        let host = headers(&[("host", "127.0.0.1:8127")]);
        let web1 = PeerCertificate("web-1".into());
        let cases = [
            (Role::Write, "/api/v1/forward", Some(&web1), Ok("cert:web-1".to_string())),
            (Role::Write, "/api/v1/forward", None, Err(Refused::Unauthorized(Role::Write))),
            (Role::Read, "/health", Some(&web1), Ok("cert:web-1".to_string())),
            // The read role is open: so is `/health`, with no credential.
            (Role::Read, "/health", None, Ok(String::new())),
            (Role::Admin, "/-/reload", Some(&web1), Err(Refused::Unauthorized(Role::Admin))),
            (Role::Read, "/api/v1/query", Some(&web1), Ok(String::new())),
        ];
        for (role, path, peer, want) in cases {
            assert_eq!(credentials.admit(role, path, &host, peer).map(|c| c.credential), want, "{role:?} {path}");
        }
    }

    #[test]
    fn tokens_compare_whole() {
        let cases = [
            ("abcdefgh", "abcdefgh", true),
            ("abcdefgh", "abcdefgi", false),
            ("abcdefgh", "abcdefg", false),
            ("abcdefgh", "abcdefghi", false),
            ("", "", true),
        ];
        for (expected, presented, equal) in cases {
            assert_eq!(constant_time_eq(expected.as_bytes(), presented.as_bytes()), equal, "{expected} {presented}");
        }
    }

    #[test]
    fn the_bearer_scheme_is_read_in_any_case() {
        let cases = [
            ("Bearer abc", Some("abc")),
            ("bearer abc", Some("abc")),
            ("BEARER  abc ", Some("abc")),
            ("Basic abc", None),
            ("Bearerabc", None),
            ("", None),
        ];
        for (value, want) in cases {
            assert_eq!(bearer_token(value), want, "{value:?}");
        }
    }

    #[test]
    fn token_files_are_read_and_checked() {
        let dir = std::env::temp_dir().join(format!("histd-tokens-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cases = [
            ("# locals\nweb-1 0123456789abcdef0123\n\nfedcba9876543210fedc\n", Ok(vec!["web-1", "token4"])),
            ("short\n", Err("at least 16")),
            ("x aaaaaaaaaaaaaaaa\n", Err("1 different")),
            ("x abababababababab\n", Err("2 different")),
            ("# nothing\n", Err("holds no token")),
        ];
        for (index, (text, want)) in cases.into_iter().enumerate() {
            let path = dir.join(format!("t{index}"));
            std::fs::write(&path, text).unwrap();
            match (read_tokens(&path), want) {
                (Ok(tokens), Ok(names)) => {
                    assert_eq!(tokens.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), names)
                }
                (Err(error), Err(says)) => assert!(error.contains(says), "{error}"),
                (got, want) => panic!("{text:?}: {got:?} vs {want:?}"),
            }
        }
        assert!(read_tokens(&dir.join("missing")).unwrap_err().contains("cannot read"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_network_address_needs_tokens_or_says_it_is_open() {
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let network: IpAddr = "0.0.0.0".parse().unwrap();
        let mut security = HttpSecurity::default();
        assert!(security.check_exposure(loopback, true).is_ok());
        let error = security.check_exposure(network, true).unwrap_err();
        assert!(
            error.key == "http.openToNetwork" && error.message.contains("admin, write and read roles"),
            "{error:?}"
        );
        security.token_files[Role::Admin as usize] = Some("/a".into());
        assert!(security.check_exposure(network, false).unwrap_err().message.contains("the read role"));
        security.token_files[Role::Read as usize] = Some("/r".into());
        assert!(security.check_exposure(network, false).is_ok(), "no intake: write is not used");
        assert!(security.check_exposure(network, true).unwrap_err().message.contains("write role"));
        security.open_to_network = true;
        assert!(security.check_exposure(network, true).is_ok());
    }
}
