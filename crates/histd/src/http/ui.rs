//! The web UI: static files compiled into the binary (no CDN, no build step). uPlot is
//! vendored as its distributed build, with its licence, in `ui/vendor/`.

use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Every file the page loads: path under `/ui/`, content type, bytes.
const FILES: &[(&str, &str, &str)] = &[
    ("app.js", "text/javascript; charset=utf-8", include_str!("ui/app.js")),
    ("app.css", "text/css; charset=utf-8", include_str!("ui/app.css")),
    ("vendor/uPlot.iife.min.js", "text/javascript; charset=utf-8", include_str!("ui/vendor/uPlot.iife.min.js")),
    ("vendor/uPlot.min.css", "text/css; charset=utf-8", include_str!("ui/vendor/uPlot.min.css")),
    ("vendor/uPlot.LICENSE", "text/plain; charset=utf-8", include_str!("ui/vendor/uPlot.LICENSE")),
];

/// `GET /`: the web page; for a browser signed in (http/session.rs), with a button that signs
/// it out.
pub async fn index(caller: Option<axum::Extension<crate::access::Caller>>) -> Response {
    let page = include_str!("ui/index.html");
    let signed_in = caller.is_some_and(|caller| caller.credential.starts_with("session:"));
    let page = match signed_in {
        true => page.replace("<!--sign-out-->", SIGN_OUT_BUTTON),
        false => page.to_string(),
    };
    ([("content-type", "text/html; charset=utf-8"), ("cache-control", "no-store")], page).into_response()
}

/// The page's sign-out button (a form: no script needed).
const SIGN_OUT_BUTTON: &str = r#"<form method="post" action="/-/sign-out" class="sign-out"><button type="submit" id="sign-out">Sign out</button></form>"#;

/// `GET /ui/<file>`: the page's script, style and vendored chart library; 404 for any other.
pub async fn file(Path(path): Path<String>) -> Response {
    match FILES.iter().find(|(name, _, _)| *name == path) {
        Some((_, content_type, body)) => {
            ([("content-type", *content_type), ("cache-control", "no-cache")], *body).into_response()
        }
        None => (StatusCode::NOT_FOUND, "no such file").into_response(),
    }
}
