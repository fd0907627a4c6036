//! Signing in from a browser (issue 49, item 2). With read tokens on (`http.tokens.read`), the
//! page asked for without a credential is a sign-in form: a person types a read (or admin)
//! token, `POST /-/sign-in` checks it and opens a session. The browser then holds only an
//! opaque, random session id, in a cookie that scripts cannot read (`HttpOnly`), that no
//! other site's request carries (`SameSite=Strict`) and that goes only over TLS when the port
//! serves HTTPS (`Secure`); the token itself is never in a cookie, a URL or the page. A
//! session opens the read role, as its token does; it ends at `POST /-/sign-out`, after
//! [`SESSION_LIFETIME`], or as soon as its token is no longer in its file (a reload). API
//! clients keep sending `Authorization: Bearer`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::HttpState;
use crate::access::{token_digest, Credentials};
use crate::clock::lock;

/// How long a session lasts after signing in.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// The most sessions open at once; past it the oldest ends.
pub const MAX_SESSIONS: usize = 1024;

/// The cookie's name.
const COOKIE: &str = "histd_session";

/// The longest sign-in form read.
const MAX_FORM_BYTES: usize = 4096;

/// The sessions open now, by id.
#[derive(Debug, Default)]
pub struct Sessions {
    open: Mutex<HashMap<String, Session>>,
}

/// One signed-in browser.
#[derive(Debug, Clone)]
struct Session {
    /// The name of the token it signed in with.
    name: String,
    /// The SHA-256 of that token: the session ends when no token in force has it.
    digest: [u8; 32],
    opened: Instant,
}

impl Sessions {
    /// Opens a session for the token `token`, named `name`: its id (32 random bytes, hex).
    fn open(&self, name: String, token: &str) -> Result<String, String> {
        use ring::rand::SecureRandom as _;
        let mut random = [0u8; 32];
        ring::rand::SystemRandom::new().fill(&mut random).map_err(|_| "no random bytes for a session".to_string())?;
        let id: String = random.iter().map(|byte| format!("{byte:02x}")).collect();
        let mut open = lock(&self.open);
        open.retain(|_, session| session.opened.elapsed() < SESSION_LIFETIME);
        if open.len() >= MAX_SESSIONS {
            let oldest = open.iter().min_by_key(|(_, session)| session.opened).map(|(id, _)| id.clone());
            oldest.map(|id| open.remove(&id));
        }
        open.insert(id.clone(), Session { name, digest: token_digest(token.as_bytes()), opened: Instant::now() });
        Ok(id)
    }

    /// The name of the token the session `id` signed in with, while it lasts and its token is
    /// in force (else it ends now).
    pub fn signed_in(&self, id: &str, credentials: &Credentials) -> Option<String> {
        let mut open = lock(&self.open);
        let session = open.get(id)?;
        if session.opened.elapsed() < SESSION_LIFETIME && credentials.holds_read_token(&session.digest) {
            return Some(session.name.clone());
        }
        open.remove(id);
        None
    }

    /// Ends the session `id`.
    fn close(&self, id: &str) {
        lock(&self.open).remove(id);
    }
}

/// The session id a request's `Cookie` header carries, if any.
pub fn session_id(headers: &HeaderMap) -> Option<&str> {
    let cookies = headers.get_all(header::COOKIE).into_iter().filter_map(|value| value.to_str().ok());
    cookies.flat_map(|line| line.split(';')).find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        (name == COOKIE && !value.is_empty() && value.len() <= 128).then_some(value)
    })
}

/// `POST /-/sign-in` (a form with `token`): a session opened and the browser sent to the page,
/// or the form again with why not (401).
pub async fn sign_in(State(state): State<Arc<HttpState>>, request: axum::extract::Request) -> Response {
    let credentials = state.guard.current();
    let (parts, body) = request.into_parts();
    if let Err(refused) = credentials.admit_from_own_page(&parts.headers) {
        return super::refusal::refusal(&state, refused);
    }
    // A form of a token: capped and within httpBodyTimeoutMs, as every body this port reads.
    let body = match super::forward::read_body(body, MAX_FORM_BYTES, state.body_timeout).await {
        Ok(body) => body,
        Err(refused) => return refused.into_response(),
    };
    let token = form_field(&body, "token").unwrap_or_default();
    let Some(name) = credentials.read_token_named(token.trim()) else {
        state.admin.edges.refused_http_credentials.add(1);
        return sign_in_page(StatusCode::UNAUTHORIZED, Some("That token does not open this page."));
    };
    match state.sessions.open(name, token.trim()) {
        Ok(id) => {
            let secure = if state.over_tls { "; Secure" } else { "" };
            let cookie = format!("{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict{secure}");
            to_page(Some(cookie))
        }
        Err(why) => (StatusCode::INTERNAL_SERVER_ERROR, why).into_response(),
    }
}

/// `POST /-/sign-out`: the session ended, its cookie cleared, the browser sent to the page.
pub async fn sign_out(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    if let Err(refused) = state.guard.current().admit_from_own_page(&headers) {
        return super::refusal::refusal(&state, refused);
    }
    if let Some(id) = session_id(&headers) {
        state.sessions.close(id);
    }
    to_page(Some(format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")))
}

/// A redirect to the page (303: the browser asks it with GET), setting `cookie`.
fn to_page(cookie: Option<String>) -> Response {
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    if let Some(value) = cookie.and_then(|cookie| HeaderValue::from_str(&cookie).ok()) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The sign-in form, with `said` above it.
pub fn sign_in_page(status: StatusCode, said: Option<&str>) -> Response {
    let said = said.map_or(String::new(), |text| format!("<p class=\"said\">{text}</p>"));
    let page = SIGN_IN.replace("<!--said-->", &said);
    let mut response = (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

const SIGN_IN: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>histd: sign in</title>
<style>
body { font: 15px system-ui, sans-serif; background: #f6f7f9; color: #1d2330; display: grid; place-items: center; min-height: 90vh; }
form { background: #fff; padding: 24px 28px; border-radius: 8px; box-shadow: 0 1px 4px #0002; width: 320px; }
h1 { font-size: 18px; margin: 0 0 12px; } label { display: block; margin: 12px 0 4px; }
input { width: 100%; box-sizing: border-box; padding: 8px; font: inherit; }
button { margin-top: 16px; padding: 8px 16px; font: inherit; } .said { color: #b3261e; }
p.hint { color: #5b6270; font-size: 13px; }
</style></head>
<body><form method="post" action="/-/sign-in" id="sign-in">
<h1>histd</h1><!--said-->
<label for="token">Read token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<button type="submit">Sign in</button>
<p class="hint">A token of <code>http.tokens.read</code> (or <code>admin</code>). The browser keeps only a session, never the token.</p>
</form></body></html>
"#;

/// The value of `name` in an `application/x-www-form-urlencoded` body.
pub fn form_field(body: &[u8], name: &str) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    text.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == name).then(|| percent_decode(value))
    })
}

/// `+` as a space and `%XX` as its byte (a form's encoding); bytes that are not UTF-8 are
/// replaced.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'+' => out.push(b' '),
            b'%' if index + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[index + 1..index + 3]).ok();
                match hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
                    Some(byte) => {
                        out.push(byte);
                        index += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_decode_as_browsers_encode_them() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("token=abc", "token", Some("abc")),
            ("x=1&token=a%2Bb+c%25", "token", Some("a+b c%")),
            ("token=%zz", "token", Some("%zz")),
            ("token=%4", "token", Some("%4")),
            ("other=1", "token", None),
            ("token=", "token", Some("")),
        ];
        for (body, name, want) in cases {
            assert_eq!(form_field(body.as_bytes(), name).as_deref(), *want, "{body}");
        }
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let cases: &[(&[&str], Option<&str>)] = &[
            (&["histd_session=abc"], Some("abc")),
            (&["a=1; histd_session=def; b=2"], Some("def")),
            (&["a=1", "histd_session=ghi"], Some("ghi")),
            (&["histd_session="], None),
            (&["other_session=abc"], None),
            (&[], None),
        ];
        for (lines, want) in cases {
            let mut headers = HeaderMap::new();
            for line in *lines {
                headers.append(header::COOKIE, line.parse().unwrap());
            }
            assert_eq!(session_id(&headers), *want, "{lines:?}");
        }
    }
}
