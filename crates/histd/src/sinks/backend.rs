//! The shape of a backend: a type that implements [`Backend`]. It names itself, reads and
//! prints its own section of the config, says what of its settings a reload compares, and
//! starts its sink from a [`Context`] that hands it what
//! every sink shares: its queue of flushes (the one queue, bounded and counted), its telemetry,
//! the settings common to all backends, and the process's start time. What a running sink
//! offers the rest of the daemon (the repeater's tap, prometheus' series, the store's writer)
//! it lists in [`Started::offered`]. `config/backends.rs` lists the backends, one line each.

use std::any::Any;
use std::sync::{Arc, Mutex};

use agg::Snapshot;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::clock::lock;
use crate::config_reader::keys::KeyDoc;
use crate::config_reader::{ConfigError, Reader};
use crate::telemetry::{EtsyStatus, SinkTelemetry};

/// Snapshots a sink may have waiting before new ones are dropped.
pub const SNAPSHOT_QUEUE: usize = 64;

/// A kind of sink, named in `backends: [...]`.
pub trait Backend: 'static {
    /// Its `backends` entry (`graphite`; Etsy's `./backends/graphite` is read as this too).
    const NAME: &'static str;
    /// How Etsy's management `stats` names its status lines, when it has an Etsy counterpart.
    const ETSY: EtsyStatus = EtsyStatus::None;
    /// Whether it needs the HTTP port open (the store's API, prometheus' `/metrics`).
    const SERVES_HTTP: bool = false;
    /// Its keys, for README's table and `check-config`'s suggestions (`config/keys.rs`).
    const KEYS: &'static [KeyDoc];
    /// Its settings, read from the config file by the code in its folder.
    type Settings: Clone + std::fmt::Debug + Send + Sync + 'static;

    /// Reads its settings from the config file; `listed`: whether `backends` names it (a
    /// backend whose settings are required only when it runs checks them then). An error
    /// names the key.
    fn read(top: &Reader<'_>, listed: bool) -> Result<Self::Settings, ConfigError>;

    /// Its settings as `histd check-config` and the management `config` print them (under
    /// its name); a reload compares them to tell what changed.
    fn effective(settings: &Self::Settings) -> Value;

    /// Reads the files its settings name (tokens, passwords, certificates) the way its sink
    /// will at start; each problem names its key. For `histd check-config`. None by default.
    fn check_files(_settings: &Self::Settings) -> Vec<String> {
        Vec::new()
    }

    /// Everything its sink starts with, compared as a value by a reload (secrets included:
    /// header values, and the bytes of the files it reads at start, [`FileContents`]). Not
    /// printable: it holds credentials.
    type Identity: PartialEq + Send + Sync + 'static;

    /// Its identity under `settings` and `shared`: a reload acts when it changes.
    fn identity(settings: &Self::Settings, shared: &Shared) -> Self::Identity;

    /// What a reload does with its running sink when its identity changed from `old`'s to
    /// `new`'s (`running`: what the sink offered at start). Restarts it unless the backend
    /// says otherwise.
    fn reload(_old: &Self::Settings, _new: &Self::Settings, _running: &Offered) -> Reload {
        Reload::Restart
    }

    /// The bytes its queue of flushes may hold (`sinkQueueBytes` unless it has its own bound).
    fn queue_limit(_settings: &Self::Settings, shared: &Shared) -> u64 {
        shared.sink_queue_bytes
    }

    /// Starts its sink; an error names the key that stops it.
    fn start(settings: &Self::Settings, context: Context) -> anyhow::Result<Started>;
}

/// What a reload does with a running sink whose identity changed.
pub enum Reload {
    /// A new sink starts beside the old one, which delivers what it holds and stops (within
    /// the roster's grace).
    Restart,
    /// The old sink stops first, delivering what it can and keeping the rest where the new
    /// one finds it; then the new one starts, with the flushes made meanwhile (forward's
    /// spool directory, which two sinks cannot share).
    Replace,
    /// The running sink takes the new settings: the future hands them over.
    InPlace(InPlace),
}

/// A change handed to a running sink; its error names the key.
pub type InPlace = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>;

/// What a running sink offered the daemon ([`Started::offered`]), found by type.
#[derive(Clone, Default)]
pub struct Offered(pub Vec<Arc<dyn Any + Send + Sync>>);

impl Offered {
    /// What it offered of type `T`.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.0.iter().find_map(|thing| thing.clone().downcast::<T>().ok())
    }
}

/// The files a sink reads at start (certificates, keys, passwords, mapping files), as a
/// reload compares them: each path and a SHA-256 of its bytes (none when it does not read),
/// so that one rotated in place restarts the sink that holds the old one.
#[derive(PartialEq, Eq, Default)]
pub struct FileContents(Vec<(std::path::PathBuf, Option<[u8; 32]>)>);

impl FileContents {
    /// The contents of `paths` now.
    pub fn of<'a>(paths: impl IntoIterator<Item = &'a std::path::Path>) -> FileContents {
        let digest = |path: &std::path::Path| {
            let bytes = std::fs::read(path).ok()?;
            let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
            digest.as_ref().try_into().ok()
        };
        FileContents(paths.into_iter().map(|path| (path.to_path_buf(), digest(path))).collect())
    }
}

/// The settings every backend may read, besides its own.
#[derive(Debug, Clone, PartialEq)]
pub struct Shared {
    /// `prefixStats`: the prefix of histd's own series.
    pub prefix_stats: String,
    /// `keyNameSanitize`.
    pub key_name_sanitize: bool,
    /// `timerSampleLimit`.
    pub timer_sample_limit: usize,
    /// `sinkQueueBytes`.
    pub sink_queue_bytes: u64,
}

/// A running sink.
pub struct Started {
    /// Ends after its queue closes and it has delivered what it could.
    pub task: JoinHandle<()>,
    /// What each of its destinations counts, when it has several (prometheus' remote-write
    /// targets), published beside its own telemetry.
    pub targets: Vec<Arc<SinkTelemetry>>,
    /// What it offers the rest of the daemon, each found by its type (the repeater's
    /// `Tap`, prometheus' `Exposed`, the store's `OpenStore`).
    pub offered: Vec<Arc<dyn Any + Send + Sync>>,
}

impl Started {
    /// A sink that offers nothing but its work.
    pub fn task(task: JoinHandle<()>) -> Started {
        Started { task, targets: Vec::new(), offered: Vec::new() }
    }

    /// Offers `thing` to the daemon.
    pub fn offering<T: Any + Send + Sync>(mut self, thing: T) -> Started {
        self.offered.push(Arc::new(thing));
        self
    }
}

/// What a backend's sink is started with.
#[derive(Debug)]
pub struct Context {
    /// The settings common to every backend.
    pub shared: Shared,
    /// What it counts, for `stats`, `/health` and `/metrics`.
    pub telemetry: Arc<SinkTelemetry>,
    /// When the process started (telemetry's `lastFlush` before the first one).
    pub startup_s: u64,
    queue: QueueSlot,
}

/// Where the flusher finds a sink's queue once the sink has asked for one.
#[derive(Debug, Clone, Default)]
pub struct QueueSlot(Arc<Mutex<SlotState>>);

#[derive(Debug, Default)]
struct SlotState {
    sender: Option<mpsc::Sender<Arc<Snapshot>>>,
    /// A queue made before the sink started, holding the flushes made meanwhile.
    made: Option<Flushes>,
}

impl QueueSlot {
    /// A slot whose queue is made already (the flusher sends to it before the sink starts).
    pub fn with_queue(sender: mpsc::Sender<Arc<Snapshot>>, flushes: Flushes) -> QueueSlot {
        QueueSlot(Arc::new(Mutex::new(SlotState { sender: Some(sender), made: Some(flushes) })))
    }

    /// The queue's sending side, when the sink reads flushes.
    pub fn sender(&self) -> Option<mpsc::Sender<Arc<Snapshot>>> {
        lock(&self.0).sender.clone()
    }
}

impl Context {
    /// A context whose queue, when the sink asks for it, is put in `slot`.
    pub fn new(shared: Shared, telemetry: Arc<SinkTelemetry>, startup_s: u64, slot: QueueSlot) -> Context {
        Context { shared, telemetry, startup_s, queue: slot }
    }

    /// The queue of flushes the sink reads (a sink that never asks gets none: the repeater
    /// reads packets). Bounded at [`SNAPSHOT_QUEUE`] flushes and the sink's byte limit, which
    /// the flusher checks and counts (`queue_full_drops`).
    pub fn flushes(&self) -> Flushes {
        let mut slot = lock(&self.queue.0);
        if let Some(made) = slot.made.take() {
            return made;
        }
        let (sender, flushes) = Flushes::queue(self.telemetry.clone());
        slot.sender = Some(sender);
        flushes
    }

    /// A telemetry of its own for one of the sink's destinations, named `<backend>.<name>`
    /// (made once per name for the life of the process), with its buffer's bound.
    pub fn target_telemetry(&self, name: &str, limit: u64) -> Arc<SinkTelemetry> {
        let full = target_name(&format!("{}.{name}", self.telemetry.sink));
        Arc::new(SinkTelemetry::new(full, EtsyStatus::None, self.startup_s).with_queue_limit(limit))
    }
}

/// A sink's queue of flushes: each one taken is counted off the queue's bytes.
#[derive(Debug)]
pub struct Flushes {
    receiver: mpsc::Receiver<Arc<Snapshot>>,
    telemetry: Arc<SinkTelemetry>,
}

impl Flushes {
    /// A queue of flushes counted in `telemetry`: its sending side (for the flusher) and
    /// its reading side. Every reader of flushes, backend or not (the alerts), reads one.
    pub fn queue(telemetry: Arc<SinkTelemetry>) -> (mpsc::Sender<Arc<Snapshot>>, Flushes) {
        let (sender, receiver) = mpsc::channel(SNAPSHOT_QUEUE);
        (sender, Flushes { receiver, telemetry })
    }

    /// The next flush; `None` once the queue is closed (the sink is stopping) and empty.
    /// Cancel-safe: a flush is counted only once it is taken.
    pub async fn next(&mut self) -> Option<Arc<Snapshot>> {
        let snapshot = self.receiver.recv().await?;
        self.telemetry.dequeued(snapshot.queue_bytes, self.receiver.len());
        Some(snapshot)
    }
}

/// Offers `snapshot` to a reader's `queue` counted in `telemetry`: queued when the queue has
/// room in flushes and bytes, else dropped for that reader (`queue_full_drops`, logged).
/// True when queued.
pub fn offer(queue: &mpsc::Sender<Arc<Snapshot>>, telemetry: &SinkTelemetry, snapshot: &Arc<Snapshot>) -> bool {
    let bytes = snapshot.queue_bytes;
    let queued = telemetry.may_queue(bytes) && queue.try_send(snapshot.clone()).is_ok();
    if queued {
        telemetry.queued_bytes.add(bytes);
    } else {
        telemetry.queue_full_drops.add(1);
        let (sink, timestamp) = (telemetry.sink, snapshot.timestamp);
        tracing::warn!(sink, timestamp, bytes, "sink is behind: flush dropped for it (queue_full_drops)");
    }
    telemetry.queued.set((queue.max_capacity() - queue.capacity()) as u64);
    queued
}

/// This machine's name (`forward.source`, otlp's `host.name`, circonus' target): the host name (`/proc/sys/kernel/hostname`), or `histd` when it cannot be read.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "histd".to_string())
}

/// A destination's telemetry name, made once per name for the life of the process (restarts
/// reuse it; telemetry names are `&'static str`).
fn target_name(wanted: &str) -> &'static str {
    static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let mut names = lock(&NAMES);
    if let Some(known) = names.iter().find(|known| **known == wanted) {
        return known;
    }
    let made: &'static str = Box::leak(wanted.to_string().into_boxed_str());
    names.push(made);
    made
}
