//! The running daemon: bind every listener, start sinks, readers, the management interface
//! and the flusher; on shutdown stop the edges, drain what was received, flush one last time
//! to every sink, and wait for them to deliver.

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::admin::{self, AdminState};
use crate::config::{Backend, Config, Listener, UnixPath};
use crate::flush::{unix_now_ms, Aggregation, Flusher};
use crate::http::{self, HttpState};
use crate::ingest::{
    open_udp, report_receive_buffer, serve_streams, spawn_datagram_reader, BatchShape, DatagramSocket, DatagramSource,
    Shards, Stopping, StreamContext, Tap, UdpSettings,
};
use crate::sinks::graphite::GraphiteNames;
use crate::sinks::{console, graphite, repeater, store, SinkHandle};
use crate::telemetry::EdgeCounters;

/// How long sinks get to deliver the final flush.
const SINK_GRACE: Duration = Duration::from_secs(10);

/// What the listeners started.
struct Edges {
    reader_threads: Vec<std::thread::JoinHandle<()>>,
    stream_tasks: JoinSet<()>,
    socket_files: Vec<PathBuf>,
}

/// Runs until `shutdown` completes, then drains and flushes once more.
pub async fn run(config: Config, shutdown: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
    let start_ms = unix_now_ms();
    let startup_s = (start_ms + 500) / 1000;
    let aggregation = Arc::new(Aggregation::new(config.agg.clone()));
    let shards = aggregation.shards.clone();
    let (sinks, tap) = start_sinks(&config, startup_s)?;
    let (stop_sender, stop) = watch::channel(false);
    let stop_flag = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(EdgeCounters::default());
    let stream_context = StreamContext { shards: shards.clone(), tap: tap.clone(), edges: counters.clone() };
    let stopping =
        Stopping { flag: stop_flag.clone(), drain_limit: config.ingest.shutdown_drain, edges: counters.clone() };
    let edges = start_listeners(&config, &shards, tap, stream_context, &stop, &stopping).await?;
    let admin_listener = TcpListener::bind(config.mgmt)
        .await
        .with_context(|| format!("cannot bind the management port {} (mgmt_address/mgmt_port)", config.mgmt))?;
    tracing::info!(proto = %"mgmt", addr = %admin_listener.local_addr()?, "listening");
    let admin_state = Arc::new(AdminState {
        aggregation: aggregation.clone(),
        healthy: AtomicBool::new(config.healthy_at_start),
        started_unix_s: startup_s,
        sinks: sinks.iter().map(|sink| sink.telemetry.clone()).collect(),
        raw_config: config.raw.clone(),
        edges: counters,
    });
    let admin_task = tokio::spawn(admin::serve(admin_listener, admin_state.clone(), stop.clone()));
    let http_listener = TcpListener::bind(config.store.http)
        .await
        .with_context(|| format!("cannot bind the HTTP port {} (http_address/http_port)", config.store.http))?;
    tracing::info!(proto = %"http", addr = %http_listener.local_addr()?, "listening");
    let http_state = Arc::new(HttpState {
        database: config.backends.contains(&Backend::Store).then(|| config.store.data_dir.join(store::DATABASE)),
        reader: Mutex::new(None),
        admin: admin_state,
    });
    let http_task = tokio::spawn(http::serve(http_listener, http_state, stop.clone()));
    let flusher = Flusher {
        aggregation,
        sinks: sinks.iter().filter_map(|s| Some((s.telemetry.clone(), s.snapshots.clone()?))).collect(),
    };
    tracing::info!(flush_interval_ms = config.agg.flush_interval.as_millis() as u64, "ready");
    tokio::select! {
        () = flusher.run_on_grid(startup_s * 1000, config.agg.flush_interval) => {}
        () = shutdown => tracing::info!("shutting down: draining"),
    }
    let _ = stop_sender.send(true);
    stop_flag.store(true, std::sync::atomic::Ordering::Relaxed);
    stop_edges(edges).await;
    flusher.flush(unix_now_ms());
    drop(flusher);
    finish_sinks(sinks).await;
    admin_task.abort();
    http_task.abort();
    tracing::info!("stopped");
    Ok(())
}

fn start_sinks(config: &Config, startup_s: u64) -> anyhow::Result<(Vec<SinkHandle>, Option<Tap>)> {
    let mut sinks = Vec::new();
    let mut tap = None;
    for backend in &config.backends {
        match backend {
            Backend::Graphite => {
                let names =
                    GraphiteNames::new(&config.graphite, &config.agg.prefix_stats, config.agg.key_name_sanitize);
                sinks.push(graphite::spawn(config.graphite.clone(), names, startup_s));
            }
            Backend::Console => sinks.push(console::spawn(config.console.clone(), startup_s)),
            Backend::Repeater => {
                let (sink, packets) = repeater::spawn(config.repeater.clone(), startup_s);
                sinks.push(sink);
                tap = Some(packets);
            }
            Backend::Store => sinks.push(store::spawn(&config.store, startup_s)?),
        }
    }
    Ok((sinks, tap))
}

async fn start_listeners(
    config: &Config,
    shards: &Arc<Shards>,
    tap: Option<Tap>,
    streams: StreamContext,
    stop: &watch::Receiver<bool>,
    stopping: &Stopping,
) -> anyhow::Result<Edges> {
    let mut edges = Edges { reader_threads: Vec::new(), stream_tasks: JoinSet::new(), socket_files: Vec::new() };
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
                report_receive_buffer(bound, settings.receive_buffer, granted);
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
                tracing::info!(proto = %"unixgram", addr = %unix.path.display(), "listening");
                let source = DatagramSource::new(DatagramSocket::Unix(socket))?;
                let name = format!("unixgram-{index}");
                let thread =
                    spawn_datagram_reader(name, source, shards.register(), stopping.clone(), tap.clone(), shape);
                edges.reader_threads.push(thread.with_context(context)?);
            }
            Listener::Tcp(address) => {
                let socket = TcpListener::bind(address).await.with_context(context)?;
                tracing::info!(proto = %"tcp", addr = %socket.local_addr()?, "listening");
                edges.stream_tasks.spawn(serve_streams(socket, streams.clone(), stop.clone()));
            }
            Listener::UnixStream(unix) => {
                let socket = UnixListener::bind(prepare_socket_file(unix)?).with_context(context)?;
                set_socket_mode(unix)?;
                edges.socket_files.push(unix.path.clone());
                tracing::info!(proto = %"unix", addr = %unix.path.display(), "listening");
                edges.stream_tasks.spawn(serve_streams(socket, streams.clone(), stop.clone()));
            }
        }
    }
    Ok(edges)
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

/// Waits for every reader to drain its socket and end.
async fn stop_edges(edges: Edges) {
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
