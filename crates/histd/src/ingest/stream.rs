//! Stream listeners (TCP, Unix stream): newline framing, one task and one shard per connection.

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::allow::AllowSwitch;
use super::framer::{Framed, Framer, PendingBudget};
use super::{Shards, TapSwitch, TapView};
use crate::accept::{within_idle, AcceptFailures, ConnectionSlots};
use crate::clock::unix_now_s;
use crate::cross_protocol::{first_line, looks_like_http};
use crate::telemetry::EdgeCounters;

/// After shutdown, how long a connection may still deliver what it has sent.
const DRAIN_WAIT: Duration = Duration::from_millis(100);

/// A listener of byte streams.
pub trait Accept: Send + 'static {
    /// The accepted connection.
    type Stream: AsyncRead + Unpin + Send + 'static;
    /// Waits for the next connection: it and its source address (none for a Unix socket).
    fn accept_stream(&self) -> impl Future<Output = std::io::Result<(Self::Stream, Option<IpAddr>)>> + Send;
}

impl Accept for TcpListener {
    type Stream = tokio::net::TcpStream;
    async fn accept_stream(&self) -> std::io::Result<(Self::Stream, Option<IpAddr>)> {
        self.accept().await.map(|(stream, peer)| (stream, Some(peer.ip())))
    }
}

impl Accept for UnixListener {
    type Stream = tokio::net::UnixStream;
    async fn accept_stream(&self) -> std::io::Result<(Self::Stream, Option<IpAddr>)> {
        self.accept().await.map(|(stream, _)| (stream, None))
    }
}

/// What every connection of a stream listener shares.
#[derive(Debug, Clone)]
pub struct StreamContext {
    /// Where connections register their tables.
    pub shards: Arc<Shards>,
    /// The repeater's tap (on while that backend is).
    pub tap: Arc<TapSwitch>,
    /// Where refusals are counted.
    pub edges: Arc<EdgeCounters>,
    /// The budget for partial lines across connections (split lines counted there too).
    pub pending: PendingBudget,
    /// At shutdown, how long a connection may still deliver in all (`shutdownDrainMs`).
    pub drain_limit: Duration,
    /// Connections that may be open at once, across stream listeners (`maxStreamConnections`).
    pub slots: ConnectionSlots,
    /// Silence after which a connection is closed (`connectionIdleTimeoutMs`).
    pub idle_timeout: Option<Duration>,
}

/// Accepts connections until shutdown (those from outside `allow` closed at once and
/// counted); returns when every connection has finished.
pub async fn serve_streams<L: Accept>(
    listener: L,
    context: StreamContext,
    allow: Arc<AllowSwitch>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    let mut failures = AcceptFailures::default();
    let mut allow = allow.view();
    loop {
        tokio::select! {
            accepted = listener.accept_stream() => match accepted {
                Ok((_, Some(peer))) if allow.checking().is_some_and(|allow| !allow.admits(peer)) => {
                    context.edges.refused_ingest_connections.add(1);
                }
                Ok((stream, peer)) => if let Some(slot) = context.slots.admit(&context.edges.refused_stream_connections) {
                    let serving = serve_connection(stream, peer, context.clone(), shutdown.clone());
                    connections.spawn(async move {
                        serving.await;
                        drop(slot);
                    });
                },
                Err(error) => failures.failed("statsd stream", &error).await,
            },
            // Finished connections are reaped at once, not kept until shutdown (issue 48, P1).
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    connections.join_all().await;
}

/// Reads one connection: complete lines go to the shard as a packet per read; a last line
/// without a newline still counts when the connection closes (Etsy loses it). A connection
/// that opens with an HTTP request is closed with nothing in it counted as metrics.
async fn serve_connection<S: AsyncRead + Unpin>(
    mut stream: S,
    peer: Option<IpAddr>,
    context: StreamContext,
    mut shutdown: watch::Receiver<bool>,
) {
    let shard = context.shards.register();
    shard.with_table(|table| table.set_source(peer));
    let mut framer = Framer::new(context.pending.clone());
    let tap = context.tap.view();
    let mut connection =
        Connection { shard: &shard, context: &context, tap, first_line_checked: false, refused: false };
    loop {
        tokio::select! {
            read = within_idle(context.idle_timeout, stream.read(framer.chunk())) => match read {
                Err(error) if error.kind() == std::io::ErrorKind::TimedOut => {
                    context.edges.idle_closed_connections.add(1);
                    break;
                }
                Ok(0) | Err(_) => break,
                Ok(read) => framer.accept(read, |framed| connection.deliver(framed)),
            },
            _ = shutdown.changed() => {
                drain_briefly(&mut stream, &mut framer, &mut connection).await;
                break;
            }
        }
        if connection.refused {
            break;
        }
    }
    framer.finish(|framed| connection.deliver(framed));
    context.shards.close(&shard);
}

/// One connection's delivery of packets.
struct Connection<'a> {
    shard: &'a super::Shard,
    context: &'a StreamContext,
    tap: TapView,
    first_line_checked: bool,
    /// The connection spoke HTTP: nothing more of it is read or counted.
    refused: bool,
}

impl Connection<'_> {
    fn deliver(&mut self, framed: Framed<'_>) {
        let packet = match framed {
            Framed::Packet(packet) => packet,
            Framed::TooLong => {
                // Its bytes were discarded as they came: the example says only that it was one.
                self.shard.with_table(|table| table.count_rejected_line(proto::ParseError::TooLong, b""));
                return;
            }
        };
        if !self.first_line_checked {
            self.first_line_checked = true;
            if looks_like_http(first_line(packet)) {
                self.context.edges.refused_http_connections.add(1);
                self.refused = true;
            }
        }
        if self.refused {
            return;
        }
        if let Some(tap) = self.tap.current() {
            tap.offer(packet);
        }
        self.shard.insert_packet(unix_now_s(), packet);
    }
}

/// After shutdown, reads what the connection still delivers within [`DRAIN_WAIT`] of each read,
/// and for at most the drain limit in all: a client that keeps sending is cut off then (and
/// counted in `shutdown_cut_connections`).
async fn drain_briefly<S: AsyncRead + Unpin>(stream: &mut S, framer: &mut Framer, connection: &mut Connection<'_>) {
    let deadline = tokio::time::Instant::now() + connection.context.drain_limit;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            connection.context.edges.shutdown_cut_connections.add(1);
            return;
        }
        match tokio::time::timeout(DRAIN_WAIT.min(left), stream.read(framer.chunk())).await {
            Ok(Ok(read)) if read > 0 && !connection.refused => {
                framer.accept(read, |framed| connection.deliver(framed));
            }
            Ok(_) => return,
            // The deadline, not silence, ended the wait: counted at the top.
            Err(_) if tokio::time::Instant::now() >= deadline => {}
            Err(_) => return,
        }
    }
}
