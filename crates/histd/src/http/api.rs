//! The handlers. Store reads run on the blocking pool with the one reading connection.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::{json, Value};

use super::failure::Failure;
use super::{series, HttpState};
use crate::clock::{lock, unix_now_s};
use crate::contract::{
    self, finite, BadLineExample, Forgotten, HeatmapRequest, HeatmapResult, HeatmapStep, HistogramRequest,
    HistogramResult, QueryRequest, QueryResult, SeriesList, SeriesRequest,
};
use crate::query_params::{self as params, BadParameter};
use crate::telemetry::budgets::BudgetState;
use crate::telemetry::SinkTelemetry;

type Params = Query<HashMap<String, String>>;

use axum::extract::RawQuery;

/// An answer or an error, as JSON.
type Answer = Result<Json<Value>, Failure>;

/// `GET /health`: up, degraded (a Kafka partition held at a batch this histd cannot decode, or
/// a Kafka global whose lag grows without bound; still 200) or down (503), the counters of every stage, the sinks' telemetry, the budgets,
/// the config in force, the latest bad lines, damaged store blocks and unreadable Kafka
/// batches; any token opens it.
pub async fn health(State(state): State<Arc<HttpState>>) -> Response {
    let up = state.admin.healthy.load(Ordering::Relaxed);
    let (totals, timers_over_sample_limit, budgets) = {
        let aggregator = state.admin.aggregation.current();
        (aggregator.totals().clone(), aggregator.timers_over_sample_limit(), BudgetState::of(&aggregator))
    };
    // A Kafka partition held at a batch this histd cannot decode: up, but not whole.
    let unreadable = state.global.unreadable();
    let kafka = state.global.standing();
    let behind = kafka.as_ref().is_some_and(|kafka| kafka.falling_behind);
    let status = match (up, unreadable.held.is_empty() && !behind) {
        (false, _) => "down",
        (true, false) => "degraded",
        (true, true) => "up",
    };
    let body = json!({
        "status": status,
        "uptime_s": unix_now_s().saturating_sub(state.admin.started_unix_s),
        "packets_received": totals.packets,
        "metrics_received": totals.lines,
        "bad_lines": totals.bad_lines(),
        "kernel_drops": totals.kernel_drops,
        "truncated_datagrams": totals.truncated_datagrams,
        "timers_over_sample_limit": timers_over_sample_limit,
        "edges": state.admin.edges.entries().into_iter().map(|(name, count)| (name.to_string(), json!(count))).collect::<serde_json::Map<_, _>>(),
        "sinks": sinks_map(&state.admin.sinks.telemetry()),
        "sink_last_errors": sink_last_errors(&state.admin.sinks.telemetry()),
        "budgets": budgets.contract(),
        "config": state.admin.config.json(),
        "bad_line_examples": bad_line_examples(&totals.bad_examples),
        "store_corrupt_blocks": damaged_blocks(&state),
        "store_damage_record": state.store().map(|open| open.control.unacknowledged_damage().iter().map(ToString::to_string).collect::<Vec<_>>()).unwrap_or_default(),
        "kafka_unreadable_batches": unreadable,
        "kafka": kafka,
    });
    let status = if up { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, Json(body)).into_response()
}

/// The stored blocks found damaged: `[{"resolution", "group", "start", "span_s", "reason"}]`.
fn damaged_blocks(state: &HttpState) -> Value {
    let blocks = lock(&state.damaged_blocks);
    let resolution = |r: store::Resolution| format!("{r:?}").to_lowercase();
    blocks
        .latest()
        .map(|b| json!({ "resolution": resolution(b.resolution), "group": b.grp, "start": b.start, "span_s": b.resolution.block_span(), "reason": b.reason }))
        .collect()
}

/// The last rejected line of each reason: `{reason: {"line", "source", "unix_s"}}`.
pub(super) fn bad_line_examples(examples: &agg::bad_line::BadLines) -> BTreeMap<String, BadLineExample> {
    examples
        .iter()
        .map(|(reason, line)| {
            let source = line.source.map(|ip| ip.to_string());
            let example = BadLineExample { line: line.text().to_string(), source, unix_s: line.unix_s };
            (reason.as_str().to_string(), example)
        })
        .collect()
}

/// Each sink's telemetry under its name, as the `stats` reply has it (histd's names only:
/// Etsy's spellings of the same values are for `stats`).
pub(super) fn sinks_map(sinks: &[Arc<SinkTelemetry>]) -> BTreeMap<String, BTreeMap<String, f64>> {
    let now = unix_now_s();
    sinks.iter().map(|sink| (sink.sink.to_string(), sink.histd_entries(now).into_iter().collect())).collect()
}

/// Why each sink that failed last failed: `{sink: reason}`.
pub(super) fn sink_last_errors(sinks: &[Arc<SinkTelemetry>]) -> BTreeMap<String, String> {
    sinks.iter().filter_map(|sink| Some((sink.sink.to_string(), sink.last_error()?))).collect()
}

/// `GET /api/v1/alerts`: every alert rule, its state and value.
pub async fn alerts(State(state): State<Arc<HttpState>>) -> Json<contract::Alerts> {
    Json(state.alerts.as_ref().map(|alerts| alerts.view()).unwrap_or_default())
}

/// `GET /api/v1/budgets`: the cardinality budgets, what each holds and what was folded.
pub async fn budgets(State(state): State<Arc<HttpState>>) -> Json<contract::Budgets> {
    let budgets = BudgetState::of(&state.admin.aggregation.current());
    Json(budgets.contract())
}

/// `GET /api/v1/openapi.json`: the API's description (compiled in).
pub async fn openapi() -> Response {
    ([("content-type", "application/json")], contract::OPENAPI).into_response()
}

/// `GET /api/v1/series`: the stored series, filtered and grouped by name.
pub async fn series(
    State(state): State<Arc<HttpState>>,
    Query(query): Params,
    raw: RawQuery,
) -> Result<Response, Failure> {
    group_or_store_route(Route::Series, state, query, raw).await
}

/// `GET /api/v1/histogram`: the merged histogram of a timer over a range, its bins and totals.
pub async fn histogram(
    State(state): State<Arc<HttpState>>,
    Query(query): Params,
    raw: RawQuery,
) -> Result<Response, Failure> {
    group_or_store_route(Route::Histogram, state, query, raw).await
}

/// `GET /api/v1/heatmap`: a timer's histogram per step over a range (the page's heatmap).
pub async fn heatmap(
    State(state): State<Arc<HttpState>>,
    Query(query): Params,
    raw: RawQuery,
) -> Result<Response, Failure> {
    group_or_store_route(Route::Heatmap, state, query, raw).await
}

/// A store route answered for the whole group when this global has peers (`global.peers`,
/// global/peers.rs) and the request is not a peer's (`local=1`); else by this histd alone.
async fn group_or_store_route(
    route: Route,
    state: Arc<HttpState>,
    query: HashMap<String, String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, Failure> {
    use crate::global::peers::{merge_answers, merge_heatmap, merge_histogram, merge_series, LOCAL_ONLY};
    let Some(peers) = state.global.peers().filter(|_| !query.contains_key(LOCAL_ONLY)) else {
        return store_route(route, state, query).await;
    };
    let context = Context::of(&state);
    let series_limit = super::series::limit_asked(&query, context.limits.max_series)?;
    let local = with_store(state, move |store| answer(route, &query, store, &context)).await?;
    let path = match route {
        Route::Series => "/api/v1/series",
        Route::Histogram => "/api/v1/histogram",
        Route::Heatmap => "/api/v1/heatmap",
        Route::Query => unreachable!("the query route is answered by this global alone"),
    };
    let answers = peers.ask(path, raw.as_deref().unwrap_or("")).await;
    let (mut merged, members) = match local {
        StoreAnswer::Histogram(mut local) => {
            let members = merge_answers(&mut local, answers, merge_histogram);
            (serde_json::to_value(local), members)
        }
        StoreAnswer::Heatmap(mut local) => {
            let members = merge_answers(&mut local, answers, merge_heatmap);
            (serde_json::to_value(local), members)
        }
        StoreAnswer::Series(mut local) => {
            let members = merge_answers(&mut local, answers, merge_series);
            crate::global::peers::cut_series(&mut local, series_limit);
            (serde_json::to_value(local), members)
        }
        StoreAnswer::Query(local) => (serde_json::to_value(local), Vec::new()),
    };
    let merged = merged.as_mut().map_err(|_| Failure::internal("an answer did not serialise"))?;
    merged["partial"] = json!(members.iter().any(|member| !member.answered));
    merged["members"] = json!(members);
    Ok(Json(merged.take()).into_response())
}

/// A store route's [`answer`], read and written out as JSON on the blocking pool: what waits
/// to be sent is its bytes, not the tree of values they were made from (a listing of 100,000
/// series is ~8 MB of text and many times that as values).
pub(super) async fn store_route(
    route: Route,
    state: Arc<HttpState>,
    query: HashMap<String, String>,
) -> Result<Response, Failure> {
    let context = Context::of(&state);
    let edges = state.admin.edges.clone();
    let answered = with_store(state, move |store| {
        let answer = answer(route, &query, store, &context)?;
        Ok(json_bytes(&answer))
    })
    .await;
    if answered.as_ref().is_err_and(|failure| failure.status() == StatusCode::BAD_REQUEST.as_u16()) {
        edges.refused_api_requests.add(1);
    }
    answered.map(|bytes| {
        give_back_after(bytes.len());
        ([(header::CONTENT_TYPE, "application/json")], bytes).into_response()
    })
}

/// An answer as JSON text.
pub(super) fn json_bytes(answer: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(answer).unwrap_or_else(|_| unreachable!("an answer always serialises: string keys only"))
}

/// After an answer of `bytes`: once the answers built since the last time reach
/// [`GIVE_BACK_AFTER_BYTES`], the allocator is asked (on the blocking pool, at most once a
/// second) to return what they freed to the system. glibc keeps a blocking thread's freed
/// memory in that thread's arena: after 50 listings of 100,000 series at once, gigabytes stayed
/// resident while histd was idle (probe N13).
pub(super) fn give_back_after(bytes: usize) {
    use std::sync::atomic::{AtomicU64, AtomicUsize};
    static BUILT: AtomicUsize = AtomicUsize::new(0);
    static LAST_S: AtomicU64 = AtomicU64::new(0);
    if BUILT.fetch_add(bytes, Ordering::Relaxed) + bytes < GIVE_BACK_AFTER_BYTES {
        return;
    }
    // Again at the next flushes, once the answers still in flight have been sent.
    crate::flush::TRIM_FLUSHES.store(crate::flush::TRIM_FLUSHES_AFTER_ANSWERS, Ordering::Relaxed);
    let now = unix_now_s();
    if LAST_S.swap(now, Ordering::Relaxed) == now {
        return;
    }
    BUILT.store(0, Ordering::Relaxed);
    tokio::task::spawn_blocking(|| {
        // Give the answers in flight a moment to be sent and freed.
        std::thread::sleep(std::time::Duration::from_millis(200));
        crate::malloc::return_freed_memory();
    });
}

/// Answers built, in bytes, after which freed memory is given back.
const GIVE_BACK_AFTER_BYTES: usize = 16 << 20;

/// `DELETE /api/v1/series`: the series picked (the list's filters) are deleted from the
/// aggregator (so an idle one is not flushed again) and then from the store, by its writer.
/// An admin route: refused by the guard from another web origin or through a host name not
/// this histd's (a page of another site, or a name rebound to this machine, cannot do it).
pub async fn forget(State(state): State<Arc<HttpState>>, Query(query): Params) -> Result<Json<Forgotten>, Failure> {
    let Some(control) = state.store_control() else { return Err(store_off()) };
    let prefix = state.prefix_stats.clone();
    let keys = with_store(state.clone(), move |store| series::to_forget(&query, store, &prefix)).await?;
    if keys.is_empty() {
        return Err(Failure::new(StatusCode::NOT_FOUND, "no stored series is picked: nothing forgotten"));
    }
    let aggregator_keys = series::forget_in_aggregator(&state.admin, &keys);
    let forgotten = control.forget(keys.clone()).await.map_err(|error| Failure::internal(&error))?;
    let listed: Vec<String> = keys.iter().take(100).map(ToString::to_string).collect();
    Ok(Json(Forgotten {
        forgotten: forgotten.series as u64,
        points: forgotten.points,
        aggregator_keys: aggregator_keys as u64,
        series_truncated: keys.len() > listed.len(),
        series: listed,
    }))
}

/// `POST /-/reload`: the config file read again and applied ([`crate::reload`]).
pub async fn reload(State(state): State<Arc<HttpState>>) -> Answer {
    let Some(reloader) = &state.reloader else {
        return Err(Failure::new(StatusCode::SERVICE_UNAVAILABLE, "started without a config source"));
    };
    match reloader.reload().await {
        Ok(outcome) => Ok(Json(json!({
            "applied": outcome.applied,
            "needs_restart": outcome.needs_restart,
            "changes": outcome.changes,
        }))),
        Err(error) => Err(Failure::new(StatusCode::BAD_REQUEST, &format!("the config in force is unchanged: {error}"))),
    }
}

/// What answers need besides their parameters and the store.
#[derive(Debug, Clone)]
pub struct Context {
    /// Unix seconds.
    pub now: i64,
    /// `prefixStats` (histd's own series are under it).
    pub prefix_stats: String,
    /// What one query may ask for.
    pub limits: params::QueryLimits,
}

impl Context {
    /// The context of a request to `state` now.
    pub(super) fn of(state: &HttpState) -> Context {
        Context { now: unix_now_s() as i64, prefix_stats: state.prefix_stats.clone(), limits: state.query_limits }
    }
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

/// One store route's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum StoreAnswer {
    /// `/api/v1/series`.
    Series(SeriesList),
    /// `/api/v1/query`.
    Query(QueryResult),
    /// `/api/v1/histogram`.
    Histogram(HistogramResult),
    /// `/api/v1/heatmap`.
    Heatmap(HeatmapResult),
}

/// The answer to one store request: its parameters read and checked (errors name the
/// parameter, status 400), then the store read. Every handler runs this; so does the fuzz
/// target for the HTTP parameters.
pub fn answer(
    route: Route,
    query: &HashMap<String, String>,
    store: &store::Store,
    context: &Context,
) -> Result<StoreAnswer, Failure> {
    let now = context.now;
    let limits = context.limits;
    Ok(match route {
        Route::Series => {
            let request = SeriesRequest::from_query(query, limits.max_series)?;
            StoreAnswer::Series(series::list(&request, store, &context.prefix_stats, limits.max_series)?)
        }
        Route::Query => {
            StoreAnswer::Query(query_answer(QueryRequest::from_query(query, now, limits.max_steps)?, store)?)
        }
        Route::Histogram => StoreAnswer::Histogram(histogram_answer(HistogramRequest::from_query(query, now)?, store)?),
        Route::Heatmap => {
            StoreAnswer::Heatmap(heatmap_answer(HeatmapRequest::from_query(query, now, limits.max_steps)?, store)?)
        }
    })
}

fn query_answer(request: QueryRequest, store: &store::Store) -> Result<QueryResult, Failure> {
    let bad_expr = |e: &dyn std::fmt::Display| BadParameter { name: "expr", message: e.to_string() };
    let expr = store::parse(&request.expr).map_err(|e| bad_expr(&e))?;
    store.check_types(&expr).map_err(|e| bad_expr(&e))?;
    let QueryRequest { expr: text, from, to, step } = request;
    let points = store.query(&expr, from, to, step).map_err(internal)?;
    let points = points.into_iter().map(|(t, v)| (t, finite(v))).collect();
    Ok(QueryResult { expr: text, step, from, to, points, ..QueryResult::default() })
}

fn histogram_answer(request: HistogramRequest, store: &store::Store) -> Result<HistogramResult, Failure> {
    let HistogramRequest { name, selector, from, to } = request;
    let row = store.merged(&selector, from, to).map_err(internal)?;
    let empty = circllhist::Histogram::new();
    let hist = row.as_ref().and_then(|r| r.histogram.as_ref()).unwrap_or(&empty);
    let figure = |pick: fn(&store::Row) -> f64| row.as_ref().map(pick).and_then(finite);
    Ok(HistogramResult {
        name,
        from,
        to,
        count: row.as_ref().map_or(0.0, |r| if r.count.is_nan() { 0.0 } else { r.count }),
        sum: figure(|r| r.sum),
        min: figure(|r| r.min),
        max: figure(|r| r.max),
        bins: store::bins_of(hist),
        circllhist: hist.to_base64(),
    })
}

fn heatmap_answer(request: HeatmapRequest, store: &store::Store) -> Result<HeatmapResult, Failure> {
    let HeatmapRequest { name, selector, from, to, step } = request;
    let steps = store.timer_steps(&selector, from, to, step).map_err(internal)?;
    let steps = steps
        .into_iter()
        .filter_map(|(t, row)| Some(HeatmapStep { t, bins: store::bins_of(row?.histogram.as_ref()?) }))
        .collect();
    Ok(HeatmapResult { name, from, to, step, steps })
}

/// A store error as an answer: a 503 when the file is damaged (the writer salvages it), else a
/// 500.
pub(super) fn internal(error: store::StoreError) -> Failure {
    match error.is_damaged_file() {
        true => damaged_store(&error),
        false => Failure::new(StatusCode::INTERNAL_SERVER_ERROR, &error.to_string()),
    }
}

/// The answer when the store backend is off.
fn store_off() -> Failure {
    Failure::new(StatusCode::SERVICE_UNAVAILABLE, "the store backend is not enabled (add \"store\" to backends)")
}

/// Runs `work` with the reading connection on the blocking pool, opening it first if needed.
/// When SQLite finds the file damaged, the connection is closed, the writer is asked to check
/// the file (and salvage it), and the answer is a 503 to ask again.
pub(super) async fn with_store<T: Send + 'static>(
    state: Arc<HttpState>,
    work: impl FnOnce(&store::Store) -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    let joined = tokio::task::spawn_blocking(move || {
        let Some(open) = state.store() else { return Err(store_off()) };
        let mut reader = lock(&open.reader);
        let answer = match reader.as_mut() {
            Some(store) => read_with(store, work),
            None => match store::Store::open_reader(&open.database) {
                Ok(store) => read_with(reader.insert(store), work),
                Err(error) => Err(error),
            },
        };
        let answer = answer.unwrap_or_else(|error| Err(internal(error)));
        if answer.as_ref().is_err_and(|failure| failure.status() == StatusCode::SERVICE_UNAVAILABLE.as_u16()) {
            *reader = None;
            open.control.check_damage();
        }
        if let Some(store) = reader.as_mut() {
            open.control.record_damage(state.note_damaged(store.take_damaged()));
            let rows = store.take_damaged_rows();
            if !rows.is_empty() {
                state.note_damaged_rows(&rows);
                open.control.check_damage();
            }
        }
        answer
    })
    .await;
    match joined {
        Ok(result) => result,
        Err(error) => Err(Failure::new(StatusCode::INTERNAL_SERVER_ERROR, &format!("query failed: {error}"))),
    }
}

/// `work` on `store`, its series loaded first; a store error apart, so that damage is seen.
fn read_with<T>(
    store: &mut store::Store,
    work: impl FnOnce(&store::Store) -> Result<T, Failure>,
) -> Result<Result<T, Failure>, store::StoreError> {
    store.load_series()?;
    let answer = work(store);
    Ok(answer)
}

/// The answer while the store file is found damaged: the writer salvages it.
fn damaged_store(error: &store::StoreError) -> Failure {
    let message = format!(
        "the store file is damaged ({error}): histd is checking it and salvages what can be read (store_damaged_files_set_aside); ask again shortly"
    );
    Failure::new(StatusCode::SERVICE_UNAVAILABLE, &message)
}
