//! The running daemon: bind every listener, start sinks, readers, the management interface
//! and the flusher; on shutdown stop the edges, drain what was received, flush one last time
//! to every sink, and wait for them to deliver.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::accept::ConnectionSlots;
use crate::admin::{self, AdminState, ConfigInForce};
use crate::aggregation::Aggregation;
use crate::alerts::Alerts;
use crate::backends::Roster;
use crate::clock::unix_now_ms;
use crate::config::Config;
use crate::flush::{Flusher, Outlets};
use crate::global::Global;
use crate::http::{self, HttpState};
pub use crate::ingest::Listening;
use crate::ingest::{Ingress, PendingBudget, StreamContext, TapSwitch};
use crate::reload::{ConfigSource, ReloadOutcome, Reloader};
use crate::telemetry::EdgeCounters;

/// Every address a running daemon is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    /// The metric listeners at start ([`Running::listening`] after a reload).
    pub listening: Listening,
    /// The management interface.
    pub mgmt: SocketAddr,
    /// The HTTP API, when it is served (`HttpPort::serve`).
    pub http: Option<SocketAddr>,
}

/// A daemon running on the current tokio runtime: its addresses, and the way to stop it.
#[derive(Debug)]
pub struct Running {
    /// Where it listens.
    pub bound: Bound,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    reloader: Option<Arc<Reloader>>,
    ingress: Arc<Ingress>,
}

impl Running {
    /// Reads the config again and applies it ([`crate::reload`]); an error when started
    /// without a config source or when the new config is invalid (the old one runs on).
    pub async fn reload(&self) -> Result<ReloadOutcome, String> {
        match &self.reloader {
            Some(reloader) => reloader.reload().await,
            None => Err("started without a config source: nothing to reload".to_string()),
        }
    }

    /// Where the metric listeners are bound now (reloads open and close them).
    pub fn listening(&self) -> Listening {
        self.ingress.listening()
    }

    /// Stops it as SIGTERM does (stop listening, drain, one final flush to every sink, wait for
    /// the sinks within their grace) and waits until it has.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        if let Err(error) = self.task.await {
            tracing::error!(%error, "the daemon's task failed");
        }
    }
}

/// Binds every listener, starts sinks, readers, the management interface, the HTTP API and
/// the flusher, and returns once histd is ready: every address is bound and accepting.
pub async fn start(config: Config) -> anyhow::Result<Running> {
    start_reloadable(config, None).await
}

/// As [`start`]; with a `source`, the config can be reloaded from it ([`Running::reload`],
/// `POST /-/reload`).
pub async fn start_reloadable(config: Config, source: Option<ConfigSource>) -> anyhow::Result<Running> {
    let startup_s = (unix_now_ms() + 500) / 1000;
    let edge_counters = Arc::new(EdgeCounters::default());
    let aggregation = Arc::new(Aggregation::new(config.agg.clone()));
    let tap = TapSwitch::new(None);
    let ingress = Arc::new(Ingress::new(config.ingest, stream_context(&config, &aggregation, &tap, &edge_counters)));
    let opened = ingress.open_all(&config.listeners).await?;
    let admin_listener = TcpListener::bind(config.mgmt).await.with_context(|| {
        format!(
            "cannot bind the management port {} (mgmt_address/mgmt_port, --mgmt-port); another process may hold it",
            config.mgmt
        )
    });
    let http_listener = match config.http_port.serve {
        false => Ok(None),
        true => TcpListener::bind(config.http_port.address).await.map(Some).with_context(|| {
            format!(
                "cannot bind the HTTP port {} (http_address/http_port, --http-port); another process may hold it",
                config.http_port.address
            )
        }),
    };
    let outlets = Arc::new(Outlets::default());
    let (admin_listener, http_listener, sinks) = match (admin_listener, http_listener) {
        (Ok(admin), Ok(http)) => match Roster::start(&config, startup_s, outlets.clone(), tap) {
            Ok(sinks) => (admin, http, Arc::new(sinks)),
            Err(error) => return Err(close(opened, error)),
        },
        (Err(error), _) | (_, Err(error)) => return Err(close(opened, error)),
    };
    aggregation.last_flush_unix_ms.set(unix_now_ms()); // the first interval starts now
    let grid = crate::placement::Grid {
        start_ms: startup_s * 1000,
        interval_ms: config.agg.flush_interval.as_millis() as u64,
        wait_ms: config.global.batch_wait_ms,
    };
    aggregation.set_grid(grid, config.global.max_late_intervals, unix_now_ms()); // a global places forwarded batches on it
    ingress.start(opened)?;
    let (stop_sender, stop) = watch::channel(false);
    let stop_closed = stop.clone();
    let bound = Bound {
        listening: ingress.listening(),
        mgmt: admin_listener.local_addr()?,
        http: http_listener.as_ref().map(TcpListener::local_addr).transpose()?,
    };
    tracing::info!(proto = %"mgmt", addr = %bound.mgmt, "listening");
    if let Some(http) = bound.http {
        tracing::info!(proto = %"http", addr = %http, "listening");
        let scheme = if config.http.tls.is_some() { "https" } else { "http" };
        tracing::info!(url = %format!("{scheme}://{http}/"), "the web page, /health, /metrics and the query API");
    }
    if config.lists("store") {
        tracing::info!(data_dir = %config.settings::<crate::sinks::store::Store>().data_dir.display(), "the embedded store keeps its data here");
    }
    let alerts = start_alerts(&config, &aggregation, &sinks, &bound, startup_s);
    let admin_state = Arc::new(AdminState {
        aggregation: aggregation.clone(),
        healthy: AtomicBool::new(config.healthy_at_start),
        started_unix_s: startup_s,
        sinks: sinks.clone(),
        config: ConfigInForce::new(source.as_ref().and_then(|s| s.path.clone()), config.raw.clone(), startup_s),
        edges: edge_counters.clone(),
        idle_timeout: config.ingest.idle_timeout,
        first_command_timeout: config.ingest.mgmt_first_command_timeout,
        max_connections: config.ingest.mgmt_max_connections,
        max_line: config.ingest.mgmt_max_line_bytes,
    });
    let admin_task = tokio::spawn(admin::serve(admin_listener, admin_state.clone(), stop.clone()));
    let global = Arc::new(Global::new(config.global.clone(), aggregation.clone(), edge_counters)?);
    let store_dir = config.lists("store").then(|| config.settings::<crate::sinks::store::Store>().data_dir.clone());
    let log_reader = crate::global::kafka::start(global.clone(), store_dir.as_deref())?;
    let guard = Arc::new(crate::access::Guard::new(config.http.load().map_err(|why| anyhow::anyhow!(why))?));
    let server_tls = match &config.http.tls {
        None => None,
        Some(files) => {
            Some(Arc::new(crate::tls::ServerTls::new(files).map_err(|why| anyhow::anyhow!("http.tls: {why}"))?))
        }
    };
    let reloader = source.map(|source| {
        let daemon = crate::reload::Daemon {
            aggregation: aggregation.clone(),
            sinks: sinks.clone(),
            ingress: ingress.clone(),
            alerts: alerts.clone(),
            edges: admin_state.edges.clone(),
            admin: admin_state.clone(),
            guard: guard.clone(),
            tls: server_tls.clone(),
        };
        Arc::new(Reloader::new(source, config.clone(), daemon))
    });
    let http_state = Arc::new(HttpState {
        reloader: reloader.clone().map(|reloader| reloader as Arc<dyn http::Reload>),
        prefix_stats: config.agg.prefix_stats.clone(),
        global: global.clone(),
        ingress: ingress.clone(),
        alerts: alerts.clone(),
        admin: admin_state,
        query_limits: config.query,
        guard,
        body_timeout: config.ingest.http_body_timeout,
        answers: Arc::new(http::AnswerBudget::new(config.ingest.http_answer_bytes)),
        waiters: Default::default(),
        sessions: Default::default(),
        over_tls: server_tls.is_some(),
        damaged_blocks: Mutex::new(crate::sinks::store::DamagedBlocks::new(
            "the HTTP API's reads",
            http::DAMAGED_BLOCKS_SHOWN,
        )),
    });
    let limits = http::Limits {
        max_connections: config.ingest.http_max_connections,
        max_per_address: config.ingest.http_max_connections_per_address,
        header_timeout: config.ingest.http_header_timeout,
    };
    let http_task =
        http_listener.map(|listener| tokio::spawn(http::serve(listener, http_state, limits, server_tls, stop.clone())));
    let closed_shards = aggregation.clone();
    tokio::spawn(async move { closed_shards.absorb_closed_until(stop_closed).await });
    let flusher = Flusher { aggregation, sinks: outlets, global: Some(global.clone()) };
    let serving = Serving {
        flusher,
        sinks,
        alerts,
        ingress: ingress.clone(),
        stop: stop_sender.clone(),
        admin_task,
        http_task,
        log_reader,
    };
    let task = tokio::spawn(serving.run(startup_s * 1000, config.agg.flush_interval, stop));
    tracing::info!(flush_interval_ms = config.agg.flush_interval.as_millis() as u64, "ready");
    Ok(Running { bound, stop: stop_sender, task, reloader, ingress })
}

/// Starts the alert rules' evaluation when the config has rules: each flush goes to it after
/// the backends; its links point at the HTTP address unless `alerting.externalURL` says.
fn start_alerts(
    config: &Config,
    aggregation: &Arc<Aggregation>,
    sinks: &Roster,
    bound: &Bound,
    startup_s: u64,
) -> Option<Arc<Alerts>> {
    if config.alerts.rules.is_empty() {
        return None;
    }
    let base_url = format!("http://{}", bound.http.unwrap_or(config.http_port.address));
    let prefix = &config.agg.prefix_stats;
    let (alerts, outlet) = Alerts::start(&config.alerts, aggregation.clone(), prefix, base_url, startup_s);
    sinks.attach(outlet, alerts.telemetry());
    tracing::info!(rules = config.alerts.rules.len(), "alert rules evaluated after every flush");
    Some(alerts)
}

/// Gives up the listeners opened for a start that failed, passing its error on.
fn close(opened: crate::ingest::Opened, error: anyhow::Error) -> anyhow::Error {
    opened.close();
    error
}

/// What every stream connection shares.
fn stream_context(
    config: &Config,
    aggregation: &Aggregation,
    tap: &Arc<TapSwitch>,
    edges: &Arc<EdgeCounters>,
) -> StreamContext {
    StreamContext {
        shards: aggregation.shards.clone(),
        tap: tap.clone(),
        edges: edges.clone(),
        pending: PendingBudget {
            limit: config.ingest.stream_pending_bytes as u64,
            line_limit: config.ingest.max_stream_line_bytes,
            edges: edges.clone(),
        },
        drain_limit: config.ingest.shutdown_drain,
        slots: ConnectionSlots::new(config.ingest.max_stream_connections),
        idle_timeout: config.ingest.idle_timeout,
    }
}

/// Runs until `shutdown` completes, then drains and flushes once more; each message on
/// `hangups` (SIGHUP) reloads the config from `source`.
pub async fn run(
    config: Config,
    source: ConfigSource,
    shutdown: impl std::future::Future<Output = ()>,
    mut hangups: tokio::sync::mpsc::UnboundedReceiver<()>,
) -> anyhow::Result<()> {
    let running = start_reloadable(config, Some(source)).await?;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(()) = hangups.recv() => {
                let _ = running.reload().await; // logged and counted by the reloader
            }
        }
    }
    tracing::info!("shutting down: draining");
    running.stop().await;
    tracing::info!("stopped");
    Ok(())
}

/// What runs after start, and what stopping ends.
struct Serving {
    flusher: Flusher,
    sinks: Arc<Roster>,
    alerts: Option<Arc<Alerts>>,
    ingress: Arc<Ingress>,
    stop: watch::Sender<bool>,
    admin_task: tokio::task::JoinHandle<()>,
    http_task: Option<tokio::task::JoinHandle<()>>,
    /// With `global.kafka`, the thread reading the topic.
    log_reader: Option<crate::global::kafka::Reader>,
}

impl Serving {
    /// Flushes on the grid until told to stop; then stops the edges, flushes once more and
    /// lets the sinks deliver.
    async fn run(self, start_ms: u64, interval: Duration, mut stop: watch::Receiver<bool>) {
        tokio::select! {
            () = self.flusher.run_on_grid(start_ms, interval) => {}
            _ = stop.wait_for(|stopped| *stopped) => {}
        }
        let _ = self.stop.send(true);
        self.ingress.stop_all().await;
        // Forwarded batches the HTTP server acknowledged are in the final flush: it has
        // stopped accepting and finished the requests in hand (within 5 s) first.
        if let Some(mut http_task) = self.http_task {
            if tokio::time::timeout(Duration::from_secs(6), &mut http_task).await.is_err() {
                http_task.abort();
            }
        }
        // Batches read from Kafka are in the final flush; their offsets are committed after it.
        if let Some(log_reader) = self.log_reader {
            log_reader.stop().await;
        }
        self.flusher.flush_last(unix_now_ms());
        let global = self.flusher.global.clone();
        drop(self.flusher);
        // The sinks take the final flush first: what it carried is let go of once they have.
        self.sinks.finish_all().await;
        if let Some(global) = &global {
            global.leave_log().await;
        }
        if let Some(alerts) = &self.alerts {
            alerts.finish(Duration::from_secs(5)).await;
        }
        self.admin_task.abort();
    }
}
