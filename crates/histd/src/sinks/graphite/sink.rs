//! Delivery to carbon: an [`Outbox`] of payload chunks bounded by `retryBufferBytes`, sent
//! over one persistent TCP connection ([`Carbon`]) that is opened again after a failure.
//! Graphite points are idempotent (same name and time overwrite), so a chunk resent after a
//! partial write does no harm.
//!
//! A flush is encoded on a blocking thread into ~64 KiB chunks, each sent as soon as it is
//! ready: while carbon keeps up, only a few chunks of even a million-series flush are in memory
//! at once; when it does not, chunks wait in the retry buffer (`retryBufferBytes`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use agg::Snapshot;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::window::{in_flight_capacity, AtRisk, Payload, SentWindow};
use super::GraphiteConfig;
use super::{Chunked, GraphiteNames};
use crate::backoff::SENDER_STEPS;
use crate::clock::unix_now_s;
use crate::sinks::delivery::{Limits, Outbox, Parcel, Transport, Verdict};
use crate::sinks::{Context, DropReason, Flushes, SinkTelemetry};
use tokio::task::JoinHandle;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Encoded chunks waiting to be sent while the encoder goes on.
const CHUNKS_IN_FLIGHT: usize = 2;

/// Starts the graphite sink's task.
pub fn spawn(config: GraphiteConfig, names: GraphiteNames, context: Context) -> JoinHandle<()> {
    let telemetry = context.telemetry.clone();
    let carbon = Carbon {
        host: config.host.clone().unwrap_or_else(|| "127.0.0.1".to_string()),
        port: config.port,
        connection: None,
        sent: SentWindow::new(in_flight_capacity()),
        at_risk: AtRisk::default(),
        resend: Vec::new(),
        telemetry: telemetry.clone(),
    };
    let limits = Limits { bytes: config.retry_buffer_bytes, parcels: usize::MAX, steps: SENDER_STEPS };
    let outbox = Outbox::new("graphite", carbon, limits, telemetry.clone());
    let sink = GraphiteSink { config, names, telemetry, outbox };
    tokio::spawn(sink.run(context.flushes()))
}

struct GraphiteSink {
    config: GraphiteConfig,
    names: GraphiteNames,
    telemetry: Arc<SinkTelemetry>,
    /// Payloads not yet delivered, oldest first.
    outbox: Outbox<Carbon>,
}

impl GraphiteSink {
    async fn run(mut self, mut snapshots: Flushes) {
        loop {
            let retry_at = self.outbox.retry_at();
            tokio::select! {
                snapshot = snapshots.next() => match snapshot {
                    Some(snapshot) => self.flush(snapshot).await,
                    None => break,
                },
                _ = tokio::time::sleep_until(retry_at.unwrap_or_else(tokio::time::Instant::now)), if retry_at.is_some() && !self.outbox.is_empty() => {
                    self.outbox.retry().await;
                }
            }
        }
        self.outbox.finish().await;
    }

    async fn flush(&mut self, snapshot: Arc<Snapshot>) {
        let (ts, processing_ms, late) = (snapshot.timestamp, snapshot.processing_time_ms, snapshot.late);
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
                self.outbox.push(Payload::new(chunk, self.config.protocol));
                if reachable {
                    reachable = self.outbox.deliver().await;
                }
            }
        }
        let calculation_ms = encoder.await.unwrap_or_else(|error| {
            tracing::error!(%error, "graphite encoding failed: this flush is incomplete");
            0.0
        });
        if late {
            // A late interval (forwarded batches placed at the flush they belong to) has no
            // timing or delivery lines of its own: that second has them already.
            return;
        }
        let mut tail = String::new();
        let mut out = Chunked::new(|chunk: String| tail.push_str(&chunk));
        self.names.internal_line(out.line(), "graphiteStats.calculationtime", calculation_ms, ts);
        self.names.internal_line(out.line(), "processing_time", processing_ms, ts);
        self.append_own_stats(&mut out, ts);
        out.finish();
        length += tail.len();
        self.telemetry.last_flush_bytes.set(length as u64);
        if self.config.host.is_some() {
            self.outbox.push(Payload::new(tail, self.config.protocol));
            if reachable && self.outbox.deliver().await {
                self.telemetry.last_flush_us.set(started.elapsed().as_micros() as u64);
                self.telemetry.succeeded(unix_now_s());
            }
        }
    }

    /// With `histdSelfMetrics`, histd's buffer state; then Etsy's `graphiteStats.*` lines
    /// about the previous delivery, in Etsy's order (`flush_length` is a flush's last line).
    fn append_own_stats(&self, out: &mut Chunked<impl FnMut(String)>, ts: u64) {
        if self.config.self_metrics {
            let dropped: u64 = DropReason::ALL.iter().map(|reason| self.telemetry.dropped(*reason)).sum();
            let histd = [
                ("retry_buffer_bytes", self.telemetry.buffered_bytes.get() as f64),
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
}

/// The way to carbon: one connection, opened when there is none or carbon closed it; what was
/// written on it is kept (as the outbox's room allows) to be sent again if it breaks.
struct Carbon {
    host: String,
    port: u16,
    connection: Option<TcpStream>,
    /// Written on the current connection, kept to be sent again if it breaks.
    sent: SentWindow,
    /// What of it carbon may not have read.
    at_risk: AtRisk,
    /// What a broken connection hands back, for the outbox to put first.
    resend: Vec<Payload>,
    telemetry: Arc<SinkTelemetry>,
}

impl Parcel for Payload {
    fn bytes(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn points(&self) -> u64 {
        self.lines as u64
    }
}

impl Transport for Carbon {
    type Parcel = Payload;

    async fn send(&mut self, payload: &Payload) -> Verdict {
        let result = match self.connected().await {
            Ok(connection) => write_all(connection, &payload.bytes).await,
            Err(error) => Err(error),
        };
        match result {
            Ok(()) => Verdict::DELIVERED,
            Err(error) => {
                self.connection_broke();
                Verdict::Retry { reason: format!("{}:{}: {error}", self.host, self.port), after: None }
            }
        }
    }

    fn delivered(&mut self, payload: Payload) {
        self.sent.written(payload);
        if let Some(at_risk) = self.connection.as_ref().and_then(|connection| self.at_risk.now(connection)) {
            self.sent.settle(at_risk);
        }
        self.telemetry.resend_window_bytes.set(self.sent.bytes());
    }

    fn take_resend(&mut self) -> Vec<Payload> {
        std::mem::take(&mut self.resend)
    }

    fn room(&mut self, bytes: u64) {
        self.sent.shrink_to(bytes);
        self.telemetry.resend_window_bytes.set(self.sent.bytes());
    }
}

impl Carbon {
    /// The connection is gone: what it may not have delivered is to be sent again, and what
    /// could no longer be kept for that is counted.
    fn connection_broke(&mut self) {
        self.connection = None;
        let broken = self.sent.broken();
        self.telemetry.drop_points(DropReason::PossiblyLost, broken.possibly_lost as u64);
        let resent: usize = broken.resend.iter().map(|payload| payload.lines).sum();
        self.telemetry.resent_points.add(resent as u64);
        self.resend.extend(broken.resend);
        self.telemetry.resend_window_bytes.set(0);
    }

    /// The open connection, or a new one when there is none or carbon closed it.
    async fn connected(&mut self) -> std::io::Result<&mut TcpStream> {
        if self.connection.as_ref().is_some_and(|c| !is_open(c)) {
            self.connection_broke();
        }
        if self.connection.is_none() {
            let address = (self.host.as_str(), self.port);
            let connection = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address))
                .await
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))??;
            connection.set_nodelay(true)?;
            self.at_risk.reset();
            self.connection = Some(connection);
        }
        Ok(self.connection.as_mut().unwrap_or_else(|| unreachable!("set above")))
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
