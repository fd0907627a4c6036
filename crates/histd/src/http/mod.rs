//! The HTTP API (axum), JSON, read only, on `http_address:http_port` (default 127.0.0.1:8127).
//!
//! | route | parameters | answer |
//! |---|---|---|
//! | `GET /health` | | `{"status", "uptime_s", "packets_received", "metrics_received", "bad_lines", "kernel_drops", "truncated_datagrams", "edges": {counter: n}, "sinks": {sink: {counter: n}}}`; 503 when `health down` |
//! | `GET /api/v1/series` | `match` (glob on the name, default `*`, at most 1024 bytes), `limit` (default 5000, at most 100000) | `{"series": [{"name", "tags", "type"}], "total", "truncated"}`: the first `limit` by name |
//! | `GET /api/v1/query` | `expr`, `from` (`-1h`), `to` (`now`), `step` (fits ~240 steps) | `{"expr", "step", "points": [[unix_s, value]]}` |
//! | `GET /api/v1/histogram` | `name` (with `{tags}`), `from`, `to` | `{"name", "from", "to", "count", "sum", "min", "max", "bins": [[lower, upper, count]], "circllhist"}` |
//! | `GET /api/v1/heatmap` | `name`, `from`, `to`, `step` | `{"name", "step", "steps": [{"t", "bins": [[lower, upper, count]]}]}` |
//! | `GET /api/v1/openapi.json` | | this table as OpenAPI 3 |
//! | `GET /` and `GET /ui/...` | the page's state is in its URL | the web UI (files embedded in the binary) |
//! | `GET /metrics` | `Accept` picks text 0.0.4 or OpenMetrics 1.0 | histd's own metrics; with the prometheus backend, every series |
//! | `POST /-/clear` | | the prometheus backend forgets its cumulative series (404 when it is off) |
//!
//! Errors are `{"error": "..."}` naming the bad parameter, with status 400; an unknown series is
//! an empty result, not an error. Times are unix seconds or relative (`now`, `-1h`, `now-15m`),
//! steps durations (`10s`, `1m`, `1h`, `1d`).

mod api;
mod metrics;
pub mod params;
mod ui;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::routing::{get, post};
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::admin::AdminState;

pub use api::{answer, Failure, Route};
pub use params::{step, time, BadParameter};

/// What the handlers read.
pub struct HttpState {
    /// The store file, when the store backend is on.
    pub database: Option<PathBuf>,
    /// A reading connection, opened on first use.
    pub reader: Mutex<Option<store::Store>>,
    /// The prometheus backend's series, when it is on.
    pub prometheus: Option<Arc<crate::sinks::prometheus::Exposed>>,
    /// Counters and health, shared with the management interface.
    pub admin: Arc<AdminState>,
}

/// The API's routes (each is in `openapi.json`; a test checks both ways).
const API_ROUTES: [&str; 6] =
    ["/health", "/api/v1/series", "/api/v1/query", "/api/v1/histogram", "/api/v1/heatmap", "/api/v1/openapi.json"];

/// Serves until shutdown.
pub async fn serve(listener: TcpListener, state: Arc<HttpState>, mut shutdown: watch::Receiver<bool>) {
    let [health, series, query, histogram, heatmap, openapi] = API_ROUTES;
    let router = Router::new()
        .route(health, get(api::health))
        .route(series, get(api::series))
        .route(query, get(api::query))
        .route(histogram, get(api::histogram))
        .route(heatmap, get(api::heatmap))
        .route(openapi, get(api::openapi))
        .route("/metrics", get(metrics::metrics))
        .route("/-/clear", post(metrics::clear))
        .route("/", get(ui::index))
        .route("/ui/{*file}", get(ui::file))
        .with_state(state);
    let stopped = async move {
        let _ = shutdown.changed().await;
    };
    if let Err(error) = axum::serve(listener, router).with_graceful_shutdown(stopped).await {
        tracing::error!(%error, "http server failed");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_route_is_in_openapi_and_every_path_is_routed() {
        let spec: serde_json::Value = serde_json::from_str(include_str!("openapi.json")).unwrap();
        let mut documented: Vec<&str> = spec["paths"].as_object().unwrap().keys().map(String::as_str).collect();
        let mut routed = super::API_ROUTES.to_vec();
        documented.sort_unstable();
        routed.sort_unstable();
        assert_eq!(routed, documented);
        let table = include_str!("mod.rs");
        for route in super::API_ROUTES {
            assert!(table.contains(&format!("| `GET {route}` |")), "{route} is missing from the route table");
        }
    }
}
