//! `POST /api/v1/forward`: a batch from a local histd's forward backend, merged once into the
//! flush of the interval it belongs to (`global/`, `placement.rs`).
//!
//! What a request may cost is settled before it costs it: nothing is read while `global.accept`
//! is off or the content type or encoding is not the batch's; the body's bytes are reserved
//! in `global.maxBytesInFlight` before they are read (its `Content-Length`, or the largest body
//! allowed), then what it decompresses and decodes to before that is done; past the budget the
//! answer is 503 with `Retry-After` and the local sends the batch again. The body must arrive
//! within `httpBodyTimeoutMs`.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use http_body_util::{BodyExt, Limited};

use super::HttpState;
use crate::access::Caller;
use crate::contract::{ErrorAnswer, Merged};
use crate::global::{Received, Refusal, Reservation};
use fleet::format::{self, CONTENT_TYPE};

fn answer(status: StatusCode, error: impl Into<String>) -> Response {
    (status, Json(ErrorAnswer { error: error.into() })).into_response()
}

fn busy(state: &HttpState) -> Response {
    state.admin.edges.forward_batches_busy.add(1);
    let mut response = answer(
        StatusCode::SERVICE_UNAVAILABLE,
        "busy: forwarded batches in flight hold global.maxBytesInFlight; send it again shortly",
    );
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// The content type and encoding a batch is sent with; anything else (a page's simple
/// `text/plain` POST among them) is refused unread.
fn check_headers(headers: &HeaderMap) -> Result<(), String> {
    let text = |name| headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
    let media = text(header::CONTENT_TYPE).map(|t| t.split(';').next().unwrap_or_default().trim());
    if !media.is_some_and(|media| media.eq_ignore_ascii_case(CONTENT_TYPE)) {
        return Err(format!("Content-Type {:?}: a forwarded batch is sent as {CONTENT_TYPE}", media.unwrap_or("none")));
    }
    match text(header::CONTENT_ENCODING) {
        Some(encoding) if encoding.eq_ignore_ascii_case("snappy") => Ok(()),
        other => Err(format!("Content-Encoding {:?}: a forwarded batch is snappy-compressed", other.unwrap_or("none"))),
    }
}

/// `POST /api/v1/forward`: a local histd's batch, taken by a global (`global.accept`): read
/// within its budgets, screened, merged once per identity and credential, journaled first
/// when `global.journalDir` is set.
pub async fn receive(
    State(state): State<Arc<HttpState>>,
    caller: Option<Extension<Caller>>,
    request: Request,
) -> Response {
    let global = state.global.clone();
    let edges = &state.admin.edges;
    if !global.accepts() {
        edges.forward_batches_refused.add(1);
        return answer(
            StatusCode::SERVICE_UNAVAILABLE,
            "this histd does not accept forwarded batches: set global.accept: true on it",
        );
    }
    if let Err(why) = check_headers(request.headers()) {
        edges.forward_batches_refused.add(1);
        return answer(StatusCode::UNSUPPORTED_MEDIA_TYPE, why);
    }
    let most = global.max_body_bytes();
    let declared = request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|length| length > most) {
        edges.forward_batches_refused.add(1);
        return answer(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("a body of {} bytes is over the limit of {most}", declared.unwrap_or(0)),
        );
    }
    let Some(mut reservation) = global.in_flight().reserve(declared.unwrap_or(most)) else { return busy(&state) };
    // A body still arriving may be displaced by a new connection when every slot is taken
    // (a client dripping a byte every few seconds held its slot for httpBodyTimeoutMs: N12).
    let waiting = state.waiters.wait();
    let read = tokio::select! {
        read = read_body(request.into_body(), most, state.body_timeout) => read,
        _ = waiting.evicted.notified() => {
            edges.idle_closed_connections.add(1);
            Err((StatusCode::SERVICE_UNAVAILABLE, "the body came too slowly for a busy histd: send it again".to_string()))
        }
    };
    drop(waiting);
    let body = match read {
        Ok(body) => body,
        Err((status, why)) => {
            if status != StatusCode::SERVICE_UNAVAILABLE {
                edges.forward_batches_refused.add(1); // a displaced body is sent again
            }
            if status == StatusCode::REQUEST_TIMEOUT {
                edges.http_body_timeouts.add(1);
            }
            let mut response = answer(status, why);
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            return response;
        }
    };
    if let Ok(decompressed) = format::decompressed_len(&body) {
        if !reservation.grow(global.decoding_bytes(decompressed)) {
            return busy(&state);
        }
    }
    let credential = caller.map(|Extension(caller)| caller.credential).unwrap_or_default();
    merge(state.clone(), body, credential, reservation).await
}

/// Reads a body of at most `most` bytes within `timeout`.
/// A request's body, at most `most` bytes, within `timeout` (`httpBodyTimeoutMs`): the
/// status and reason when it is longer, later, or does not read.
pub(super) async fn read_body(
    body: Body,
    most: usize,
    timeout: std::time::Duration,
) -> Result<Bytes, (StatusCode, String)> {
    match tokio::time::timeout(timeout, Limited::new(body, most).collect()).await {
        Err(_) => Err((
            StatusCode::REQUEST_TIMEOUT,
            format!("the body did not arrive within {} ms (httpBodyTimeoutMs)", timeout.as_millis()),
        )),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => {
            Err((StatusCode::PAYLOAD_TOO_LARGE, format!("the body is over the limit of {most} bytes")))
        }
        Ok(Err(error)) => Err((StatusCode::BAD_REQUEST, format!("the body could not be read: {error}"))),
    }
}

/// Decodes and merges on the blocking pool; the reservation is given back when it is done.
async fn merge(state: Arc<HttpState>, body: Bytes, credential: String, reservation: Reservation) -> Response {
    let global = state.global.clone();
    let merged = tokio::task::spawn_blocking(move || {
        let received = global.receive(&body, &credential);
        drop(reservation);
        received
    })
    .await;
    match merged {
        Ok(Ok(Received::Merged(series))) => Json(Merged { merged: series as u64, duplicate: false }).into_response(),
        Ok(Ok(Received::Duplicate)) => Json(Merged { merged: 0, duplicate: true }).into_response(),
        Ok(Err(refusal @ (Refusal::Malformed(_) | Refusal::Interval(_) | Refusal::Unproven(_)))) => {
            answer(StatusCode::BAD_REQUEST, refusal.to_string())
        }
        Ok(Err(refusal @ Refusal::LateIntervalsHeld(_))) => {
            let mut response = answer(StatusCode::SERVICE_UNAVAILABLE, refusal.to_string());
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            response
        }
        Ok(Err(refusal @ Refusal::Journal(_))) => {
            tracing::error!(%refusal, "global: a forwarded batch was refused (the local keeps it)");
            answer(StatusCode::SERVICE_UNAVAILABLE, refusal.to_string())
        }
        Err(_) => answer(StatusCode::INTERNAL_SERVER_ERROR, "merging the batch failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_batch_type_and_encoding_are_read() {
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, value.parse().unwrap());
            }
            map
        };
        let cases = [
            (headers(&[("content-type", CONTENT_TYPE), ("content-encoding", "snappy")]), true),
            (headers(&[("content-type", "application/x-histd-forward; v=1"), ("content-encoding", "SNAPPY")]), true),
            (headers(&[("content-type", "text/plain"), ("content-encoding", "snappy")]), false),
            (headers(&[("content-type", CONTENT_TYPE)]), false),
            (headers(&[("content-encoding", "snappy")]), false),
            (headers(&[("content-type", CONTENT_TYPE), ("content-encoding", "gzip")]), false),
        ];
        for (headers, ok) in cases {
            assert_eq!(check_headers(&headers).is_ok(), ok, "{headers:?}");
        }
    }
}
