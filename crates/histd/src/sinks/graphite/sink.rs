//! Delivery to carbon: one persistent TCP connection, reconnect on failure, and a bounded
//! buffer of undelivered payload chunks retried every second. Graphite points are idempotent
//! (same name and time overwrite), so a chunk resent after a partial write does no harm.
//!
//! A flush is encoded on a blocking thread into ~1 MiB chunks, each sent as soon as it is
//! ready: while carbon keeps up, only a few chunks of even a million-series flush are in memory
//! at once; when it does not, chunks wait in the retry buffer (`retryBufferBytes`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agg::Snapshot;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::window::{in_flight_capacity, Payload, SentWindow};
use super::GraphiteConfig;
use super::{Chunked, GraphiteNames};
use crate::clock::unix_now_s;
use crate::sinks::backoff::{Backoff, FINAL_DEADLINE, SENDER_STEPS};
use crate::sinks::{Context, DropReason, Flushes, SinkTelemetry};
use tokio::task::JoinHandle;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Encoded chunks waiting to be sent while the encoder goes on.
const CHUNKS_IN_FLIGHT: usize = 2;

/// Starts the graphite sink's task.
pub fn spawn(config: GraphiteConfig, names: GraphiteNames, context: Context) -> JoinHandle<()> {
    let sink = GraphiteSink {
        config,
        names,
        telemetry: context.telemetry.clone(),
        buffer: VecDeque::new(),
        buffered_bytes: 0,
        sent: SentWindow::new(in_flight_capacity()),
        connection: None,
        dropping: false,
        backoff: Backoff::new(SENDER_STEPS),
        retry_at: None,
    };
    tokio::spawn(sink.run(context.flushes()))
}

struct GraphiteSink {
    config: GraphiteConfig,
    names: GraphiteNames,
    telemetry: Arc<SinkTelemetry>,
    /// Payloads not yet delivered, oldest first.
    buffer: VecDeque<Payload>,
    buffered_bytes: u64,
    /// Written on the current connection, kept to be sent again if it breaks.
    sent: SentWindow,
    connection: Option<TcpStream>,
    /// The buffer has been dropping since the last delivery (logged once per such run).
    dropping: bool,
    /// The waits between tries while carbon fails.
    backoff: Backoff,
    /// When to try again what the buffer holds.
    retry_at: Option<Instant>,
}

impl GraphiteSink {
    async fn run(mut self, mut snapshots: Flushes) {
        loop {
            let retry_at = self.retry_at;
            tokio::select! {
                snapshot = snapshots.next() => match snapshot {
                    Some(snapshot) => self.flush(snapshot).await,
                    None => break,
                },
                _ = tokio::time::sleep_until(retry_at.unwrap_or_else(Instant::now).into()), if retry_at.is_some() && !self.buffer.is_empty() => {
                    self.telemetry.retries.add(1);
                    if self.deliver().await {
                        self.telemetry.succeeded(unix_now_s());
                    }
                }
            }
        }
        self.deliver_before(Instant::now() + FINAL_DEADLINE).await;
        if !self.buffer.is_empty() {
            let lines: usize = self.buffer.iter().map(|payload| payload.lines).sum();
            self.telemetry.drop_points(DropReason::Shutdown, lines as u64);
            tracing::error!(lines, bytes = self.buffered_bytes, "graphite unreachable at exit: undelivered lines lost");
        }
    }

    async fn flush(&mut self, snapshot: Arc<Snapshot>) {
        let (ts, processing_ms) = (snapshot.timestamp, snapshot.processing_time_ms);
        let started = Instant::now();
        let (chunks, mut ready) = mpsc::channel::<String>(CHUNKS_IN_FLIGHT);
        let names = self.names.clone();
        // Etsy's calculationtime is the encoding alone: time spent waiting for delivery to take
        // a chunk is left out.
        let encoder = tokio::task::spawn_blocking(move || {
            let (started, mut waited) = (Instant::now(), Duration::ZERO);
            let mut out = Chunked::new(|chunk: String| {
                let waiting = Instant::now();
                // The receiver lives until every chunk is read.
                let _ = chunks.blocking_send(chunk);
                waited += waiting.elapsed();
            });
            names.encode(&snapshot, &mut out);
            out.finish();
            started.elapsed().saturating_sub(waited).as_secs_f64() * 1000.0
        });
        let mut length = 0usize;
        let mut reachable = true;
        while let Some(chunk) = ready.recv().await {
            length += chunk.len();
            // Etsy: without graphiteHost the backend computes but sends nothing.
            if self.config.host.is_some() {
                self.buffer_chunk(chunk);
                if reachable {
                    reachable = self.deliver().await;
                }
            }
        }
        let calculation_ms = encoder.await.unwrap_or_else(|error| {
            tracing::error!(%error, "graphite encoding failed: this flush is incomplete");
            0.0
        });
        let mut tail = String::new();
        let mut out = Chunked::new(|chunk: String| tail.push_str(&chunk));
        self.names.internal_line(out.line(), "graphiteStats.calculationtime", calculation_ms, ts);
        self.names.internal_line(out.line(), "processing_time", processing_ms, ts);
        self.append_own_stats(&mut out, ts);
        out.finish();
        length += tail.len();
        self.telemetry.last_flush_bytes.set(length as u64);
        if self.config.host.is_some() {
            self.buffer_chunk(tail);
            if reachable && self.deliver().await {
                self.telemetry.last_flush_us.set(started.elapsed().as_micros() as u64);
                self.telemetry.succeeded(unix_now_s());
            }
        }
    }

    /// Queues a chunk for delivery, within `retryBufferBytes`.
    fn buffer_chunk(&mut self, chunk: String) {
        let payload = Payload::new(chunk, self.config.protocol);
        self.buffered_bytes += payload.bytes.len() as u64;
        self.buffer.push_back(payload);
        self.enforce_buffer_limit();
    }

    /// With `histdSelfMetrics`, histd's buffer state; then Etsy's `graphiteStats.*` lines
    /// about the previous delivery, in Etsy's order (`flush_length` is a flush's last line).
    fn append_own_stats(&self, out: &mut Chunked<impl FnMut(String)>, ts: u64) {
        if self.config.self_metrics {
            let dropped: u64 = DropReason::ALL.iter().map(|reason| self.telemetry.dropped(*reason)).sum();
            let histd = [
                ("retry_buffer_bytes", self.buffered_bytes as f64),
                ("dropped_lines", dropped as f64),
                ("errors", self.telemetry.errors.get() as f64),
            ];
            for (name, value) in histd {
                self.names.internal_line(out.line(), &format!("graphiteStats.{name}"), value, ts);
            }
        }
        let etsy = self.telemetry.etsy_entries();
        let value = |name: &str| etsy.iter().find(|(n, _)| *n == name).map_or(0.0, |(_, v)| *v);
        for name in ["last_exception", "last_flush", "flush_time", "flush_length"] {
            self.names.internal_line(out.line(), &format!("graphiteStats.{name}"), value(name), ts);
        }
    }

    async fn deliver_before(&mut self, deadline: Instant) {
        while !self.buffer.is_empty() && Instant::now() < deadline {
            self.deliver().await;
            if !self.buffer.is_empty() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }

    /// Sends buffered payloads in order until one fails; false when one failed.
    async fn deliver(&mut self) -> bool {
        while let Some(payload) = self.buffer.pop_front() {
            let length = payload.bytes.len();
            let result = match self.connected().await {
                Ok(connection) => write_all(connection, &payload.bytes).await,
                Err(error) => Err(error),
            };
            if let Err(error) = result {
                self.buffer.push_front(payload);
                self.connection_broke();
                self.record_error(&error);
                self.retry_at = Some(Instant::now() + self.backoff.failed(None));
                return false;
            }
            self.buffered_bytes -= length as u64;
            self.telemetry.points_out.add(payload.lines as u64);
            self.telemetry.bytes_out.add(length as u64);
            self.sent.written(payload);
            self.sent.shrink_to(self.config.retry_buffer_bytes.saturating_sub(self.buffered_bytes));
            self.publish_held_bytes();
            self.dropping = false;
        }
        self.backoff.reset();
        self.retry_at = None;
        true
    }

    /// The connection is gone: what it may not have delivered goes back to the front of the
    /// buffer, and what could no longer be kept for that is counted.
    fn connection_broke(&mut self) {
        self.connection = None;
        let broken = self.sent.broken();
        self.telemetry.drop_points(DropReason::PossiblyLost, broken.possibly_lost as u64);
        let resent: usize = broken.resend.iter().map(|payload| payload.lines).sum();
        self.telemetry.resent_points.add(resent as u64);
        for payload in broken.resend.into_iter().rev() {
            self.buffered_bytes += payload.bytes.len() as u64;
            self.buffer.push_front(payload);
        }
        self.enforce_buffer_limit();
    }

    /// What is held: unsent (`buffered_bytes`) and kept to resend (`resend_window_bytes`).
    fn publish_held_bytes(&self) {
        self.telemetry.buffered_bytes.set(self.buffered_bytes);
        self.telemetry.resend_window_bytes.set(self.sent.bytes());
    }

    /// The open connection, or a new one when there is none or carbon closed it.
    async fn connected(&mut self) -> std::io::Result<&mut TcpStream> {
        if self.connection.as_ref().is_some_and(|c| !is_open(c)) {
            self.connection_broke();
        }
        if self.connection.is_none() {
            let host = self.config.host.as_deref().unwrap_or("127.0.0.1");
            let address = (host, self.config.port);
            let connection = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address))
                .await
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))??;
            connection.set_nodelay(true)?;
            self.connection = Some(connection);
        }
        Ok(self.connection.as_mut().unwrap_or_else(|| unreachable!("set above")))
    }

    fn record_error(&self, error: &std::io::Error) {
        let first = self.telemetry.errors.get() == 0;
        self.telemetry.failed(unix_now_s());
        if first {
            let host = self.config.host.as_deref().unwrap_or_default();
            tracing::warn!(%error, host, port = self.config.port, "graphite delivery failed; buffering");
        } else {
            tracing::debug!(%error, "graphite delivery failed again");
        }
    }

    /// Drops the oldest undelivered chunks beyond `retryBufferBytes`, counting their lines
    /// (logged once per run of drops between deliveries).
    fn enforce_buffer_limit(&mut self) {
        // What is kept only for a resend goes first.
        self.sent.shrink_to(self.config.retry_buffer_bytes.saturating_sub(self.buffered_bytes));
        // The newest chunk always stays (it is next to be tried): a limit below one chunk
        // (~1 MiB) must not drop every flush while carbon is fine.
        while self.buffered_bytes > self.config.retry_buffer_bytes && self.buffer.len() > 1 {
            let Some(oldest) = self.buffer.pop_front() else { break };
            self.buffered_bytes -= oldest.bytes.len() as u64;
            self.telemetry.drop_points(DropReason::BufferFull, oldest.lines as u64);
            if !self.dropping {
                self.dropping = true;
                let limit = self.config.retry_buffer_bytes;
                tracing::warn!(
                    limit,
                    "graphite retry buffer full: dropping the oldest lines (counted in dropped_points.buffer_full)"
                );
            }
        }
        self.publish_held_bytes();
    }
}

async fn write_all(connection: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    match tokio::time::timeout(WRITE_TIMEOUT, connection.write_all(bytes)).await {
        Ok(result) => result,
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "write timed out")),
    }
}

/// False when carbon has closed the connection (a read would return end of file or an error).
fn is_open(connection: &TcpStream) -> bool {
    let mut probe = [0u8; 64];
    match connection.try_read(&mut probe) {
        Ok(0) => false,
        Ok(_) => true,
        Err(error) => error.kind() == std::io::ErrorKind::WouldBlock,
    }
}
