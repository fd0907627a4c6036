//! The HTTP API (axum), JSON, on `http_address:http_port` (default 127.0.0.1:8127).
//!
//! | route | parameters | answer |
//! |---|---|---|
//! | `GET /health` | | `{"status", "uptime_s", "packets_received", "metrics_received", "bad_lines", "kernel_drops", "truncated_datagrams", "edges": {counter: n}, "sinks": {sink: {counter: n}}, "config": {"file", "loaded_unix_s"}, "bad_line_examples": {reason: {"line", "source", "unix_s"}}}`; 503 when `health down` |
//! | `GET /api/v1/alerts` | | `{"alerts": [{"name", "expr", "over_s", "for_s", "comparison", "threshold", "state", "value", "since", "firing_since", "resolved_at", "evaluated_at", "summary", "labels", "url"}], "firing"}`: every alert rule, evaluated after each flush (`state`: inactive, pending, firing) |
//! | `GET /api/v1/budgets` | | `{"series": {type: n}, "max_series": {type: n}, "max_series_per_name", "max_tag_values", "max_set_members", "names_at_series_per_name": {type: n}, "folded_series": {reason: n}, "sets_sketched", "idle_expired": {type: n}, "offenders": [{"pattern", "new_series_per_second", "new_series", "folded"}]}`: the cardinality budgets (also under `budgets` in `/health`) |
//! | `GET /api/v1/series` | `match` (glob on the name, default `*`, at most 1024 bytes), `contains` (text of `name{tags}`, any case), `name` (a selector; `exact=1`: its tags exactly), `type`, `origin` (`user,histd,bench`), `group=name`, `limit` (default 5000, at most 100000) | `{"series": [{"name", "tags", "type", "origin"}], "total", "truncated", "origins": {origin: n}}`: the first `limit` by name; with `group=name` an entry per name and type with `tag_sets` instead of `tags` |
//! | `DELETE /api/v1/series` | the same filters, at least one (`match=*` for all) | `{"forgotten", "points", "aggregator_keys", "series", "series_truncated"}`: the series deleted from the aggregator and every resolution of the store; 404 when none is picked, 403 from another web origin or host name |
//! | `GET /api/v1/query` | `expr`, `from` (`-1h`), `to` (`now`), `step` (fits ~240 steps) | `{"expr", "step", "points": [[unix_s, value]]}`; with `global.peers`, the group's answer with `"partial"` and `"members"` (`local=1`: this histd's alone; `rows=1`: the merged row of each step, what peers send) |
//! | `GET /api/v1/histogram` | `name` (with `{tags}`), `from`, `to` | `{"name", "from", "to", "count", "sum", "min", "max", "bins": [[lower, upper, count]], "circllhist"}` |
//! | `GET /api/v1/heatmap` | `name`, `from`, `to`, `step` | `{"name", "step", "steps": [{"t", "bins": [[lower, upper, count]]}]}` |
//! | `GET /api/v1/live` | `limit` (50, at most 1000), `sort` (`rate`, `value`, `p50`, `p99`, `above`, `name`), `match` (a regex on the series key), `threshold`, `tables=1` (add the cardinality and prefix tables), `keys` (exact series keys, one per line) | `{"now_ms", "uptime_s", "interval", "totals", "receive_buffer_bytes", "receive_queue_bytes", "flush_lag_s", "rss_bytes", "flushes", "last_flush_duration_ms", "store_bytes", "series_count", "sinks", "alerts": [{"name", "state", "summary"}], "series": [{"name", "type", "value", "rate", "p50", "p99", "at_or_above", "bins"}], "matched", "truncated", "cardinality", "prefixes"}`: the current interval so far (`histd top` polls it) |
//! | `GET /api/v1/openapi.json` | | this table as OpenAPI 3 |
//! | `GET /` and `GET /ui/...` | the page's state is in its URL | the web UI (files embedded in the binary) |
//! | `POST /api/v1/forward` | a snappy-compressed forward batch (docs/forward-format.md), `Content-Type: application/x-histd-forward`, `Content-Encoding: snappy` | `{"merged", "duplicate"}`; 503 unless `global.accept` (the body unread), 503 with `Retry-After` past `global.maxBytesInFlight` or `global.maxLateIntervals`, 400 for a malformed batch or an unbelievable interval, 413 past `global.maxBatchBytes`, 415 for another type or encoding, 408 past `httpBodyTimeoutMs` |
//! | `GET /metrics` | `Accept` picks text 0.0.4 or OpenMetrics 1.0 | histd's own metrics; with the prometheus backend, every series |
//! | `POST /-/reload` | | reads the config file again and applies it: `{"applied": [key], "needs_restart": [key]}`; 400 naming the bad key when the file is invalid (the old config runs on); 403 from another web origin or host name |
//! | `POST /-/clear` | | the prometheus backend forgets its cumulative series (404 when it is off; 403 from another web origin or host name) |
//! | `POST /-/sign-in`, `POST /-/sign-out` | a form with `token` | a browser's session opened with a read token (303 to `/` with a session cookie; the form again, 401, for a wrong token) or ended (session.rs) |
//!
//! Every request passes `guard.rs` first: its `Host` must be an address, `localhost` or a name
//! in `http.hostnames`; a route's role (read, write, admin) may need a token; write and admin
//! requests from another web origin are refused (403, 401 without a needed token).
//!
//! Errors are `{"error": "..."}` naming the bad parameter, with status 400; an unknown series is
//! an empty result, not an error. Times are unix seconds or relative (`now`, `-1h`, `now-15m`),
//! steps durations (`10s`, `1m`, `1h`, `1d`). A range `[from, to)` holds the flushes stored at
//! `from ≤ t < to` and nothing else; steps are aligned to multiples of `step`, the first and
//! last clipped to the range (the rule is `store::range`'s, the same for every route).

mod api;

mod failure;
mod forward;
mod group_live;
mod group_query;
pub mod guard;
pub(crate) mod live;
mod metrics;
mod refusal;
pub mod series;
pub mod session;
mod ui;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::accept::{AcceptFailures, AddressSlots, ConnectionSlots, Waiters};
use crate::admin::AdminState;
use crate::telemetry::EdgeCounters;

pub use crate::query_params::QueryLimits;
pub use api::{answer, Context, Route, StoreAnswer};
pub use failure::Failure;
pub use metrics::AnswerBudget;

/// What `POST /-/reload` asks of the daemon (its reloader, reload.rs, a layer above this one).
pub trait Reload: Send + Sync {
    /// Reads the config again and applies what changed: what did, or why nothing did.
    fn reload(&self)
        -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<ReloadOutcome, String>> + Send + '_>>;
}

pub use crate::contract::ReloadOutcome;

/// What the handlers read.
pub struct HttpState {
    /// Reloads the config (`POST /-/reload`); `None` when started without a config source.
    pub reloader: Option<Arc<dyn Reload>>,
    /// `prefixStats`: series under it are histd's own (the series list folds them).
    pub prefix_stats: String,
    /// The metric listeners (the live view reads their UDP receive queues).
    pub ingress: Arc<crate::ingest::Ingress>,
    /// The alert rules at work, when the config has some.
    pub alerts: Option<Arc<crate::alerts::Alerts>>,
    /// Where forwarded batches are merged (`global.accept`).
    pub global: Arc<crate::global::Global>,
    /// Counters and health, shared with the management interface.
    pub admin: Arc<AdminState>,
    /// What one query may ask for (`queryMaxSteps`, `queryMaxSeries`).
    pub query_limits: QueryLimits,
    /// Who may ask what (`http.*`): hosts, origins, tokens per role.
    pub guard: Arc<crate::access::Guard>,
    /// How long a request's body may take (`httpBodyTimeoutMs`).
    pub body_timeout: Duration,
    /// What `/metrics` answers not yet taken hold (`httpAnswerBytes`).
    pub answers: Arc<metrics::AnswerBudget>,
    /// The connections a new one may displace when every slot is taken: silent before their
    /// first request or through their TLS handshake, or a forwarded body still arriving.
    pub waiters: Arc<Waiters>,
    /// Stored blocks the readers found damaged (left out of the answers that met them), each
    /// once, the latest [`DAMAGED_BLOCKS_SHOWN`] kept for `/health`.
    pub damaged_blocks: Mutex<crate::sinks::store::DamagedBlocks>,
    /// Browsers signed in with a read token (session.rs).
    pub sessions: session::Sessions,
    /// The port serves HTTPS (session cookies are then `Secure`).
    pub over_tls: bool,
}

/// Damaged blocks `/health` names (the count in `messages.store_corrupt_blocks` has them all).
pub const DAMAGED_BLOCKS_SHOWN: usize = 32;

impl HttpState {
    /// Takes note of the blocks a read found damaged: each new one is logged once, counted
    /// (`store_corrupt_blocks`), and named in `/health`; the new ones are returned (for the
    /// store's record of damage).
    pub fn note_damaged(&self, found: Vec<store::DamagedBlock>) -> Vec<store::DamagedBlock> {
        let mut known = crate::clock::lock(&self.damaged_blocks);
        let new: Vec<store::DamagedBlock> = found.into_iter().filter(|block| known.note(block.clone())).collect();
        self.admin.edges.store_corrupt_blocks.add(new.len() as u64);
        new
    }

    /// Takes note of the series and group rows a read found damaged: counted
    /// (`store_damaged_rows`) and logged; the caller asks the writer to check the file, which
    /// salvages it.
    pub fn note_damaged_rows(&self, rows: &[store::DamagedRow]) {
        self.admin.edges.store_damaged_rows.add(rows.len() as u64);
        let rows = rows.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
        tracing::error!(
            %rows,
            "store: rows do not match their checksums: a series row's points are left out of every answer, a group row's series are answered from raw rows; the file is checked and salvaged (store_damaged_rows)"
        );
    }

    /// The store file, while the store backend runs.
    pub fn database(&self) -> Option<PathBuf> {
        self.admin.sinks.store().map(|open| open.database)
    }

    /// The running store: its file, its writer and the API's reading connection to it.
    pub fn store(&self) -> Option<crate::sinks::store::OpenStore> {
        self.admin.sinks.store()
    }

    /// The store's writer, which forgets series (`DELETE /api/v1/series`).
    pub fn store_control(&self) -> Option<crate::sinks::store::StoreControl> {
        self.admin.sinks.store().map(|open| open.control)
    }

    /// The prometheus backend's series, while it runs.
    pub fn prometheus(&self) -> Option<Arc<crate::sinks::prometheus::Exposed>> {
        self.admin.sinks.prometheus()
    }
}

/// The API's routes (each is in `openapi.json`; a test checks both ways).
const API_ROUTES: [&str; 10] = [
    "/health",
    "/api/v1/alerts",
    "/api/v1/budgets",
    "/api/v1/series",
    "/api/v1/query",
    "/api/v1/histogram",
    "/api/v1/heatmap",
    "/api/v1/openapi.json",
    "/api/v1/forward",
    "/api/v1/live",
];

/// The HTTP server's bounds (`httpMaxConnections`, `httpMaxConnectionsPerAddress`,
/// `httpHeaderTimeoutMs`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once; more are closed and counted (`refused_api_connections`).
    pub max_connections: usize,
    /// Connections open at once from one address (0: no cap); more are closed and counted
    /// (`refused_address_connections`).
    pub max_per_address: usize,
    /// How long a request's headers may take (`http_header_timeouts` counts the closes).
    pub header_timeout: Duration,
}

/// Serves until shutdown: HTTP/1.1, or HTTPS with `tls` (the handshake within the header
/// timeout, failures counted in `http_tls_failures`), at most `limits.max_connections` at once,
/// headers read within `limits.header_timeout` (a slow client cannot hold a connection open by
/// dribbling a request), EMFILE backed off as the other listeners do. At shutdown open
/// connections finish the request in hand.
pub async fn serve(
    listener: TcpListener,
    state: Arc<HttpState>,
    limits: Limits,
    tls: Option<Arc<crate::tls::ServerTls>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let edges = state.admin.edges.clone();
    let waiters = state.waiters.clone();
    let router = router(state);
    let slots = Arc::new(ConnectionSlots::new(limits.max_connections));
    let per_address = Arc::new(AddressSlots::new(limits.max_per_address));
    let mut connections = JoinSet::new();
    let mut failures = AcceptFailures::default();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    // One address cannot take every slot (issue 48): past its share, closed.
                    let Some(address_slot) = per_address.admit(peer.ip()) else {
                        edges.refused_address_connections.add(1);
                        continue;
                    };
                    // Every slot taken: the connection silent longest before its first request
                    // (no byte yet, or no TLS handshake) gives its slot to this one (P6).
                    let slot = match slots.try_admit() {
                        Some(slot) => Slot::Held(slot),
                        None if waiters.evict(DISPLACE_SILENT) => Slot::Displacing(slots.clone()),
                        None => {
                            edges.refused_api_connections.add(1);
                            continue;
                        }
                    };
                    let (router, edges, shutdown, tls) = (router.clone(), edges.clone(), shutdown.clone(), tls.clone());
                    let waiters = waiters.clone();
                    connections.spawn(async move {
                        let Some(slot) = slot.take(&edges).await else { return };
                        let Some(stream) = first_bytes(stream, &waiters, limits, &edges).await else { return };
                        match tls {
                            None => serve_connection(stream, router, &waiters, limits, edges, shutdown).await,
                            Some(tls) => serve_tls(stream, &tls, &waiters, router, limits, edges, shutdown).await,
                        }
                        drop((slot, address_slot));
                    });
                }
                Err(error) => failures.failed("http", &error).await,
            },
            // A finished connection's task is reaped at once: kept in the set until shutdown,
            // each held ~5 KB for the daemon's life (issue 48, P1).
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(Duration::from_secs(5), connections.join_all()).await;
}

/// How long a connection must have been silent before its first request, in its TLS
/// handshake, or reading its first request's head, before a new connection may take its slot
/// when every slot is taken.
const DISPLACE_SILENT: Duration = Duration::from_secs(1);

/// How long a connection that displaces a silent one waits for its slot.
const DISPLACE_WAIT: Duration = Duration::from_secs(1);

/// A new connection's slot: its own, or one a silent connection is giving up.
enum Slot {
    Held(tokio::sync::OwnedSemaphorePermit),
    Displacing(Arc<ConnectionSlots>),
}

impl Slot {
    async fn take(self, edges: &EdgeCounters) -> Option<tokio::sync::OwnedSemaphorePermit> {
        match self {
            Slot::Held(slot) => Some(slot),
            Slot::Displacing(slots) => slots.admit_within(DISPLACE_WAIT, &edges.refused_api_connections).await,
        }
    }
}

/// Waits (within the header timeout) for the connection's first byte, among the connections
/// a new one may displace; `None` when it was displaced, timed out or closed first.
async fn first_bytes(stream: TcpStream, waiters: &Waiters, limits: Limits, edges: &EdgeCounters) -> Option<TcpStream> {
    let waiting = waiters.wait();
    let mut byte = [0u8; 1];
    let first = tokio::time::timeout(limits.header_timeout, stream.peek(&mut byte));
    tokio::select! {
        ready = first => match ready {
            Ok(Ok(_)) => Some(stream),
            Ok(Err(_)) => None,
            Err(_) => {
                edges.http_header_timeouts.add(1);
                None
            }
        },
        _ = waiting.evicted.notified() => {
            edges.idle_closed_connections.add(1);
            None
        }
    }
}

/// The TLS handshake (displaced, when every slot is taken, if it has not completed within
/// [`DISPLACE_SILENT`]), then HTTP over it; the verified client certificate's name is put on
/// every request of the connection.
async fn serve_tls(
    stream: TcpStream,
    tls: &crate::tls::ServerTls,
    waiters: &Waiters,
    router: Router,
    limits: Limits,
    edges: Arc<EdgeCounters>,
    shutdown: watch::Receiver<bool>,
) {
    let waiting = waiters.wait();
    let handshake = tokio::time::timeout(limits.header_timeout, tls.acceptor().accept(stream));
    let handshake = tokio::select! {
        done = handshake => done,
        _ = waiting.evicted.notified() => {
            edges.idle_closed_connections.add(1);
            return;
        }
    };
    drop(waiting);
    let stream = match handshake {
        Ok(Ok(stream)) => stream,
        Ok(Err(_)) | Err(_) => {
            edges.http_tls_failures.add(1);
            return;
        }
    };
    // A certificate is a credential only by its subject's name: one without a readable CN
    // (all such would share one credential, and could claim each other's batches) counts as
    // none, and its requests need a token (issue 48, P13).
    let peer = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(|certificate| crate::tls::subject_common_name(certificate))
        .filter(|name| !name.trim().is_empty())
        .map(crate::access::PeerCertificate);
    let router = match peer {
        Some(peer) => router.layer(axum::Extension(peer)),
        None => router,
    };
    serve_connection(stream, router, waiters, limits, edges, shutdown).await;
}

fn router(state: Arc<HttpState>) -> Router {
    let [health, alerts, budgets, series, query, histogram, heatmap, openapi, forward, live] = API_ROUTES;
    Router::new()
        .route(health, get(api::health))
        .route(alerts, get(api::alerts))
        .route(budgets, get(api::budgets))
        .route(series, get(api::series).delete(api::forget))
        .route(query, get(group_query::query))
        .route(histogram, get(api::histogram))
        .route(heatmap, get(api::heatmap))
        .route(openapi, get(api::openapi))
        .route(forward, post(forward::receive))
        .route(live, get(group_live::live))
        .route("/metrics", get(metrics::metrics))
        .route("/-/clear", post(metrics::clear))
        .route("/-/reload", post(api::reload))
        .route(guard::SIGN_IN, post(session::sign_in))
        .route(guard::SIGN_OUT, post(session::sign_out))
        .route("/", get(ui::index))
        .route("/ui/{*file}", get(ui::file))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard::guard))
        .with_state(state)
}

/// HTTP/1.1 on `stream`: until its first request's head is read, the connection is among
/// those a new one may displace when every slot is taken (a client sending its headers a byte
/// at a time held its slot for `httpHeaderTimeoutMs`: the header slowloris of issue 48).
async fn serve_connection<I>(
    stream: I,
    router: Router,
    waiters: &Waiters,
    limits: Limits,
    edges: Arc<EdgeCounters>,
    mut shutdown: watch::Receiver<bool>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let first_request = Arc::new(tokio::sync::Notify::new());
    let heard = first_request.clone();
    let router = router.layer(axum::middleware::map_request(move |request: axum::extract::Request| {
        heard.notify_one();
        std::future::ready(request)
    }));
    let service = TowerToHyperService::new(router);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    let mut waiting = Some(waiters.wait());
    let evicted = waiting.as_ref().map(|waiting| waiting.evicted.clone()).unwrap_or_default();
    let result = loop {
        tokio::select! {
            result = connection.as_mut() => break result,
            _ = first_request.notified(), if waiting.is_some() => waiting = None,
            _ = evicted.notified(), if waiting.is_some() => {
                edges.idle_closed_connections.add(1);
                return;
            }
            _ = shutdown.changed() => {
                connection.as_mut().graceful_shutdown();
                break connection.await;
            }
        }
    };
    if result.is_err_and(|error| error.is_timeout()) {
        edges.http_header_timeouts.add(1);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_route_is_in_openapi_and_every_path_is_routed() {
        let spec: serde_json::Value = serde_json::from_str(crate::contract::OPENAPI).unwrap();
        let mut documented: Vec<&str> = spec["paths"].as_object().unwrap().keys().map(String::as_str).collect();
        let mut routed = super::API_ROUTES.to_vec();
        documented.sort_unstable();
        routed.sort_unstable();
        assert_eq!(routed, documented);
        let table = include_str!("mod.rs");
        for route in super::API_ROUTES {
            let listed = ["GET", "POST"].iter().any(|method| table.contains(&format!("| `{method} {route}` |")));
            assert!(listed, "{route} is missing from the route table");
        }
    }
}
