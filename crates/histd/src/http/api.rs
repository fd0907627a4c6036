//! The handlers. Store reads run on the blocking pool with the one reading connection.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::params::{self, BadParameter};
use super::HttpState;
use crate::ingest::{shards_lock as lock, unix_now_s};
use crate::sinks::SinkTelemetry;

type Params = Query<HashMap<String, String>>;

/// An answer or an error, as JSON.
type Answer = Result<Json<Value>, Failure>;

/// An error with its HTTP status.
#[derive(Debug)]
pub struct Failure(StatusCode, String);

impl Failure {
    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.0.as_u16()
    }

    /// What went wrong.
    pub fn message(&self) -> &str {
        &self.1
    }

    /// A 500 with `message`.
    pub fn internal(message: &str) -> Failure {
        Failure(StatusCode::INTERNAL_SERVER_ERROR, message.to_string())
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

impl From<BadParameter> for Failure {
    fn from(error: BadParameter) -> Self {
        Failure(StatusCode::BAD_REQUEST, error.to_string())
    }
}

pub async fn health(State(state): State<Arc<HttpState>>) -> Response {
    let up = state.admin.healthy.load(Ordering::Relaxed);
    let (totals, timers_over_sample_limit) = {
        let aggregator = state.admin.aggregation.current();
        (aggregator.totals().clone(), aggregator.timers_over_sample_limit())
    };
    let body = json!({
        "status": if up { "up" } else { "down" },
        "uptime_s": unix_now_s().saturating_sub(state.admin.started_unix_s),
        "packets_received": totals.packets,
        "metrics_received": totals.lines,
        "bad_lines": totals.bad_lines(),
        "kernel_drops": totals.kernel_drops,
        "truncated_datagrams": totals.truncated_datagrams,
        "timers_over_sample_limit": timers_over_sample_limit,
        "edges": state.admin.edges.entries().into_iter().map(|(name, count)| (name.to_string(), json!(count))).collect::<serde_json::Map<_, _>>(),
        "sinks": sinks_json(&state.admin.sinks),
    });
    let status = if up { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, Json(body)).into_response()
}

/// Each sink's telemetry under its name, as the `stats` reply has it (histd's names only:
/// Etsy's spellings of the same values are for `stats`).
pub(super) fn sinks_json(sinks: &[Arc<SinkTelemetry>]) -> Value {
    let now = unix_now_s();
    let object = sinks
        .iter()
        .map(|sink| {
            let values = sink.histd_entries(now).into_iter().map(|(name, value)| (name, json!(value)));
            (sink.sink.to_string(), Value::Object(values.collect()))
        })
        .collect();
    Value::Object(object)
}

pub async fn openapi() -> Response {
    ([("content-type", "application/json")], include_str!("openapi.json")).into_response()
}

pub async fn series(State(state): State<Arc<HttpState>>, Query(query): Params) -> Answer {
    with_store(state, move |store| answer(Route::Series, &query, store, unix_now_s() as i64)).await
}

pub async fn query(State(state): State<Arc<HttpState>>, Query(query): Params) -> Answer {
    with_store(state, move |store| answer(Route::Query, &query, store, unix_now_s() as i64)).await
}

pub async fn histogram(State(state): State<Arc<HttpState>>, Query(query): Params) -> Answer {
    with_store(state, move |store| answer(Route::Histogram, &query, store, unix_now_s() as i64)).await
}

pub async fn heatmap(State(state): State<Arc<HttpState>>, Query(query): Params) -> Answer {
    with_store(state, move |store| answer(Route::Heatmap, &query, store, unix_now_s() as i64)).await
}

/// The API routes that read the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `/api/v1/series`.
    Series,
    /// `/api/v1/query`.
    Query,
    /// `/api/v1/histogram`.
    Histogram,
    /// `/api/v1/heatmap`.
    Heatmap,
}

/// The answer to one store request: its parameters read and checked (errors name the
/// parameter, status 400), then the store read. `now` is unix seconds. Every handler runs
/// this; so does the fuzz target for the HTTP parameters.
pub fn answer(route: Route, query: &HashMap<String, String>, store: &store::Store, now: i64) -> Result<Value, Failure> {
    match route {
        Route::Series => series_answer(query, store),
        Route::Query => query_answer(query, store, now),
        Route::Histogram => histogram_answer(query, store, now),
        Route::Heatmap => heatmap_answer(query, store, now),
    }
}

/// The longest `match` pattern (SQLite refuses long GLOB patterns as "too complex": that was a
/// 500 for what is bad input).
pub const MAX_PATTERN_BYTES: usize = 1024;

/// Series listed when `limit` is not given.
pub const DEFAULT_SERIES_LIMIT: usize = 5_000;
/// The most series one answer lists.
pub const MAX_SERIES_LIMIT: usize = 100_000;

fn series_answer(query: &HashMap<String, String>, store: &store::Store) -> Result<Value, Failure> {
    let pattern = query.get("match").map_or("*", String::as_str);
    if pattern.len() > MAX_PATTERN_BYTES {
        let message = format!("a pattern of at most {MAX_PATTERN_BYTES} bytes, got {}", pattern.len());
        return Err(BadParameter { name: "match", message }.into());
    }
    let limit = params::count("limit", query.get("limit").map(String::as_str), DEFAULT_SERIES_LIMIT, MAX_SERIES_LIMIT)?;
    let (found, total) = store.series(Some(pattern), limit).map_err(internal)?;
    let list: Vec<Value> = found
        .iter()
        .map(|s| json!({ "name": s.key.name, "tags": s.key.tag_list().collect::<Vec<_>>(), "type": s.key.kind.as_str() }))
        .collect();
    Ok(json!({ "series": list, "total": total, "truncated": total > found.len() }))
}

fn query_answer(query: &HashMap<String, String>, store: &store::Store, now: i64) -> Result<Value, Failure> {
    let text = required(query, "expr")?;
    let expr = store::parse(&text).map_err(|e| Failure(StatusCode::BAD_REQUEST, format!("parameter `expr`: {e}")))?;
    store.check_types(&expr).map_err(|e| Failure(StatusCode::BAD_REQUEST, format!("parameter `expr`: {e}")))?;
    let (from, to, step) = window(query, now)?;
    let points = store.query(&expr, from, to, step).map_err(internal)?;
    let points: Vec<Value> = points.into_iter().map(|(t, v)| json!([t, v])).collect();
    Ok(json!({ "expr": text, "step": step, "from": from, "to": to, "points": points }))
}

fn histogram_answer(query: &HashMap<String, String>, store: &store::Store, now: i64) -> Result<Value, Failure> {
    let (name, selector) = selector(query)?;
    let from = params::time("from", query.get("from").map(String::as_str), "-1h", now)?;
    let to = params::time("to", query.get("to").map(String::as_str), "now", now)?;
    params::range(from, to, (to - from).max(1))?;
    let row = store.merged(&selector, from, to).map_err(internal)?;
    let empty = circllhist::Histogram::new();
    let hist = row.as_ref().and_then(|r| r.hist.as_ref()).unwrap_or(&empty);
    let number = |value: Option<f64>| value.filter(|v| v.is_finite()).map_or(Value::Null, |v| json!(v));
    Ok(json!({
        "name": name, "from": from, "to": to,
        "count": row.as_ref().map_or(0.0, |r| if r.count.is_nan() { 0.0 } else { r.count }),
        "sum": number(row.as_ref().map(|r| r.sum)),
        "min": number(row.as_ref().map(|r| r.min)),
        "max": number(row.as_ref().map(|r| r.max)),
        "bins": bins_json(hist),
        "circllhist": hist.to_base64(),
    }))
}

fn heatmap_answer(query: &HashMap<String, String>, store: &store::Store, now: i64) -> Result<Value, Failure> {
    let (name, selector) = selector(query)?;
    let (from, to, step) = window(query, now)?;
    let steps = store.timer_steps(&selector, from, to, step).map_err(internal)?;
    let steps: Vec<Value> = steps
        .into_iter()
        .filter_map(|(t, row)| Some(json!({ "t": t, "bins": bins_json(row?.hist.as_ref()?) })))
        .collect();
    Ok(json!({ "name": name, "from": from, "to": to, "step": step, "steps": steps }))
}

/// The `name` parameter and the selector it spells.
fn selector(query: &HashMap<String, String>) -> Result<(String, store::Selector), Failure> {
    let name = required(query, "name")?;
    let selector =
        store::parse_selector(&name).map_err(|e| Failure(StatusCode::BAD_REQUEST, format!("parameter `name`: {e}")))?;
    Ok((name, selector))
}

/// A histogram's bins as `[[lower, upper, count]]`, as every answer writes them.
pub(super) fn bins_json(histogram: &circllhist::Histogram) -> Vec<Value> {
    store::bins_of(histogram).into_iter().map(|(lower, upper, count)| json!([lower, upper, count])).collect()
}

fn required(query: &HashMap<String, String>, name: &'static str) -> Result<String, Failure> {
    query
        .get(name)
        .filter(|v| !v.trim().is_empty())
        .cloned()
        .ok_or_else(|| BadParameter { name, message: "is required".to_string() }.into())
}

/// `from`, `to` and `step`, checked.
fn window(query: &HashMap<String, String>, now: i64) -> Result<(i64, i64, i64), Failure> {
    let from = params::time("from", query.get("from").map(String::as_str), "-1h", now)?;
    let to = params::time("to", query.get("to").map(String::as_str), "now", now)?;
    let step = params::step(query.get("step").map(String::as_str), from, to)?;
    params::range(from, to, step)?;
    Ok((from, to, step))
}

fn internal(error: store::StoreError) -> Failure {
    Failure(StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
}

/// Runs `work` with the reading connection on the blocking pool, opening it first if needed.
async fn with_store(
    state: Arc<HttpState>,
    work: impl FnOnce(&store::Store) -> Result<Value, Failure> + Send + 'static,
) -> Answer {
    let joined = tokio::task::spawn_blocking(move || {
        let Some(path) = &state.database else {
            return Err(Failure(
                StatusCode::SERVICE_UNAVAILABLE,
                "the store backend is not enabled (add \"store\" to backends)".to_string(),
            ));
        };
        let mut reader = lock(&state.reader);
        if reader.is_none() {
            *reader = Some(store::Store::open_reader(path).map_err(internal)?);
        }
        let store = reader.as_mut().unwrap_or_else(|| unreachable!("opened above"));
        store.load_series().map_err(internal)?;
        work(store)
    })
    .await;
    match joined {
        Ok(result) => result.map(Json),
        Err(error) => Err(Failure(StatusCode::INTERNAL_SERVER_ERROR, format!("query failed: {error}"))),
    }
}
