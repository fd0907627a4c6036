//! The answer to a request the guard refused: its status, its words, and the counter it adds to.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::HttpState;
use crate::access::Refused;

/// The answer to a refused request, counted.
pub fn refusal(state: &HttpState, refused: Refused) -> Response {
    let edges = &state.admin.edges;
    let (status, message) = match refused {
        Refused::Host(host) => {
            edges.refused_http_hosts.add(1);
            let why = format!(
                "refused through host '{host}': use an address (127.0.0.1:port), localhost, or a name in http.hostnames"
            );
            (StatusCode::FORBIDDEN, why)
        }
        Refused::Origin(why) => {
            edges.refused_http_origins.add(1);
            (StatusCode::FORBIDDEN, why)
        }
        Refused::Unauthorized(role) => {
            edges.refused_http_credentials.add(1);
            (StatusCode::UNAUTHORIZED, format!("the {} role needs a token: Authorization: Bearer TOKEN", role.name()))
        }
        Refused::Forbidden(role) => {
            edges.refused_http_credentials.add(1);
            (StatusCode::FORBIDDEN, format!("this token does not open the {} role", role.name()))
        }
    };
    let mut response = (status, Json(json!({ "error": message }))).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"histd\""));
    }
    response
}
