//! Stream listeners (TCP, Unix stream): newline framing, one task and one shard per connection.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::{unix_now_s, Shards, Tap};
use crate::cross_protocol::{first_line, looks_like_http};
use crate::telemetry::EdgeCounters;

/// A line longer than this without a newline is taken as it is, to bound memory.
const MAX_PENDING_BYTES: usize = 1024 * 1024;
/// After shutdown, how long a connection may still deliver what it has sent.
const DRAIN_WAIT: Duration = Duration::from_millis(100);

/// A listener of byte streams.
pub trait Accept: Send + 'static {
    /// The accepted connection.
    type Stream: AsyncRead + Unpin + Send + 'static;
    /// Waits for the next connection.
    fn accept_stream(&self) -> impl Future<Output = std::io::Result<Self::Stream>> + Send;
}

impl Accept for TcpListener {
    type Stream = tokio::net::TcpStream;
    async fn accept_stream(&self) -> std::io::Result<Self::Stream> {
        self.accept().await.map(|(stream, _)| stream)
    }
}

impl Accept for UnixListener {
    type Stream = tokio::net::UnixStream;
    async fn accept_stream(&self) -> std::io::Result<Self::Stream> {
        self.accept().await.map(|(stream, _)| stream)
    }
}

/// What every connection of a stream listener shares.
#[derive(Debug, Clone)]
pub struct StreamContext {
    /// Where connections register their tables.
    pub shards: Arc<Shards>,
    /// The repeater's tap, when that backend is on.
    pub tap: Option<Tap>,
    /// Where refusals and split lines are counted.
    pub edges: Arc<EdgeCounters>,
}

/// Accepts connections until shutdown; returns when every connection has finished.
pub async fn serve_streams<L: Accept>(listener: L, context: StreamContext, mut shutdown: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept_stream() => match accepted {
                Ok(stream) => { connections.spawn(serve_connection(stream, context.clone(), shutdown.clone())); }
                Err(error) => tracing::warn!(%error, "stream accept failed"),
            },
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
    context: StreamContext,
    mut shutdown: watch::Receiver<bool>,
) {
    let shard = context.shards.register();
    let mut framer = Framer::default();
    let mut connection = Connection { shard: &shard, context: &context, first_line_checked: false, refused: false };
    loop {
        tokio::select! {
            read = stream.read_buf(&mut framer.pending) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => framer.complete_lines(&context.edges, |packet| connection.deliver(packet)),
            },
            _ = shutdown.changed() => {
                drain_briefly(&mut stream, &mut framer.pending).await;
                break;
            }
        }
        if connection.refused {
            break;
        }
    }
    framer.complete_lines(&context.edges, |packet| connection.deliver(packet));
    framer.rest(|packet| connection.deliver(packet));
    shard.close();
}

/// One connection's delivery of packets.
struct Connection<'a> {
    shard: &'a super::Shard,
    context: &'a StreamContext,
    first_line_checked: bool,
    /// The connection spoke HTTP: nothing more of it is read or counted.
    refused: bool,
}

impl Connection<'_> {
    fn deliver(&mut self, packet: &[u8]) {
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
        if let Some(tap) = &self.context.tap {
            tap.offer(packet);
        }
        self.shard.insert_packet(unix_now_s(), packet);
    }
}

async fn drain_briefly<S: AsyncRead + Unpin>(stream: &mut S, pending: &mut Vec<u8>) {
    while let Ok(Ok(read)) = tokio::time::timeout(DRAIN_WAIT, stream.read_buf(pending)).await {
        if read == 0 {
            break;
        }
    }
}

/// Newline framing over a byte stream.
#[derive(Debug, Default)]
struct Framer {
    pending: Vec<u8>,
}

impl Framer {
    /// Hands over everything up to the last newline as one packet (or everything, when the
    /// pending bytes pass the size bound: that line is split, and counted).
    fn complete_lines(&mut self, edges: &EdgeCounters, mut packet: impl FnMut(&[u8])) {
        let end = match self.pending.iter().rposition(|&b| b == b'\n') {
            Some(newline) => newline + 1,
            None if self.pending.len() > MAX_PENDING_BYTES => {
                edges.stream_lines_split.add(1);
                self.pending.len()
            }
            None => return,
        };
        packet(&self.pending[..end]);
        self.pending.drain(..end);
    }

    /// Hands over what is left (a last line without a newline).
    fn rest(&mut self, mut packet: impl FnMut(&[u8])) {
        if !self.pending.is_empty() {
            packet(&self.pending);
            self.pending.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Framer, MAX_PENDING_BYTES};
    use crate::telemetry::EdgeCounters;

    #[test]
    fn frames_on_the_last_newline() {
        let edges = EdgeCounters::default();
        let mut framer = Framer::default();
        let mut packets: Vec<Vec<u8>> = Vec::new();
        for chunk in [&b"a:1|c\nb:"[..], b"2|c\nc:3", b"|c"] {
            framer.pending.extend_from_slice(chunk);
            framer.complete_lines(&edges, |p| packets.push(p.to_vec()));
        }
        framer.rest(|p| packets.push(p.to_vec()));
        assert_eq!(packets, [b"a:1|c\n".to_vec(), b"b:2|c\n".to_vec(), b"c:3|c".to_vec()]);
        assert_eq!(edges.stream_lines_split.get(), 0);
    }

    #[test]
    fn counts_the_lines_it_splits() {
        let edges = EdgeCounters::default();
        let mut framer = Framer { pending: vec![b'x'; MAX_PENDING_BYTES + 1] };
        let mut sizes = Vec::new();
        framer.complete_lines(&edges, |p| sizes.push(p.len()));
        assert_eq!((sizes, edges.stream_lines_split.get()), (vec![MAX_PENDING_BYTES + 1], 1));
    }
}
