//! The tasks: one applies each flush to the cumulative [`Registry`] (read by `/metrics`) and
//! encodes remote-write requests once per histogram mode; one per remote-write target sends
//! them in order, holding what its receiver does not take in a retry buffer bounded in bytes.
//!
//! A target ([`crate::sinks::delivery`]) retries 5xx, 429 and connection failures with
//! backoff (0.25 s doubling to 5 s), in order, so each series' samples arrive in time order;
//! any other status drops that request (`dropped_points.rejected`), as the remote-write spec
//! asks.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agg::Snapshot;
use hyper::Method;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::config::{HistogramMode, PrometheusConfig, RemoteWriteTarget};
use super::encode::{encode, Flush, Request};
use super::samples::Layout;
use super::state::Registry;
use crate::clock::unix_now_s;
use crate::sinks::delivery::{plain_judge, Destination, BATCH_QUEUE};
use crate::sinks::{Context, DropReason, Flushes, SinkTelemetry, Started};

/// The cumulative series and how `/metrics` lays out their histograms.
#[derive(Debug)]
pub struct Exposed {
    /// Every series.
    pub registry: Mutex<Registry>,
    /// `scrapeHistograms` with the classic boundaries.
    pub layout: Layout,
}

/// Starts the backend: the registry task and one task per remote-write target, each target
/// counting into its own telemetry (`prometheus.<name>`, in config order). Offers the
/// registry's series (`Arc<Exposed>`) to `/metrics`.
pub fn spawn(config: PrometheusConfig, context: Context) -> anyhow::Result<Started> {
    // Every target's destination first: one whose TLS files do not read starts nothing.
    let destinations = config.remote_write.iter().map(destination).collect::<anyhow::Result<Vec<_>>>()?;
    let targets: Vec<Arc<SinkTelemetry>> = config
        .remote_write
        .iter()
        .map(|target| context.target_telemetry(&target.name, target.http.retry_buffer_bytes))
        .collect();
    let exposed = Arc::new(Exposed {
        registry: Mutex::new(
            Registry::new(config.timer_seconds, native_schema(&config), config.mapping.clone())
                .with_classic_bounds(if uses_classic_buckets(&config) { &config.buckets } else { &[] }),
        ),
        layout: Layout::new(config.scrape_histograms, &config.buckets),
    });
    let (receiver, telemetry) = (context.flushes(), context.telemetry);
    let mut queues = Vec::new();
    let mut tasks = Vec::new();
    for ((target, target_telemetry), destination) in config.remote_write.iter().zip(&targets).zip(destinations) {
        let (batches, waiting) = mpsc::channel(BATCH_QUEUE);
        tasks.push(tokio::spawn(destination.outbox(target_telemetry.clone()).run(waiting)));
        queues.push(TargetQueue { mode: target.histograms, batches, telemetry: target_telemetry.clone() });
    }
    let task = tokio::spawn(run(exposed.clone(), config, telemetry.clone(), receiver, queues, tasks));
    Ok(Started { task, targets, offered: vec![exposed as Arc<dyn std::any::Any + Send + Sync>] })
}

/// The schema native histograms are kept at, when a target sends them.
fn native_schema(config: &PrometheusConfig) -> Option<i32> {
    let native = config.scrape_histograms == HistogramMode::Native
        || config.remote_write.iter().any(|target| target.histograms == HistogramMode::Native);
    native.then_some(config.native_schema)
}

struct TargetQueue {
    mode: HistogramMode,
    batches: mpsc::Sender<Vec<Request>>,
    telemetry: Arc<SinkTelemetry>,
}

async fn run(
    exposed: Arc<Exposed>,
    config: PrometheusConfig,
    telemetry: Arc<SinkTelemetry>,
    mut snapshots: Flushes,
    queues: Vec<TargetQueue>,
    tasks: Vec<JoinHandle<()>>,
) {
    let config = Arc::new(config);
    while let Some(snapshot) = snapshots.next().await {
        let modes: Vec<HistogramMode> = queues.iter().map(|queue| queue.mode).collect();
        let (exposed, config) = (exposed.clone(), config.clone());
        let applied = tokio::task::spawn_blocking(move || apply(&exposed, &config, &snapshot, &modes)).await;
        let Ok(batches) = applied else {
            telemetry.failed(unix_now_s());
            tracing::error!("the prometheus backend failed to apply a flush");
            continue;
        };
        for (queue, batch) in queues.iter().zip(batches) {
            let samples: u64 = batch.iter().map(|request| request.points).sum();
            if queue.batches.try_send(batch.to_vec()).is_err() {
                queue.telemetry.queue_full_drops.add(1);
                queue.telemetry.drop_points(DropReason::BufferFull, samples);
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
/// target's mode (once per mode); a late interval is only added (nothing to send).
fn apply(
    exposed: &Exposed,
    config: &PrometheusConfig,
    snapshot: &Snapshot,
    modes: &[HistogramMode],
) -> Vec<Arc<Vec<Request>>> {
    let mut registry = exposed.registry.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    registry.apply(snapshot);
    if snapshot.late {
        // Folded into the totals: the next flush's remote write carries them.
        return Vec::new();
    }
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

/// Remote write 1.0's headers (the target's own follow them).
fn remote_write_headers() -> Vec<(String, String)> {
    let fixed = [
        ("content-encoding", "snappy"),
        ("content-type", "application/x-protobuf"),
        ("x-prometheus-remote-write-version", "0.1.0"),
    ];
    fixed.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect()
}

/// Where a remote-write target's requests go, read as the remote-write spec says: 5xx and 429
/// retried, any other status dropped.
fn destination(target: &RemoteWriteTarget) -> anyhow::Result<Destination> {
    let name = format!("prometheus.{}", target.name);
    target.http.destination(&name, Method::POST, remote_write_headers(), plain_judge, "prometheus.remoteWrite[]")
}

/// Whether anything exports classic `le` buckets: the scrape (native scrapes carry them
/// beside the native buckets) or a remote-write target.
fn uses_classic_buckets(config: &PrometheusConfig) -> bool {
    config.scrape_histograms != HistogramMode::Vmrange
        || config.remote_write.iter().any(|target| target.histograms == HistogramMode::Classic)
}
