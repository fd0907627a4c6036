//! The tasks: one applies each flush to the cumulative [`Registry`] (read by `/metrics`) and
//! encodes remote-write requests once per histogram mode; one per remote-write target sends
//! them in order, holding what its receiver does not take in a retry buffer bounded in bytes.
//!
//! A target retries 5xx, 429 and connection failures with backoff (0.25 s doubling to 5 s),
//! in order, so each series' samples arrive in time order; any other status drops that
//! request (`dropped_points.rejected`), as the remote-write spec asks.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agg::Snapshot;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::config::{HistogramMode, PrometheusConfig, RemoteWriteTarget};
use super::encode::{encode, Flush, Request};
use super::samples::Layout;
use super::state::Registry;
use crate::ingest::unix_now_s;
use crate::sinks::http_client::{Client, Outcome};
use crate::sinks::{DropReason, SinkHandle, SinkTelemetry, SNAPSHOT_QUEUE};

/// Flushes' requests a target may have waiting to enter its retry buffer.
const BATCH_QUEUE: usize = 16;
/// Retries back off as Prometheus' own remote write does (its max_backoff is 5 s): a
/// receiver that comes back is written to within seconds.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// At shutdown, how long a target keeps trying to deliver what it holds.
const FINAL_DEADLINE: Duration = Duration::from_secs(5);

/// The cumulative series and how `/metrics` lays out their histograms.
#[derive(Debug)]
pub struct Exposed {
    /// Every series.
    pub registry: Mutex<Registry>,
    /// `scrapeHistograms` with the classic boundaries.
    pub layout: Layout,
}

/// Starts the backend: the registry task and one task per remote-write target, each target
/// counting into its own telemetry (`targets`, in config order).
pub fn spawn(
    config: PrometheusConfig,
    telemetry: Arc<SinkTelemetry>,
    targets: Vec<Arc<SinkTelemetry>>,
) -> (SinkHandle, Arc<Exposed>) {
    let exposed = Arc::new(Exposed {
        registry: Mutex::new(Registry::new(config.timer_seconds, native_schema(&config), config.mapping.clone())),
        layout: Layout::new(config.scrape_histograms, &config.buckets),
    });
    let (sender, receiver) = mpsc::channel(SNAPSHOT_QUEUE);
    let mut queues = Vec::new();
    let mut tasks = Vec::new();
    for (target, target_telemetry) in config.remote_write.iter().zip(&targets) {
        let (batches, waiting) = mpsc::channel(BATCH_QUEUE);
        tasks.push(tokio::spawn(Delivery::new(target, target_telemetry.clone()).run(waiting)));
        queues.push(TargetQueue { mode: target.histograms, batches, telemetry: target_telemetry.clone() });
    }
    let task = tokio::spawn(run(exposed.clone(), config, telemetry.clone(), receiver, queues, tasks));
    (SinkHandle { snapshots: Some(sender), telemetry, targets, task }, exposed)
}

/// The schema native histograms are kept at, when a target sends them.
fn native_schema(config: &PrometheusConfig) -> Option<i32> {
    let native = config.scrape_histograms == HistogramMode::Native
        || config.remote_write.iter().any(|target| target.histograms == HistogramMode::Native);
    native.then_some(config.native_schema)
}

struct TargetQueue {
    mode: HistogramMode,
    batches: mpsc::Sender<Arc<Vec<Request>>>,
    telemetry: Arc<SinkTelemetry>,
}

async fn run(
    exposed: Arc<Exposed>,
    config: PrometheusConfig,
    telemetry: Arc<SinkTelemetry>,
    mut snapshots: mpsc::Receiver<Arc<Snapshot>>,
    queues: Vec<TargetQueue>,
    tasks: Vec<JoinHandle<()>>,
) {
    let config = Arc::new(config);
    while let Some(snapshot) = snapshots.recv().await {
        telemetry.dequeued(snapshot.queue_bytes, snapshots.len());
        let modes: Vec<HistogramMode> = queues.iter().map(|queue| queue.mode).collect();
        let (exposed, config) = (exposed.clone(), config.clone());
        let applied = tokio::task::spawn_blocking(move || apply(&exposed, &config, &snapshot, &modes)).await;
        let Ok(batches) = applied else {
            telemetry.failed(unix_now_s());
            tracing::error!("the prometheus backend failed to apply a flush");
            continue;
        };
        for (queue, batch) in queues.iter().zip(batches) {
            let samples: usize = batch.iter().map(|request| request.samples).sum();
            if queue.batches.try_send(batch).is_err() {
                queue.telemetry.queue_full_drops.add(1);
                queue.telemetry.drop_points(DropReason::BufferFull, samples as u64);
            }
        }
        telemetry.succeeded(unix_now_s());
    }
    drop(queues);
    for task in tasks {
        let _ = task.await;
    }
}

/// Adds a flush to the registry, forgets expired series, and encodes the requests for each
/// target's mode (once per mode).
fn apply(
    exposed: &Exposed,
    config: &PrometheusConfig,
    snapshot: &Snapshot,
    modes: &[HistogramMode],
) -> Vec<Arc<Vec<Request>>> {
    let mut registry = exposed.registry.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    registry.apply(snapshot);
    let forgotten = registry.expire(snapshot.timestamp, config.ttl.map(|ttl| ttl.as_secs()));
    let timestamp_ms = snapshot.timestamp as i64 * 1000;
    let start_ms = timestamp_ms - snapshot.interval.min(Duration::from_secs(3600)).as_millis() as i64;
    let mut encoded: Vec<(HistogramMode, Arc<Vec<Request>>)> = Vec::new();
    modes
        .iter()
        .map(|&mode| {
            if let Some((_, requests)) = encoded.iter().find(|(m, _)| *m == mode) {
                return requests.clone();
            }
            let layout = Layout::new(mode, &config.buckets);
            let flush = Flush { layout: &layout, timestamp_ms, start_ms, external_labels: &config.external_labels };
            let requests = Arc::new(encode(&registry, &flush, &forgotten));
            encoded.push((mode, requests.clone()));
            requests
        })
        .collect()
}

/// Remote write 1.0's headers, then the target's own.
fn remote_write_headers(own: &[(String, String)]) -> Vec<(String, String)> {
    let fixed = [
        ("content-encoding", "snappy"),
        ("content-type", "application/x-protobuf"),
        ("x-prometheus-remote-write-version", "0.1.0"),
    ];
    fixed.iter().map(|(name, value)| (name.to_string(), value.to_string())).chain(own.iter().cloned()).collect()
}

/// One target's sender and retry buffer.
struct Delivery {
    name: String,
    client: Client,
    buffer: VecDeque<Request>,
    buffered_bytes: u64,
    limit: u64,
    telemetry: Arc<SinkTelemetry>,
    backoff: Duration,
    retry_at: Option<Instant>,
    /// Failing since the last delivery (logged once per run of failures).
    failing: bool,
    /// Dropping since the last delivery (logged once per run).
    dropping: bool,
}

impl Delivery {
    fn new(target: &RemoteWriteTarget, telemetry: Arc<SinkTelemetry>) -> Delivery {
        Delivery {
            name: target.name.clone(),
            client: Client::new(target.url.clone(), remote_write_headers(&target.headers), target.timeout),
            buffer: VecDeque::new(),
            buffered_bytes: 0,
            limit: target.retry_buffer_bytes,
            telemetry,
            backoff: FIRST_BACKOFF,
            retry_at: None,
            failing: false,
            dropping: false,
        }
    }

    async fn run(mut self, mut batches: mpsc::Receiver<Arc<Vec<Request>>>) {
        loop {
            let retry_at = self.retry_at;
            tokio::select! {
                batch = batches.recv() => match batch {
                    Some(batch) => {
                        self.take(&batch);
                        if self.retry_at.is_none() {
                            self.deliver().await;
                        }
                    }
                    None => break,
                },
                _ = tokio::time::sleep_until(retry_at.unwrap_or_else(Instant::now)), if retry_at.is_some() => {
                    self.telemetry.retries.add(1);
                    self.deliver().await;
                }
            }
        }
        self.deliver_before(Instant::now() + FINAL_DEADLINE).await;
        if !self.buffer.is_empty() {
            let samples: usize = self.buffer.iter().map(|request| request.samples).sum();
            self.telemetry.drop_points(DropReason::Shutdown, samples as u64);
            tracing::error!(target = %self.name, samples, "remote-write receiver unreachable at exit: undelivered samples lost");
        }
    }

    /// Queues a flush's requests, within the retry buffer's bytes: the oldest go first, the
    /// newest request always stays.
    fn take(&mut self, batch: &[Request]) {
        for request in batch {
            self.buffered_bytes += request.body.len() as u64;
            self.buffer.push_back(request.clone());
        }
        while self.buffered_bytes > self.limit && self.buffer.len() > 1 {
            let Some(oldest) = self.buffer.pop_front() else { break };
            self.buffered_bytes -= oldest.body.len() as u64;
            self.telemetry.drop_points(DropReason::BufferFull, oldest.samples as u64);
            if !self.dropping {
                self.dropping = true;
                tracing::warn!(target = %self.name, limit = self.limit, "remote-write retry buffer full: dropping the oldest samples (dropped_points.buffer_full)");
            }
        }
        self.telemetry.buffered_bytes.set(self.buffered_bytes);
    }

    /// Sends what is buffered, in order, until a request must wait for a retry.
    async fn deliver(&mut self) {
        while let Some(request) = self.buffer.front() {
            let (body, samples) = (request.body.clone(), request.samples as u64);
            let outcome = self.client.post(body.clone()).await;
            match outcome {
                Outcome::Delivered => {
                    self.telemetry.points_out.add(samples);
                    self.telemetry.bytes_out.add(body.len() as u64);
                    self.telemetry.succeeded(unix_now_s());
                    (self.backoff, self.failing, self.dropping) = (FIRST_BACKOFF, false, false);
                }
                Outcome::Rejected(reason) => {
                    self.telemetry.failed(unix_now_s());
                    self.telemetry.drop_points(DropReason::Rejected, samples);
                    tracing::warn!(target = %self.name, samples, %reason, "remote-write receiver refused a request: dropped (dropped_points.rejected)");
                }
                Outcome::Retry(reason) => {
                    self.telemetry.failed(unix_now_s());
                    if !self.failing {
                        self.failing = true;
                        tracing::warn!(target = %self.name, %reason, "remote write failed; buffering and retrying");
                    } else {
                        tracing::debug!(target = %self.name, %reason, "remote write failed again");
                    }
                    self.retry_at = Some(Instant::now() + self.backoff);
                    self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
                    return;
                }
            }
            self.buffer.pop_front();
            self.buffered_bytes -= body.len() as u64;
            self.telemetry.buffered_bytes.set(self.buffered_bytes);
        }
        self.retry_at = None;
    }

    async fn deliver_before(&mut self, deadline: Instant) {
        while !self.buffer.is_empty() && Instant::now() < deadline {
            self.deliver().await;
            if let Some(retry_at) = self.retry_at {
                tokio::time::sleep_until(retry_at.min(deadline)).await;
            }
        }
    }
}
