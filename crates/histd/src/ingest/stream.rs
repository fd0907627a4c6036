//! Stream listeners (TCP, Unix stream): newline framing, one task and one shard per connection.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::{unix_now_s, Shards, Tap};

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

/// Accepts connections until shutdown; returns when every connection has finished.
pub async fn serve_streams<L: Accept>(
    listener: L,
    shards: Arc<Shards>,
    tap: Option<Tap>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept_stream() => match accepted {
                Ok(stream) => { connections.spawn(serve_connection(stream, shards.clone(), tap.clone(), shutdown.clone())); }
                Err(error) => tracing::warn!(%error, "stream accept failed"),
            },
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    connections.join_all().await;
}

/// Reads one connection: complete lines go to the shard as a packet per read; a last line
/// without a newline still counts when the connection closes (Etsy loses it).
async fn serve_connection<S: AsyncRead + Unpin>(
    mut stream: S,
    shards: Arc<Shards>,
    tap: Option<Tap>,
    mut shutdown: watch::Receiver<bool>,
) {
    let shard = shards.register();
    let mut framer = Framer::default();
    loop {
        tokio::select! {
            read = stream.read_buf(&mut framer.pending) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => framer.complete_lines(|packet| deliver(&shard, tap.as_ref(), packet)),
            },
            _ = shutdown.changed() => {
                drain_briefly(&mut stream, &mut framer.pending).await;
                break;
            }
        }
    }
    framer.complete_lines(|packet| deliver(&shard, tap.as_ref(), packet));
    framer.rest(|packet| deliver(&shard, tap.as_ref(), packet));
    shard.close();
}

async fn drain_briefly<S: AsyncRead + Unpin>(stream: &mut S, pending: &mut Vec<u8>) {
    while let Ok(Ok(read)) = tokio::time::timeout(DRAIN_WAIT, stream.read_buf(pending)).await {
        if read == 0 {
            break;
        }
    }
}

fn deliver(shard: &super::Shard, tap: Option<&Tap>, packet: &[u8]) {
    if let Some(tap) = tap {
        tap.offer(packet);
    }
    shard.insert_packet(unix_now_s(), packet);
}

/// Newline framing over a byte stream.
#[derive(Debug, Default)]
struct Framer {
    pending: Vec<u8>,
}

impl Framer {
    /// Hands over everything up to the last newline as one packet (or everything, when the
    /// pending bytes pass the size bound).
    fn complete_lines(&mut self, mut packet: impl FnMut(&[u8])) {
        let end = match self.pending.iter().rposition(|&b| b == b'\n') {
            Some(newline) => newline + 1,
            None if self.pending.len() > MAX_PENDING_BYTES => self.pending.len(),
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
    use super::Framer;

    #[test]
    fn frames_on_the_last_newline() {
        let mut framer = Framer::default();
        let mut packets: Vec<Vec<u8>> = Vec::new();
        for chunk in [&b"a:1|c\nb:"[..], b"2|c\nc:3", b"|c"] {
            framer.pending.extend_from_slice(chunk);
            framer.complete_lines(|p| packets.push(p.to_vec()));
        }
        framer.rest(|p| packets.push(p.to_vec()));
        assert_eq!(packets, [b"a:1|c\n".to_vec(), b"b:2|c\n".to_vec(), b"c:3|c".to_vec()]);
    }
}
