//! `POST /api/v1/forward`: a batch from a local histd's forward backend, merged once into this
//! histd's current interval (`global/`).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::HttpState;
use crate::global::{Received, Refusal};

pub async fn receive(State(state): State<Arc<HttpState>>, headers: HeaderMap, body: Bytes) -> Response {
    let global = state.global.clone();
    if !global.accepts() {
        state.admin.edges.forward_batches_refused.add(1);
        let error = "this histd does not accept forwarded batches: set global.accept: true on it";
        return (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "error": error }))).into_response();
    }
    let encoding = headers.get(header::CONTENT_ENCODING).and_then(|v| v.to_str().ok()).unwrap_or("snappy");
    if !encoding.eq_ignore_ascii_case("snappy") {
        state.admin.edges.forward_batches_refused.add(1);
        let error = format!("Content-Encoding '{encoding}': a forwarded batch is snappy-compressed");
        return (StatusCode::UNSUPPORTED_MEDIA_TYPE, Json(json!({ "error": error }))).into_response();
    }
    match tokio::task::spawn_blocking(move || global.receive(&body)).await {
        Ok(Ok(Received::Merged(series))) => Json(json!({ "merged": series, "duplicate": false })).into_response(),
        Ok(Ok(Received::Duplicate)) => Json(json!({ "merged": 0, "duplicate": true })).into_response(),
        Ok(Err(refusal @ Refusal::Malformed(_))) => {
            (StatusCode::BAD_REQUEST, Json(json!({ "error": refusal.to_string() }))).into_response()
        }
        Ok(Err(refusal @ Refusal::Journal(_))) => {
            tracing::error!(%refusal, "global: a forwarded batch was refused (the local keeps it)");
            (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "error": refusal.to_string() }))).into_response()
        }
        Err(_) => {
            (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({ "error": "merging the batch failed" }))).into_response()
        }
    }
}
