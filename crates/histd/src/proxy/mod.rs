//! `histd proxy`: a line-level router for clients that cannot run a local histd. It receives
//! statsd over UDP (and TCP with `server: './servers/tcp'`), and sends each line, unchanged, to
//! the aggregator that owns its series: the key is built as the aggregators build it (tags
//! sorted, `keyNameSanitize`), and the owner is picked by the forward backend's rendezvous hash
//! over the aggregators whose `health` check passes (docs/forward-format.md), so a node going
//! down moves only its own series and they come back with it. It reads Etsy's
//! `proxyConfig.js` (config.rs).
//!
//! What it loses: UDP to the aggregators is fire and forget (as Etsy's proxy); a line routed
//! to a node whose failure is not yet detected is lost (counted when the node was known down
//! and no other was up: `lines_to_down_nodes`; and by datagram when its host refused it:
//! `datagrams_refused`, refusals.rs), in total and per node by reason. Lines that do not
//! parse and DogStatsD events are dropped and counted. An aggregator whose series move
//! mid-interval reports its part of that interval and the next owner the rest (use
//! `deleteIdleStats` on the aggregators, as Etsy advises, so the old owner stops reporting
//! them).

mod admin;
pub mod config;
mod health;
mod listen;
mod refusals;
pub(crate) mod route;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;

pub use config::ProxyConfig;
use listen::Routes;
use route::CountsRegistry;

use crate::telemetry::Counter;
use fleet::ring::{Node, Ring};

/// What a running proxy listens on.
#[derive(Debug, Clone, Copy)]
pub struct ProxyBound {
    /// UDP lines.
    pub udp: SocketAddr,
    /// TCP lines, with `server: './servers/tcp'`.
    pub tcp: Option<SocketAddr>,
    /// The management port.
    pub mgmt: SocketAddr,
}

/// A started proxy.
pub struct RunningProxy {
    /// Its addresses.
    pub bound: ProxyBound,
    stop: watch::Sender<bool>,
    readers_stop: Arc<AtomicBool>,
    readers: Vec<std::thread::JoinHandle<()>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl RunningProxy {
    /// Stops listening, routes what the sockets still hold (`shutdownDrainMs`), and returns.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        self.readers_stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            let _ = task.await;
        }
        let readers = self.readers;
        let _ = tokio::task::spawn_blocking(move || readers.into_iter().for_each(|r| drop(r.join()))).await;
    }
}

/// Binds every port, starts the readers, the health checks and the management port.
pub async fn start(config: ProxyConfig) -> anyhow::Result<RunningProxy> {
    let ring = Arc::new(Ring::new(config.nodes.iter().map(|n| Node::new(n.name.clone())).collect()));
    let routes = Arc::new(Routes {
        ring: ring.clone(),
        targets: config.nodes.iter().map(|n| n.address).collect(),
        registry: Arc::new(CountsRegistry::new(config.nodes.len())),
        datagram_bytes: config.datagram_bytes,
        sanitize: config.sanitize,
        kernel_drops: Counter::default(),
        truncated: Counter::default(),
    });
    let mgmt = TcpListener::bind(config.mgmt).await.map_err(|e| {
        anyhow::anyhow!("cannot bind the management port {} (mgmt_address/mgmt_port): {e}", config.mgmt)
    })?;
    let (stop, stopped) = watch::channel(false);
    let readers_stop = Arc::new(AtomicBool::new(false));
    let (udp, readers) = listen::start_udp(&config, &routes, &readers_stop)?;
    let mut tasks = Vec::new();
    let tcp = match config.tcp {
        false => None,
        true => {
            let listener =
                TcpListener::bind(udp).await.map_err(|e| anyhow::anyhow!("cannot bind TCP {udp} (host/port): {e}"))?;
            tasks.push(tokio::spawn(listen::serve_tcp(listener, routes.clone(), stopped.clone())));
            Some(udp)
        }
    };
    let bound = ProxyBound { udp, tcp, mgmt: mgmt.local_addr()? };
    let admins = config.nodes.iter().map(|n| n.admin).collect();
    tasks.push(tokio::spawn(health::check_nodes(ring, admins, config.check_interval, stopped.clone())));
    tasks.push(tokio::spawn(admin::serve(mgmt, routes, crate::clock::unix_now_s(), stopped)));
    tracing::info!(proto = %"udp", addr = %bound.udp, "listening");
    if let Some(tcp) = bound.tcp {
        tracing::info!(proto = %"tcp", addr = %tcp, "listening");
    }
    tracing::info!(proto = %"mgmt", addr = %bound.mgmt, "listening");
    let nodes: Vec<&str> = config.nodes.iter().map(|n| n.name.as_str()).collect();
    tracing::info!(nodes = %nodes.join(","), "proxy ready");
    Ok(RunningProxy { bound, stop, readers_stop, readers, tasks })
}

/// Runs until `shutdown` completes.
pub async fn run(config: ProxyConfig, shutdown: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
    let running = start(config).await?;
    shutdown.await;
    tracing::info!("proxy shutting down");
    running.stop().await;
    Ok(())
}
