//! The HTTP guard: every request passes here before its handler; [`crate::access`] decides
//! (hosts, roles, tokens, client certificates, origins), this middleware counts the refusals
//! and marks every answer with its security headers.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::HttpState;
use crate::access::{PeerCertificate, Refused, Role};

/// The content security policy of every answer: the page loads only its own files, is never
/// framed, and sends forms nowhere.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; \
                   frame-ancestors 'none'; form-action 'self'; base-uri 'none'";

/// The routes that sign a browser in and out: they need no credential and check their own
/// origin (http/session.rs).
pub const SIGN_IN: &str = "/-/sign-in";
/// See [`SIGN_IN`].
pub const SIGN_OUT: &str = "/-/sign-out";

/// The middleware: admits or refuses each request, then marks every answer.
pub async fn guard(State(state): State<Arc<HttpState>>, mut request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let mut response = if matches!(path, SIGN_IN | SIGN_OUT) {
        next.run(request).await
    } else {
        let role = Role::of(request.method(), path);
        let peer = request.extensions().get::<PeerCertificate>();
        let credentials = state.guard.current();
        let session =
            super::session::session_id(request.headers()).and_then(|id| state.sessions.signed_in(id, &credentials));
        let admitted = credentials.admit_signed_in(role, path, request.headers(), peer, session.as_deref());
        match admitted {
            Ok(caller) => {
                request.extensions_mut().insert(caller);
                next.run(request).await
            }
            // A person without a credential is shown the sign-in form instead of the page.
            Err(Refused::Unauthorized(Role::Read)) if path == "/" && credentials.read_is_guarded() => {
                state.admin.edges.refused_http_credentials.add(1);
                super::session::sign_in_page(StatusCode::UNAUTHORIZED, None)
            }
            Err(refused) => super::refusal::refusal(&state, refused),
        }
    };
    let headers = response.headers_mut();
    headers.insert("content-security-policy", HeaderValue::from_static(CSP));
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    response
}
