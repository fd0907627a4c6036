//! The running sinks, one per backend in config order. All start with the daemon; a reload
//! starts the backends the new config adds, restarts those whose settings changed, and
//! retires those it drops. Each flush goes whole to one generation of a sink: the flusher
//! sends to the old sink until the reload swaps the list and to the new one after, and a
//! retired sink delivers what it holds (its queue, graphite's retry buffer, forward's spool)
//! within [`SINK_GRACE`] before it ends, so no interval is lost or sent twice.
//!
//! A restarted sink starts with new telemetry (its counters begin at zero), and the
//! prometheus backend with an empty registry (a counter reset to its scrapers). The store
//! restarts only for a new `store.dataDir` (its retention and `maxBytes` apply in place; see
//! [`crate::reload`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::clock::lock;
use crate::config::{Backend, Config};
use crate::flush::{Outlet, Outlets};
use crate::ingest::TapSwitch;
use std::any::Any;

use agg::Snapshot;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::ingest::Tap;
use crate::sinks::prometheus::Exposed;
use crate::sinks::store::OpenStore;
use crate::sinks::{Context, QueueSlot};
use crate::telemetry::SinkTelemetry;

/// How long sinks get to deliver their last flushes when they stop (at shutdown, or retired
/// by a reload).
pub const SINK_GRACE: Duration = Duration::from_secs(10);

/// The running sinks.
#[derive(Debug)]
pub struct Roster {
    running: Mutex<Vec<RunningSink>>,
    /// Retired sinks still delivering.
    retiring: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Readers of flushes that are not backends (the alerts), and their telemetry.
    attached: Mutex<(Vec<Outlet>, Vec<Arc<SinkTelemetry>>)>,
    /// Where the flusher finds the sinks' queues.
    outlets: Arc<Outlets>,
    /// The repeater's tap, read by the listeners.
    tap: Arc<TapSwitch>,
    startup_s: u64,
}

struct RunningSink {
    backend: Backend,
    /// The settings it was started with ([`Backend::identity`]): a reload restarts it when
    /// they change.
    settings: Value,
    handle: SinkHandle,
    /// What it offers the rest of the daemon, found by type.
    offered: Vec<Arc<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for RunningSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningSink").field("backend", &self.backend).field("settings", &self.settings).finish()
    }
}

/// A running sink, as the flusher and the roster see it.
#[derive(Debug)]
struct SinkHandle {
    /// Where flushes are sent; `None` for sinks that read raw packets instead.
    snapshots: Option<mpsc::Sender<Arc<Snapshot>>>,
    /// What it counts, for `stats` and `/health`.
    telemetry: Arc<SinkTelemetry>,
    /// What each of its destinations counts, when it has several.
    targets: Vec<Arc<SinkTelemetry>>,
    /// Ends after its queue closes and it has delivered what it could.
    task: JoinHandle<()>,
}

/// The sinks a reload starts, and the backends whose running sinks it retires.
#[derive(Debug, Default)]
pub struct SinkPlan {
    /// In the new config's order: `Ok` a kept sink's backend, `Err` a sink started for it.
    order: Vec<Result<Backend, RunningSink>>,
    /// Backends whose new settings cannot apply while they run (named as needing a restart).
    pub kept_as_they_were: Vec<String>,
}

impl SinkPlan {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.order.iter().all(Result::is_ok)
    }
}

impl Roster {
    /// Starts a sink for each of `config`'s backends.
    pub fn start(
        config: &Config,
        startup_s: u64,
        outlets: Arc<Outlets>,
        tap: Arc<TapSwitch>,
    ) -> anyhow::Result<Roster> {
        let roster = Roster {
            running: Mutex::default(),
            retiring: Mutex::default(),
            attached: Mutex::default(),
            outlets,
            tap,
            startup_s,
        };
        let plan = roster.plan(config)?;
        roster.apply(plan);
        Ok(roster)
    }

    /// Starts what `config` adds or changes; the running sinks are not touched until
    /// [`Roster::apply`]. An error (a store directory that cannot be opened, a spool that
    /// cannot be read) names the key, and the sinks started for the plan are stopped.
    pub fn plan(&self, config: &Config) -> anyhow::Result<SinkPlan> {
        let running: Vec<(Backend, Value)> =
            lock(&self.running).iter().map(|sink| (sink.backend, sink.settings.clone())).collect();
        let mut plan = SinkPlan::default();
        for &backend in &config.backends {
            let wanted = backend.identity(config);
            let old = running.iter().find(|(b, _)| *b == backend).map(|(_, settings)| settings);
            if old == Some(&wanted) {
                plan.order.push(Ok(backend));
                continue;
            }
            if old.is_some_and(|old| shares_a_spool(old, &wanted)) {
                // Two forward sinks on one spool directory would number files alike.
                plan.order.push(Ok(backend));
                plan.kept_as_they_were.push(backend.name().to_string());
                continue;
            }
            match self.start_sink(config, backend, wanted) {
                Ok(sink) => plan.order.push(Err(sink)),
                Err(error) => {
                    self.retire(plan.order.into_iter().filter_map(Result::err).collect());
                    return Err(error);
                }
            }
        }
        Ok(plan)
    }

    /// Puts a plan in force: the flusher sends the next flush to the new list; sinks no longer
    /// in it finish delivering on their own. Returns what changed, for the log.
    pub fn apply(&self, plan: SinkPlan) -> Vec<String> {
        let mut changes = Vec::new();
        let retired = {
            let mut running = lock(&self.running);
            let mut old = std::mem::take(&mut *running);
            for entry in plan.order {
                match entry {
                    Ok(backend) => {
                        let at = old.iter().position(|sink| sink.backend == backend);
                        running.extend(at.map(|at| old.remove(at)));
                    }
                    Err(sink) => {
                        let restarted = old.iter().any(|old| old.backend == sink.backend);
                        changes.push(format!(
                            "{} {}",
                            if restarted { "restarted" } else { "started" },
                            sink.backend.name()
                        ));
                        running.push(sink);
                    }
                }
            }
            let kept_or_restarted = |backend: Backend| running.iter().any(|sink| sink.backend == backend);
            changes.extend(
                old.iter()
                    .filter(|sink| !kept_or_restarted(sink.backend))
                    .map(|sink| format!("stopped {}", sink.backend.name())),
            );
            self.publish_outlets(&running);
            let tap = running.iter().find_map(|sink| sink.offered::<Tap>()).map(|tap| (*tap).clone());
            self.tap.set(tap);
            old
        };
        self.retire(retired);
        changes
    }

    /// Sends every flush to `outlet` too (after the backends), its `telemetry` shown beside
    /// theirs.
    pub fn attach(&self, outlet: Outlet, telemetry: Vec<Arc<SinkTelemetry>>) {
        {
            let mut attached = lock(&self.attached);
            attached.0.push(outlet);
            attached.1.extend(telemetry);
        }
        self.publish_outlets(&lock(&self.running));
    }

    /// The flusher's queues: the running sinks', then the attached readers'.
    fn publish_outlets(&self, running: &[RunningSink]) {
        let mut outlets: Vec<Outlet> = running.iter().filter_map(RunningSink::outlet).collect();
        outlets.extend(lock(&self.attached).0.iter().cloned());
        self.outlets.set(outlets);
    }

    /// Every running sink's telemetry (and its targets'), then the attached readers', for
    /// `stats`, `/health`, `/metrics`.
    pub fn telemetry(&self) -> Vec<Arc<SinkTelemetry>> {
        let mut all: Vec<Arc<SinkTelemetry>> = lock(&self.running)
            .iter()
            .flat_map(|sink| std::iter::once(&sink.handle.telemetry).chain(&sink.handle.targets).cloned())
            .collect();
        all.extend(lock(&self.attached).1.iter().cloned());
        all
    }

    /// The prometheus backend's series, while it runs.
    pub fn prometheus(&self) -> Option<Arc<Exposed>> {
        lock(&self.running).iter().find_map(|sink| sink.offered::<Exposed>())
    }

    /// The store's writer and its database file, while the store backend runs.
    pub fn store(&self) -> Option<OpenStore> {
        lock(&self.running).iter().find_map(|sink| sink.offered::<OpenStore>()).map(|open| (*open).clone())
    }

    /// Stops every sink (the flusher has made its last flush): each delivers what it holds,
    /// all within [`SINK_GRACE`], retired ones included.
    pub async fn finish_all(&self) {
        let running = std::mem::take(&mut *lock(&self.running));
        lock(&self.attached).0.clear();
        self.outlets.set(Vec::new());
        self.tap.set(None);
        let mut tasks: Vec<_> = running.into_iter().map(|sink| sink.handle.task).collect();
        tasks.append(&mut lock(&self.retiring));
        let all = async {
            for task in tasks {
                let _ = task.await;
            }
        };
        if tokio::time::timeout(SINK_GRACE, all).await.is_err() {
            tracing::error!(grace_s = SINK_GRACE.as_secs(), "sinks did not finish in time");
        }
    }

    /// Closes the queues of `sinks` and lets each deliver what it holds within the grace; one
    /// that cannot (graphite whose carbon is gone) is stopped then, its loss logged.
    fn retire(&self, sinks: Vec<RunningSink>) {
        let mut retiring = lock(&self.retiring);
        retiring.retain(|task| !task.is_finished());
        for sink in sinks {
            let RunningSink { backend, handle, .. } = sink;
            let SinkHandle { snapshots, telemetry, task, .. } = handle;
            drop(snapshots);
            retiring.push(tokio::spawn(async move {
                let abort = task.abort_handle();
                if tokio::time::timeout(SINK_GRACE, task).await.is_err() {
                    abort.abort();
                    let held = telemetry.buffered_bytes.get() + telemetry.queued_bytes.get();
                    tracing::error!(
                        backend = backend.name(),
                        held_bytes = held,
                        grace_s = SINK_GRACE.as_secs(),
                        "a sink the reload retired could not deliver what it held in time: dropped"
                    );
                }
            }));
        }
    }

    fn start_sink(&self, config: &Config, backend: Backend, settings: Value) -> anyhow::Result<RunningSink> {
        let telemetry = Arc::new(
            SinkTelemetry::new(backend.name(), backend.etsy(), self.startup_s)
                .with_queue_limit(backend.queue_limit(config)),
        );
        let slot = QueueSlot::default();
        let context = Context::new(config.shared(), telemetry.clone(), self.startup_s, slot.clone());
        let started = backend.start(config, context)?;
        let handle = SinkHandle { snapshots: slot.sender(), telemetry, targets: started.targets, task: started.task };
        Ok(RunningSink { backend, settings, handle, offered: started.offered })
    }
}

impl RunningSink {
    fn outlet(&self) -> Option<Outlet> {
        Some((self.handle.telemetry.clone(), self.handle.snapshots.clone()?))
    }

    /// What it offers of type `T`.
    fn offered<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.offered.iter().find_map(|thing| thing.clone().downcast::<T>().ok())
    }
}

/// Whether a forward sink's old and new settings spool to the same directory: the old sink
/// still writes and removes its files while it delivers, so a new one cannot start beside it.
fn shares_a_spool(old: &Value, new: &Value) -> bool {
    let dir = |settings: &Value| settings.get("forward").and_then(|f| f.get("spoolDir")).cloned();
    dir(old).is_some_and(|old| !old.is_null() && Some(old) == dir(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a reload compares: a changed setting restarts a backend, a forward spool in use
    /// keeps it as it was.
    #[test]
    fn settings_name_what_a_sink_started_with() {
        let config = |text: &str| Config::from_text(text).unwrap();
        let base = config("{ backends: ['graphite', 'forward'], forward: { nodes: ['http://127.0.0.1:1'] } }");
        let cases: &[(&str, &str, bool)] = &[
            ("{ backends: ['graphite'], graphitePort: 2004 }", "graphite", true),
            ("{ backends: ['graphite'], percentThreshold: [50] }", "graphite", false),
            ("{ backends: ['graphite'], histdSelfMetrics: true }", "graphite", true),
            ("{ backends: ['forward'], forward: { nodes: ['http://127.0.0.1:1'] } }", "forward", false),
            ("{ backends: ['forward'], forward: { nodes: ['http://127.0.0.1:2'] } }", "forward", true),
            (
                "{ backends: ['forward'], forward: { nodes: ['http://127.0.0.1:1'] }, timerSampleLimit: 5 }",
                "forward",
                true,
            ),
        ];
        let settings = |config: &Config, name: &str| Backend::named(name).unwrap().identity(config);
        for (text, backend, changed) in cases {
            let differs = settings(&base, backend) != settings(&config(text), backend);
            assert_eq!(differs, *changed, "{text}");
        }
        let spooled = |nodes: &str, dir: &str| {
            settings(&config(&format!("{{ forward: {{ nodes: ['{nodes}'], spoolDir: '{dir}' }} }}")), "forward")
        };
        assert!(shares_a_spool(&spooled("http://a:1", "/s"), &spooled("http://b:1", "/s")));
        assert!(!shares_a_spool(&spooled("http://a:1", "/s"), &spooled("http://a:1", "/t")));
        assert!(!shares_a_spool(&settings(&base, "forward"), &settings(&base, "forward")));
    }
}
