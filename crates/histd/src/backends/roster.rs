//! The running sinks, one per backend in config order. All start with the daemon; a reload
//! starts the backends the new config adds, restarts those whose settings changed, and
//! retires those it drops. Each flush goes whole to one generation of a sink: the flusher
//! sends to the old sink until the reload swaps the list and to the new one after, and a
//! retired sink delivers what it holds (its queue, graphite's retry buffer, forward's spool)
//! within [`SINK_GRACE`] before it ends, so no interval is lost or sent twice.
//!
//! What a changed backend needs is its own to say ([`crate::sinks::Backend::reload`]): most
//! restart; the store takes new retention, `maxBytes`, scrub and snapshot settings in place
//! (a new `dataDir` restarts it); forward on a spool directory it keeps is replaced, the old
//! sink stopped before the new one starts on the directory, the flushes made meanwhile queued
//! for the new one. A restarted sink starts with new telemetry (its counters begin at zero),
//! and the prometheus backend with an empty registry (a counter reset to its scrapers).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::lock;
use crate::config::{Backend, Config, SinkIdentity};
use crate::flush::{Outlet, Outlets};
use crate::ingest::TapSwitch;

use agg::Snapshot;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::ingest::Tap;
use crate::sinks::prometheus::Exposed;
use crate::sinks::store::OpenStore;
use crate::sinks::{Context, Flushes, InPlace, Offered, QueueSlot, Reload};
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
    /// What it was started with ([`Backend::identity`]): a reload acts when it changes.
    identity: SinkIdentity,
    handle: SinkHandle,
    /// What it offers the rest of the daemon, found by type.
    offered: Offered,
}

impl std::fmt::Debug for RunningSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningSink").field("backend", &self.backend).finish_non_exhaustive()
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

/// What a reload does to the sinks: in the new config's order, each backend's sink kept,
/// changed in place, started (new or restarted) or to be replaced.
#[derive(Default)]
pub struct SinkPlan {
    order: Vec<Step>,
}

/// What becomes of one backend's sink.
enum Step {
    /// Kept as it runs.
    Keep(Backend),
    /// Kept, its new settings handed over by the future (its identity becomes the new one).
    InPlace(Backend, SinkIdentity, InPlace),
    /// A sink started for it (a new backend, or a restart).
    Start(RunningSink),
    /// The running one stops before one with the new identity starts ([`Roster::replace`]).
    Replace(Backend, SinkIdentity),
}

/// What [`Roster::apply`] leaves to do once the new list is in force.
#[derive(Default)]
pub struct Applied {
    /// What changed, for the log and the reload's answer.
    pub changes: Vec<String>,
    /// Settings to hand to running sinks (each future names its backend in its error).
    pub in_place: Vec<InPlace>,
    /// Backends whose sinks [`Roster::replace`] stops and starts again.
    pub replace: Vec<(Backend, SinkIdentity)>,
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
        let mut plan = SinkPlan::default();
        for &backend in &config.backends {
            let wanted = backend.identity(config);
            let reload = {
                let running = lock(&self.running);
                let old = running.iter().find(|sink| sink.backend == backend);
                decide(backend, old.map(|old| (&old.identity, &old.offered)), &wanted, config)
            };
            let step = match reload {
                None => Step::Keep(backend),
                Some(Reload::InPlace(change)) => Step::InPlace(backend, wanted, change),
                Some(Reload::Replace) => Step::Replace(backend, wanted),
                Some(Reload::Restart) => match self.start_sink(
                    &config.shared(),
                    backend,
                    wanted,
                    QueueSlot::default(),
                    self.telemetry_for(config, backend),
                ) {
                    Ok(sink) => Step::Start(sink),
                    Err(error) => {
                        let started = plan.order.into_iter().filter_map(|step| match step {
                            Step::Start(sink) => Some(sink),
                            _ => None,
                        });
                        self.retire(started.collect());
                        return Err(error);
                    }
                },
            };
            plan.order.push(step);
        }
        Ok(plan)
    }

    /// Puts a plan in force: the flusher sends the next flush to the new list; sinks no longer
    /// in it finish delivering on their own. Returns what changed, and what is left to do:
    /// the changes to hand to running sinks, the sinks to replace.
    pub fn apply(&self, plan: SinkPlan) -> Applied {
        let mut applied = Applied::default();
        let retired = {
            let mut running = lock(&self.running);
            let mut old = std::mem::take(&mut *running);
            for step in plan.order {
                let (backend, identity) = match step {
                    Step::Start(sink) => {
                        let restarted = old.iter().any(|old| old.backend == sink.backend);
                        let verb = if restarted { "restarted" } else { "started" };
                        applied.changes.push(format!("{verb} {}", sink.backend.name()));
                        running.push(sink);
                        continue;
                    }
                    Step::Keep(backend) => (backend, None),
                    Step::InPlace(backend, identity, change) => {
                        applied.changes.push(format!("changed {} in place", backend.name()));
                        applied.in_place.push(change);
                        (backend, Some(identity))
                    }
                    Step::Replace(backend, identity) => {
                        applied.replace.push((backend, identity));
                        (backend, None)
                    }
                };
                let Some(at) = old.iter().position(|sink| sink.backend == backend) else { continue };
                let mut sink = old.remove(at);
                if let Some(identity) = identity {
                    sink.identity = identity;
                }
                running.push(sink);
            }
            let stopped = old.iter().filter(|sink| !running.iter().any(|kept| kept.backend == sink.backend));
            applied.changes.extend(stopped.map(|sink| format!("stopped {}", sink.backend.name())));
            self.publish(&running);
            old
        };
        self.retire(retired);
        applied
    }

    /// Stops `backend`'s running sink and starts one with `config`'s settings (`identity`) in
    /// its place, for what two sinks cannot share (forward's spool directory): the flusher
    /// sends to the new sink's queue at once, the old one delivers what it can within
    /// [`SINK_GRACE`] (what it holds stays in its spool), then the new one starts and reads
    /// the flushes queued meanwhile. When the new one cannot start, one with the old
    /// settings takes the queue (the error is returned, naming the key).
    pub async fn replace(&self, config: &Config, backend: Backend, identity: SinkIdentity) -> Result<String, String> {
        let telemetry = self.telemetry_for(config, backend);
        let (sender, flushes) = Flushes::queue(telemetry.clone());
        let (old_identity, task) = {
            let mut running = lock(&self.running);
            let Some(old) = running.iter_mut().find(|sink| sink.backend == backend) else {
                return Ok(format!("{} not running", backend.name()));
            };
            // Until the new sink starts, the flusher sends to its queue; the old one's closes.
            old.handle.snapshots = Some(sender.clone());
            old.handle.telemetry = telemetry.clone();
            old.handle.targets.clear();
            let task = std::mem::replace(&mut old.handle.task, tokio::spawn(async {}));
            let identity = old.identity.clone();
            self.publish(&running);
            (identity, task)
        };
        let abort = task.abort_handle();
        if tokio::time::timeout(SINK_GRACE, task).await.is_err() {
            abort.abort();
            tracing::warn!(backend = backend.name(), "the replaced sink did not finish within the grace: stopped");
        }
        let slot = QueueSlot::with_queue(sender, flushes);
        let shared = config.shared();
        let (sink, outcome) = match self.start_sink(&shared, backend, identity, slot.clone(), telemetry.clone()) {
            Ok(sink) => (sink, Ok(format!("replaced {}", backend.name()))),
            Err(error) => {
                let again = self.start_sink(&shared, backend, old_identity, slot, telemetry);
                let sink = again.map_err(|again| format!("{error:#}; and with the settings before: {again:#}"))?;
                (sink, Err(format!("{error:#} (the settings before kept)")))
            }
        };
        self.put_in_place(&mut lock(&self.running), sink);
        outcome
    }

    /// Puts `sink` where its backend's stands in `running`, and publishes the list.
    fn put_in_place(&self, running: &mut Vec<RunningSink>, sink: RunningSink) {
        match running.iter().position(|old| old.backend == sink.backend) {
            Some(at) => running[at] = sink,
            None => running.push(sink),
        }
        self.publish(running);
    }

    /// Publishes `running`: the flusher's queues and the repeater's tap.
    fn publish(&self, running: &[RunningSink]) {
        self.publish_outlets(running);
        let tap = running.iter().find_map(|sink| sink.offered.get::<Tap>()).map(|tap| (*tap).clone());
        self.tap.set(tap);
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
        lock(&self.running).iter().find_map(|sink| sink.offered.get::<Exposed>())
    }

    /// The store's writer and its database file, while the store backend runs.
    pub fn store(&self) -> Option<OpenStore> {
        lock(&self.running).iter().find_map(|sink| sink.offered.get::<OpenStore>()).map(|open| (*open).clone())
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

    /// A new telemetry for `backend`'s sink, bounded as `config` says.
    fn telemetry_for(&self, config: &Config, backend: Backend) -> Arc<SinkTelemetry> {
        let telemetry = SinkTelemetry::new(backend.name(), backend.etsy(), self.startup_s);
        Arc::new(telemetry.with_queue_limit(backend.queue_limit(config)))
    }

    /// Starts `backend`'s sink with the settings of `identity`; its queue is found in `slot`.
    fn start_sink(
        &self,
        shared: &crate::sinks::Shared,
        backend: Backend,
        identity: SinkIdentity,
        slot: QueueSlot,
        telemetry: Arc<SinkTelemetry>,
    ) -> anyhow::Result<RunningSink> {
        let context = Context::new(shared.clone(), telemetry.clone(), self.startup_s, slot.clone());
        let started = backend.start(&identity, context)?;
        let handle = SinkHandle { snapshots: slot.sender(), telemetry, targets: started.targets, task: started.task };
        Ok(RunningSink { backend, identity, handle, offered: Offered(started.offered) })
    }
}

/// What a reload does with `backend`'s sink, running with `old` (its identity and what it
/// offered) or not at all, when `config` wants it with identity `wanted`: `None` keeps it as
/// it runs; a sink not running is started.
fn decide(
    backend: Backend,
    old: Option<(&SinkIdentity, &Offered)>,
    wanted: &SinkIdentity,
    config: &Config,
) -> Option<Reload> {
    match old {
        Some((identity, _)) if identity == wanted => None,
        Some((identity, offered)) => Some(backend.reload(identity, config, offered)),
        None => Some(Reload::Restart),
    }
}

impl RunningSink {
    fn outlet(&self) -> Option<Outlet> {
        Some((self.handle.telemetry.clone(), self.handle.snapshots.clone()?))
    }
}

#[cfg(test)]
mod tests;
