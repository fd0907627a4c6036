//! The proxy's inputs: UDP reader threads (`recvmmsg` batches on `SO_REUSEPORT` or shared
//! sockets, as the daemon's), and TCP connections (newline-framed), each with its own
//! [`Router`].

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::route::{CountsRegistry, Router};
use super::ProxyConfig;
use crate::ingest::recv::Batch;
use crate::ingest::{open_udp, DatagramSocket, DatagramSource, ReaderMode, UdpSettings};
use crate::telemetry::Counter;
use fleet::ring::Ring;

/// What every router of the proxy shares.
pub struct Routes {
    /// The aggregators and their health.
    pub ring: Arc<Ring>,
    /// Their statsd addresses, in the ring's order.
    pub targets: Arc<[SocketAddr]>,
    /// Every router's counts.
    pub registry: Arc<CountsRegistry>,
    /// `proxyDatagramBytes`.
    pub datagram_bytes: usize,
    /// `keyNameSanitize`.
    pub sanitize: bool,
    /// Datagrams the kernel dropped before the readers got them (`SO_RXQ_OVFL`).
    pub kernel_drops: Counter,
    /// Datagrams longer than `maxDatagramBytes`, cut (their last line is not sent).
    pub truncated: Counter,
}

impl Routes {
    fn router(&self) -> std::io::Result<Router> {
        Router::new(self.ring.clone(), self.targets.clone(), self.datagram_bytes, self.sanitize, self.registry.clone())
    }
}

/// Binds the UDP listener and starts its reader threads; the bound address and the threads.
pub fn start_udp(
    config: &ProxyConfig,
    routes: &Arc<Routes>,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<(SocketAddr, Vec<JoinHandle<()>>)> {
    let ingest = &config.ingest;
    let settings = UdpSettings { readers: ingest.readers, mode: ingest.mode, receive_buffer: ingest.receive_buffer };
    let (sockets, _) = open_udp(config.listen, settings)
        .map_err(|e| anyhow::anyhow!("cannot bind UDP {} (host/port): {e}", config.listen))?;
    let bound = sockets[0].local_addr()?;
    let per_socket = if ingest.mode == ReaderMode::Shared { ingest.readers.max(1) } else { 1 };
    let mut threads = Vec::new();
    for (index, socket) in sockets.into_iter().enumerate() {
        let source = DatagramSource::new(DatagramSocket::Udp(socket))?;
        for reader in 0..per_socket {
            let (source, routes, stop) = (source.clone(), routes.clone(), stop.clone());
            let mut router = routes.router()?;
            let shape = (ingest.batch_datagrams, ingest.max_datagram_bytes, ingest.shutdown_drain);
            let name = format!("proxy-udp-{}", index * per_socket + reader);
            threads.push(std::thread::Builder::new().name(name).spawn(move || {
                let mut batch = Batch::new(shape.0, shape.1);
                while !stop.load(Ordering::Relaxed) {
                    receive(&source, &mut batch, &mut router, &routes, false);
                }
                let started = Instant::now();
                while started.elapsed() < shape.2 && receive(&source, &mut batch, &mut router, &routes, true) > 0 {}
            })?);
        }
    }
    Ok((bound, threads))
}

/// One `recvmmsg` batch routed; how many datagrams it held.
fn receive(source: &DatagramSource, batch: &mut Batch, router: &mut Router, routes: &Routes, dont_wait: bool) -> usize {
    match batch.receive(source.socket().fd(), dont_wait, false) {
        Ok(received) => {
            if let Some(cumulative) = received.kernel_drops {
                routes.kernel_drops.add(source.new_drops(cumulative));
            }
            routes.truncated.add(received.truncated as u64);
            for (index, datagram) in batch.datagrams().enumerate() {
                let whole = match batch.truncated(index) {
                    true => datagram.iter().rposition(|&b| b == b'\n').map_or(0, |newline| newline + 1),
                    false => datagram.len(),
                };
                router.route(&datagram[..whole]);
            }
            router.flush();
            received.datagrams
        }
        Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => 0,
        Err(error) => {
            tracing::warn!(%error, "proxy: datagram receive failed");
            std::thread::sleep(std::time::Duration::from_millis(100));
            0
        }
    }
}

/// The longest line a TCP connection may send; a longer one is discarded (counted as bad).
const MAX_STREAM_LINE: usize = 65_536;

/// Accepts TCP connections until `stop`, each routed by a router of its own.
pub async fn serve_tcp(listener: TcpListener, routes: Arc<Routes>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let (routes, stop) = (routes.clone(), stop.clone());
                    tokio::spawn(async move {
                        if let Err(error) = serve_connection(stream, &routes, stop).await {
                            tracing::debug!(%error, "proxy: TCP connection ended");
                        }
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "proxy: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            },
            _ = stop.changed() => return,
        }
    }
}

async fn serve_connection(
    mut stream: TcpStream,
    routes: &Routes,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let mut router = routes.router()?;
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 65_536];
    let mut discarding = false;
    loop {
        let read = tokio::select! {
            read = stream.read(&mut chunk) => read?,
            _ = stop.changed() => 0,
        };
        if read == 0 {
            router.route(&pending);
            router.flush();
            return Ok(());
        }
        pending.extend_from_slice(&chunk[..read]);
        if discarding {
            // The rest of an over-long line: dropped up to its end.
            match pending.iter().position(|&b| b == b'\n') {
                Some(end) => {
                    pending.drain(..=end);
                    discarding = false;
                }
                None => {
                    pending.clear();
                    continue;
                }
            }
        }
        if let Some(last_newline) = pending.iter().rposition(|&b| b == b'\n') {
            router.route(&pending[..last_newline]);
            router.flush();
            pending.drain(..=last_newline);
        }
        if pending.len() > MAX_STREAM_LINE {
            pending.clear();
            discarding = true;
            router.count_bad_line();
        }
    }
}
