//! The forward backend: a local histd sends each flush's mergeable state to global histd
//! nodes, which merge the fleet's intervals exactly (`global/`).
//!
//! What it sends (format.rs, docs/forward-format.md): counters as interval sums, timers and
//! `h`/`d` histograms as exact count, sum, sum of squares, min, max and the circllhist (the
//! raw values too while at most `forward.rawValuesLimit`, so the global's percentiles stay
//! Etsy-exact), gauges updated in the interval with their update time (the latest wins at the
//! global), sets as members up to `forward.setMembersLimit` and a HyperLogLog sketch past it.
//! Each series goes to the node that owns its key (ring.rs: rendezvous hashing); each batch
//! carries an identity the global merges once. Batches wait in a spool bounded in bytes
//! (spool.rs), on disk with `forward.spoolDir`, while no node takes them.
//!
//! What it loses: nothing while the spool has room and, without `forward.spoolDir`, the
//! process lives. histd's own metrics (under `prefixStats`) stay local. A sketched set's count
//! is an estimate (~0.8%). A batch a node took whose answer was lost is sent to another node
//! when the first is marked down: then both merge it.

pub mod config;
mod sink;
#[cfg(test)]
mod tests;

pub use config::ForwardConfig;

use serde_json::Value;

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Backend, Context, FileContents, Flushes, Offered, Reload, Shared, SinkTelemetry, Started};
use crate::config_reader::keys::KeyDoc;
use crate::config_reader::{ConfigError, Reader};
use fleet::cut::CutSettings;

/// The forward backend: each flush's mergeable state to global histd nodes.
pub struct Forward;

impl Backend for Forward {
    const NAME: &'static str = "forward";
    const KEYS: &'static [KeyDoc] = config::KEYS;
    type Settings = ForwardConfig;

    fn read(top: &Reader<'_>, listed: bool) -> Result<ForwardConfig, ConfigError> {
        config::forward(top, listed)
    }

    fn effective(settings: &ForwardConfig) -> Value {
        settings.effective()
    }

    /// Its settings, the bytes of the files it reads at start, `prefixStats`, the raw values
    /// it sends (`rawValuesLimit`, else `timerSampleLimit`) and `sinkQueueBytes`.
    type Identity = (ForwardConfig, FileContents, String, usize, u64);

    fn identity(settings: &ForwardConfig, shared: &Shared) -> Self::Identity {
        let raw_values = settings.raw_values_limit.unwrap_or(shared.timer_sample_limit);
        (settings.clone(), settings.files(), shared.prefix_stats.clone(), raw_values, shared.sink_queue_bytes)
    }

    /// A spool directory the running sink writes and the new settings keep: the old sink
    /// stops first (what it holds stays in the directory), then the new one starts on it. Two
    /// sinks on one directory would number their files alike.
    fn reload(old: &ForwardConfig, new: &ForwardConfig, _running: &Offered) -> Reload {
        let kept = old.spool_dirs().any(|dir| new.spool_dirs().any(|new| new == dir));
        if kept {
            Reload::Replace
        } else {
            Reload::Restart
        }
    }

    fn check_files(settings: &ForwardConfig) -> Vec<String> {
        let destinations = std::iter::once((String::new(), settings))
            .chain(settings.paths.iter().map(|(name, path)| (format!("forward.paths {name}: "), path)));
        destinations
            .flat_map(|(name, path)| path.check_files().into_iter().map(move |why| format!("{name}{why}")))
            .collect()
    }

    fn start(settings: &ForwardConfig, context: Context) -> anyhow::Result<Started> {
        let cut = |path: &ForwardConfig| CutSettings {
            source: settings.source.clone(),
            prefix_stats: context.shared.prefix_stats.clone(),
            set_members_limit: settings.set_members_limit,
            raw_values_limit: settings.raw_values_limit.unwrap_or(context.shared.timer_sample_limit),
            max_batch_bytes: path.max_batch_bytes,
        };
        if settings.paths.is_empty() {
            let task = sink::spawn(settings, cut(settings), context.telemetry.clone(), context.flushes())?;
            return Ok(Started::task(task));
        }
        let mut queues = Vec::new();
        let mut tasks = Vec::new();
        let mut targets = Vec::new();
        for (name, path) in &settings.paths {
            let telemetry = context.target_telemetry(name, context.shared.sink_queue_bytes);
            let (queue, flushes) = Flushes::queue(telemetry.clone());
            let task = sink::spawn(path, cut(path), telemetry.clone(), flushes)
                .map_err(|error| anyhow::anyhow!("forward.paths {name}: {error}"))?;
            tasks.push(task);
            queues.push((telemetry.clone(), queue));
            targets.push(telemetry);
        }
        let task = tokio::spawn(fan_out(context.flushes(), context.telemetry.clone(), queues, tasks));
        Ok(Started { task, targets, offered: Vec::new() })
    }
}

/// Hands every flush to each path's queue (a path that is behind loses that flush alone,
/// counted in its `queue_full_drops`), then, once the backend's queue closes, lets each path
/// finish.
async fn fan_out(
    mut flushes: Flushes,
    telemetry: Arc<SinkTelemetry>,
    queues: Vec<(Arc<SinkTelemetry>, mpsc::Sender<Arc<agg::Snapshot>>)>,
    tasks: Vec<JoinHandle<()>>,
) {
    while let Some(snapshot) = flushes.next().await {
        for (path, queue) in &queues {
            super::offer(queue, path, &snapshot);
        }
        telemetry.succeeded(crate::clock::unix_now_s());
    }
    drop(queues);
    for task in tasks {
        let _ = task.await;
    }
}
