//! The running daemon: bind every listener, start sinks, readers, the management interface
//! and the flusher; on shutdown stop the edges, drain what was received, flush one last time
//! to every sink, and wait for them to deliver.

use std::net::SocketAddr;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::accept::ConnectionSlots;
use crate::admin::{self, AdminState};
use crate::config::{Backend, Config, Listener, UnixPath};
use crate::flush::{unix_now_ms, Aggregation, Flusher};
use crate::global::Global;
use crate::http::{self, HttpState};
use crate::ingest::{
    open_udp, report_receive_buffer, serve_streams, spawn_datagram_reader, BatchShape, DatagramSocket, DatagramSource,
    PendingBudget, Stopping, StreamContext, Tap, UdpSettings,
};
use crate::reload::{ConfigSource, ReloadOutcome, Reloader};
use crate::sinks::forward::encode::CutSettings;
use crate::sinks::graphite::GraphiteNames;
use crate::sinks::{console, forward, graphite, prometheus, repeater, store, EtsyStatus, SinkHandle, SinkTelemetry};
use crate::telemetry::EdgeCounters;

/// How long sinks get to deliver the final flush.
const SINK_GRACE: Duration = Duration::from_secs(10);

/// What the listeners started.
#[derive(Default)]
struct Edges {
    reader_threads: Vec<std::thread::JoinHandle<()>>,
    stream_tasks: JoinSet<()>,
    socket_files: Vec<PathBuf>,
    listening: Listening,
}

/// The addresses the metric listeners are bound to (port 0 in the config becomes the port the
/// kernel chose), in config order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listening {
    /// UDP listeners.
    pub udp: Vec<SocketAddr>,
    /// TCP listeners.
    pub tcp: Vec<SocketAddr>,
    /// Unix datagram sockets.
    pub unix_datagram: Vec<PathBuf>,
    /// Unix stream sockets.
    pub unix_stream: Vec<PathBuf>,
}

/// Every address a running daemon is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    /// The metric listeners.
    pub listening: Listening,
    /// The management interface.
    pub mgmt: SocketAddr,
    /// The HTTP API, when it is served (`StoreConfig::serve_http`).
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
    check_addresses_free(&config)?;
    let startup_s = (unix_now_ms() + 500) / 1000;
    let admin_listener = TcpListener::bind(config.mgmt)
        .await
        .with_context(|| format!("cannot bind the management port {} (mgmt_address/mgmt_port)", config.mgmt))?;
    let http_listener =
        match config.store.serve_http {
            false => None,
            true => Some(TcpListener::bind(config.store.http).await.with_context(|| {
                format!("cannot bind the HTTP port {} (http_address/http_port)", config.store.http)
            })?),
        };
    let aggregation = Arc::new(Aggregation::new(config.agg.clone()));
    aggregation.last_flush_unix_ms.set(unix_now_ms()); // the first interval starts now
    let Started { sinks, tap, prometheus, store_control } = start_sinks(&config, startup_s)?;
    let (stop_sender, stop) = watch::channel(false);
    let edge_counters = Arc::new(EdgeCounters::default());
    let stopping =
        Stopping { flag: Arc::default(), drain_limit: config.ingest.shutdown_drain, edges: edge_counters.clone() };
    let pending = PendingBudget { limit: config.ingest.stream_pending_bytes as u64, edges: edge_counters.clone() };
    let streams = StreamContext {
        shards: aggregation.shards.clone(),
        tap: tap.clone(),
        edges: edge_counters.clone(),
        pending,
        drain_limit: config.ingest.shutdown_drain,
        slots: ConnectionSlots::new(config.ingest.max_stream_connections),
        idle_timeout: config.ingest.idle_timeout,
    };
    let mut edges = Edges::default();
    if let Err(error) = start_listeners(&config, &mut edges, tap, streams, &stop, &stopping).await {
        stop_edges(edges, &stop_sender, &stopping).await;
        return Err(error);
    }
    let bound = Bound {
        listening: edges.listening.clone(),
        mgmt: admin_listener.local_addr()?,
        http: http_listener.as_ref().map(TcpListener::local_addr).transpose()?,
    };
    tracing::info!(proto = %"mgmt", addr = %bound.mgmt, "listening");
    if let Some(http) = bound.http {
        tracing::info!(proto = %"http", addr = %http, "listening");
        tracing::info!(url = %format!("http://{http}/"), "the web page, /health, /metrics and the query API");
    }
    if config.backends.contains(&Backend::Store) {
        tracing::info!(data_dir = %config.store.data_dir.display(), "the embedded store keeps its data here");
    }
    let admin_state = Arc::new(AdminState {
        aggregation: aggregation.clone(),
        healthy: AtomicBool::new(config.healthy_at_start),
        started_unix_s: startup_s,
        sinks: sinks.iter().flat_map(|sink| std::iter::once(&sink.telemetry).chain(&sink.targets).cloned()).collect(),
        raw_config: config.raw.clone(),
        edges: edge_counters.clone(),
        idle_timeout: config.ingest.idle_timeout,
    });
    let admin_task = tokio::spawn(admin::serve(admin_listener, admin_state.clone(), stop.clone()));
    let global = Arc::new(Global::new(config.global.clone(), aggregation.clone(), edge_counters)?);
    let reloader = source.map(|source| {
        let edges = admin_state.edges.clone();
        Arc::new(Reloader::new(source, config.clone(), aggregation.clone(), store_control.clone(), edges))
    });
    let http_state = Arc::new(HttpState {
        reloader: reloader.clone(),
        database: config.backends.contains(&Backend::Store).then(|| config.store.data_dir.join(store::DATABASE)),
        reader: Mutex::new(None),
        store_control,
        prefix_stats: config.agg.prefix_stats.clone(),
        prometheus,
        global: global.clone(),
        udp_ports: {
            let mut ports: Vec<u16> = bound.listening.udp.iter().map(|address| address.port()).collect();
            ports.dedup();
            ports
        },
        admin: admin_state,
    });
    let limits = http::Limits {
        max_connections: config.ingest.http_max_connections,
        header_timeout: config.ingest.http_header_timeout,
    };
    let http_task = http_listener.map(|listener| tokio::spawn(http::serve(listener, http_state, limits, stop.clone())));
    let flusher = Flusher {
        aggregation,
        sinks: sinks.iter().filter_map(|s| Some((s.telemetry.clone(), s.snapshots.clone()?))).collect(),
        journal: global.journal(),
    };
    let serving = Serving { flusher, sinks, edges, stopping, stop: stop_sender.clone(), admin_task, http_task };
    let task = tokio::spawn(serving.run(startup_s * 1000, config.agg.flush_interval, stop));
    tracing::info!(flush_interval_ms = config.agg.flush_interval.as_millis() as u64, "ready");
    Ok(Running { bound, stop: stop_sender, task, reloader })
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
    sinks: Vec<SinkHandle>,
    edges: Edges,
    stopping: Stopping,
    stop: watch::Sender<bool>,
    admin_task: tokio::task::JoinHandle<()>,
    http_task: Option<tokio::task::JoinHandle<()>>,
}

impl Serving {
    /// Flushes on the grid until told to stop; then stops the edges, flushes once more and
    /// lets the sinks deliver.
    async fn run(self, start_ms: u64, interval: Duration, mut stop: watch::Receiver<bool>) {
        tokio::select! {
            () = self.flusher.run_on_grid(start_ms, interval) => {}
            _ = stop.wait_for(|stopped| *stopped) => {}
        }
        stop_edges(self.edges, &self.stop, &self.stopping).await;
        // Forwarded batches the HTTP server acknowledged are in the final flush: it has
        // stopped accepting and finished the requests in hand (within 5 s) first.
        if let Some(mut http_task) = self.http_task {
            if tokio::time::timeout(Duration::from_secs(6), &mut http_task).await.is_err() {
                http_task.abort();
            }
        }
        self.flusher.flush(unix_now_ms());
        drop(self.flusher);
        finish_sinks(self.sinks).await;
        self.admin_task.abort();
    }
}

/// The sinks started, the repeater's packet tap, the prometheus backend's series, and the way
/// to the store's writer.
struct Started {
    sinks: Vec<SinkHandle>,
    tap: Option<Tap>,
    prometheus: Option<Arc<prometheus::Exposed>>,
    store_control: Option<store::StoreControl>,
}

fn start_sinks(config: &Config, startup_s: u64) -> anyhow::Result<Started> {
    let mut sinks = Vec::new();
    let mut tap = None;
    let mut exposed = None;
    let mut store_control = None;
    let telemetry = |backend: Backend, etsy, queue_limit| {
        Arc::new(SinkTelemetry::new(backend.name(), etsy, startup_s).with_queue_limit(queue_limit))
    };
    let queue_limit = config.sink_queue_bytes;
    for &backend in &config.backends {
        match backend {
            Backend::Graphite => {
                let names =
                    GraphiteNames::new(&config.graphite, &config.agg.prefix_stats, config.agg.key_name_sanitize);
                // retryBufferBytes bounds what graphite holds: flushes waiting and lines to resend.
                let telemetry = telemetry(backend, EtsyStatus::Graphite, config.graphite.retry_buffer_bytes);
                sinks.push(graphite::spawn(config.graphite.clone(), names, telemetry));
            }
            Backend::Console => {
                let telemetry = telemetry(backend, EtsyStatus::Console, queue_limit);
                sinks.push(console::spawn(config.console.clone(), telemetry));
            }
            Backend::Repeater => {
                let telemetry = telemetry(backend, EtsyStatus::None, queue_limit);
                let (sink, packets) = repeater::spawn(config.repeater.clone(), telemetry);
                sinks.push(sink);
                tap = Some(packets);
            }
            Backend::Store => {
                let (sink, control) = store::spawn(&config.store, telemetry(backend, EtsyStatus::None, queue_limit))?;
                sinks.push(sink);
                store_control = Some(control);
            }
            Backend::Prometheus => {
                let targets = config.prometheus.remote_write.iter().map(|target| {
                    // Once per target at start: the telemetry's name lives as long as the process.
                    let name: &'static str = Box::leak(format!("prometheus.{}", target.name).into_boxed_str());
                    let limit = target.retry_buffer_bytes;
                    Arc::new(SinkTelemetry::new(name, EtsyStatus::None, startup_s).with_queue_limit(limit))
                });
                let own = telemetry(backend, EtsyStatus::None, queue_limit);
                let (sink, series) = prometheus::spawn(config.prometheus.clone(), own, targets.collect());
                sinks.push(sink);
                exposed = Some(series);
            }
            Backend::Forward => {
                let settings = CutSettings {
                    source: config.forward.source.clone(),
                    prefix_stats: config.agg.prefix_stats.clone(),
                    set_members_limit: config.forward.set_members_limit,
                    raw_values_limit: config.forward.raw_values_limit.unwrap_or(config.agg.timer_sample_limit),
                    max_batch_bytes: config.forward.max_batch_bytes,
                };
                let telemetry = telemetry(backend, EtsyStatus::None, queue_limit);
                sinks.push(forward::spawn(config.forward.clone(), settings, telemetry)?);
            }
        }
    }
    Ok(Started { sinks, tap, prometheus: exposed, store_control })
}

async fn start_listeners(
    config: &Config,
    edges: &mut Edges,
    tap: Option<Tap>,
    streams: StreamContext,
    stop: &watch::Receiver<bool>,
    stopping: &Stopping,
) -> anyhow::Result<()> {
    let shards = &streams.shards;
    let shape =
        BatchShape { datagrams: config.ingest.batch_datagrams, datagram_bytes: config.ingest.max_datagram_bytes };
    for (index, listener) in config.listeners.iter().enumerate() {
        let context = || format!("cannot listen on {listener:?} (servers[{index}] / port / address)");
        match listener {
            Listener::Udp(address, receive_buffer) => {
                let settings = UdpSettings {
                    readers: config.ingest.readers,
                    mode: config.ingest.mode,
                    receive_buffer: receive_buffer.unwrap_or(config.ingest.receive_buffer),
                };
                let (sockets, granted) = open_udp(*address, settings).with_context(context)?;
                let bound = sockets[0].local_addr()?;
                edges.listening.udp.push(bound);
                report_receive_buffer(bound, granted);
                streams.edges.udp_receive_buffer(granted.kernel as u64);
                tracing::info!(proto = %"udp", addr = %bound, readers = settings.readers, mode = ?settings.mode, "listening");
                let sources = sockets
                    .into_iter()
                    .map(|socket| DatagramSource::new(DatagramSocket::Udp(socket)))
                    .collect::<std::io::Result<Vec<_>>>()?;
                for reader in 0..settings.readers {
                    let source = sources[reader % sources.len()].clone();
                    let name = format!("udp-{index}-{reader}");
                    let thread =
                        spawn_datagram_reader(name, source, shards.register(), stopping.clone(), tap.clone(), shape);
                    edges.reader_threads.push(thread.with_context(context)?);
                }
            }
            Listener::UnixDatagram(unix) => {
                let socket = UnixDatagram::bind(prepare_socket_file(unix)?).with_context(context)?;
                set_socket_mode(unix)?;
                edges.socket_files.push(unix.path.clone());
                edges.listening.unix_datagram.push(unix.path.clone());
                tracing::info!(proto = %"unixgram", addr = %unix.path.display(), "listening");
                let source = DatagramSource::new(DatagramSocket::Unix(socket))?;
                let name = format!("unixgram-{index}");
                let thread =
                    spawn_datagram_reader(name, source, shards.register(), stopping.clone(), tap.clone(), shape);
                edges.reader_threads.push(thread.with_context(context)?);
            }
            Listener::Tcp(address) => {
                let socket = TcpListener::bind(address).await.with_context(context)?;
                edges.listening.tcp.push(socket.local_addr()?);
                tracing::info!(proto = %"tcp", addr = %socket.local_addr()?, "listening");
                edges.stream_tasks.spawn(serve_streams(socket, streams.clone(), stop.clone()));
            }
            Listener::UnixStream(unix) => {
                let socket = UnixListener::bind(prepare_socket_file(unix)?).with_context(context)?;
                set_socket_mode(unix)?;
                edges.socket_files.push(unix.path.clone());
                edges.listening.unix_stream.push(unix.path.clone());
                tracing::info!(proto = %"unix", addr = %unix.path.display(), "listening");
                edges.stream_tasks.spawn(serve_streams(socket, streams.clone(), stop.clone()));
            }
        }
    }
    Ok(())
}

/// Checks every UDP and TCP address before anything is bound, so that a start that cannot
/// succeed takes nothing: a UDP port is bound with `SO_REUSEPORT`, which the kernel lets
/// another process's reuseport socket share, so a second histd would silently take half the
/// datagrams (and one that failed later, on a TCP port, took some before it exited). A port
/// another process holds is refused, naming the key.
fn check_addresses_free(config: &Config) -> anyhow::Result<()> {
    for (index, listener) in config.listeners.iter().enumerate() {
        let in_use = |proto: &str, address: &std::net::SocketAddr, error: std::io::Error| {
            anyhow::anyhow!(
                "cannot listen on {proto} {address} (servers[{index}] / port / address): {error}; \
                 another process holds it (histd does not share a port)"
            )
        };
        match listener {
            Listener::Udp(address, _) if address.port() != 0 => {
                drop(std::net::UdpSocket::bind(address).map_err(|e| in_use("UDP", address, e))?);
            }
            Listener::Tcp(address) if address.port() != 0 => {
                drop(std::net::TcpListener::bind(address).map_err(|e| in_use("TCP", address, e))?);
            }
            _ => {}
        }
    }
    Ok(())
}

/// Removes a stale socket file (never any other kind of file) so the path can be bound.
fn prepare_socket_file(unix: &UnixPath) -> anyhow::Result<&std::path::Path> {
    use std::os::unix::fs::FileTypeExt;
    if let Ok(metadata) = std::fs::symlink_metadata(&unix.path) {
        anyhow::ensure!(
            metadata.file_type().is_socket(),
            "{} exists and is not a socket (servers[].socket)",
            unix.path.display()
        );
        std::fs::remove_file(&unix.path)
            .with_context(|| format!("cannot remove the stale socket {}", unix.path.display()))?;
    }
    Ok(&unix.path)
}

fn set_socket_mode(unix: &UnixPath) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(mode) = unix.mode {
        std::fs::set_permissions(&unix.path, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("cannot chmod {} to {mode:o} (servers[].socket_mod)", unix.path.display()))?;
    }
    Ok(())
}

/// Tells every listener to stop and waits for each reader to drain its socket and end.
async fn stop_edges(edges: Edges, stop: &watch::Sender<bool>, stopping: &Stopping) {
    let _ = stop.send(true);
    stopping.flag.store(true, std::sync::atomic::Ordering::Relaxed);
    let threads = edges.reader_threads;
    let _ = tokio::task::spawn_blocking(move || threads.into_iter().for_each(|t| drop(t.join()))).await;
    edges.stream_tasks.join_all().await;
    for path in edges.socket_files {
        let _ = std::fs::remove_file(path);
    }
}

/// Closes every sink's queue (dropped by the caller) and waits for them to deliver.
async fn finish_sinks(sinks: Vec<SinkHandle>) {
    let tasks: Vec<_> = sinks.into_iter().map(|sink| sink.task).collect();
    let all = wait_for_all(tasks);
    if tokio::time::timeout(SINK_GRACE, all).await.is_err() {
        tracing::error!(grace_s = SINK_GRACE.as_secs(), "sinks did not finish in time");
    }
}

/// Waits for every task, one after another.
async fn wait_for_all(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for task in tasks {
        let _ = task.await;
    }
}
