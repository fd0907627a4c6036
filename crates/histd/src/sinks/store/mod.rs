//! The store sink: every flush written to the embedded store by one writer thread (one
//! transaction a flush, then compaction, retention and the disk budget), with the store's size
//! and drops published in the sink's telemetry.

use std::sync::Arc;
use std::time::Instant;

use agg::Snapshot;
use anyhow::Context as _;
use tokio::sync::{mpsc, oneshot};

use serde_json::Value;
use tokio::task::JoinHandle;

use super::{Backend, Context, Detail, DropReason, Offered, Reload, Shared, SinkTelemetry, Started};
use crate::config_reader::keys::KeyDoc;
use crate::config_reader::{ConfigError, Reader};
mod backup;
pub mod config;
mod damage;
mod recover;
mod scrub;
pub mod snapshots;

pub use backup::back_up;
pub use config::StoreConfig;
pub use damage::DamagedBlocks;
use recover::Recovery;
use scrub::Scrubber;

/// The API's reading connection to the store file, opened on first use; the writer closes it
/// (and holds it closed) while it swaps a damaged file for a salvaged one.
pub type ReaderSlot = Arc<std::sync::Mutex<Option<store::Store>>>;

/// Asks the store's writer to forget series (`DELETE /api/v1/series`) or to keep the store by
/// new settings (a reload): the writer does it between two flushes, so it never races a write.
#[derive(Debug, Clone)]
pub struct StoreControl {
    requests: mpsc::Sender<Request>,
    /// The record of damage no operator acknowledged yet (the latest [`DAMAGE_SHOWN`]), as the
    /// writer last read it: for `/health`, which never waits on the store.
    damage: Arc<std::sync::Mutex<Vec<store::DamageEntry>>>,
}

/// Entries of the record of damage `/health` shows (the count in
/// `store.store_damage_unacknowledged` has them all).
pub const DAMAGE_SHOWN: usize = 32;

#[derive(Debug)]
struct ForgetRequest {
    keys: Vec<store::SeriesKey>,
    reply: oneshot::Sender<Result<store::Forgotten, String>>,
}

/// What the writer is asked between flushes.
#[derive(Debug)]
enum Request {
    Forget(ForgetRequest),
    /// A reader met damage: check the file's pages, and salvage it when they are damaged.
    Check,
    /// Blocks a reader found damaged, for the record of damage.
    Damaged(Vec<store::DamagedBlock>),
    /// New retention, disk budget, scrub interval and snapshots (a config reload).
    Options(store::Options, Option<std::time::Duration>, Option<snapshots::SnapshotSettings>),
}

impl StoreControl {
    /// Forgets `keys` in the store; an error says why it could not.
    pub async fn forget(&self, keys: Vec<store::SeriesKey>) -> Result<store::Forgotten, String> {
        let (reply, answer) = oneshot::channel();
        let stopped = || "the store's writer has stopped".to_string();
        self.requests.send(Request::Forget(ForgetRequest { keys, reply })).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Asks the writer to check the file's pages (a reader met damage); it salvages the file
    /// when they are damaged. Never waits: a check already asked is enough.
    pub fn check_damage(&self) {
        let _ = self.requests.try_send(Request::Check);
    }

    /// Hands the writer blocks a reader found damaged, for the record of damage. Never waits:
    /// a block not taken now is recorded when the scrub meets it.
    pub fn record_damage(&self, blocks: Vec<store::DamagedBlock>) {
        if !blocks.is_empty() {
            let _ = self.requests.try_send(Request::Damaged(blocks));
        }
    }

    /// The record of damage no operator acknowledged yet, as the writer last read it.
    pub fn unacknowledged_damage(&self) -> Vec<store::DamageEntry> {
        crate::clock::lock(&self.damage).clone()
    }

    /// Keeps the store by `config`'s retention and disk budget from the next flush on.
    pub async fn set_options(&self, config: &StoreConfig) -> Result<(), String> {
        let request = Request::Options(options_of(config), config.scrub_interval, config.snapshots);
        self.requests.send(request).await.map_err(|_| "the store's writer has stopped".to_string())
    }
}

/// How the writer keeps the store, as `config` says.
fn options_of(config: &StoreConfig) -> store::Options {
    store::Options { retention: config.retention, max_bytes: config.max_bytes, ..Default::default() }
}

/// What the writer does next.
enum Work {
    Flush(Arc<Snapshot>),
    Request(Request),
    Stop,
}

/// The store backend: the embedded store, read by the HTTP API and `histd query`.
pub struct Store;

impl Backend for Store {
    const NAME: &'static str = "store";
    const KEYS: &'static [KeyDoc] = config::KEYS;
    const SERVES_HTTP: bool = true;
    type Settings = StoreConfig;

    fn read(top: &Reader<'_>, _listed: bool) -> Result<StoreConfig, ConfigError> {
        config::store(top)
    }

    fn effective(settings: &StoreConfig) -> Value {
        settings.effective()
    }

    /// Its settings (`sinkQueueBytes` does not bound it: the writer takes every flush).
    type Identity = StoreConfig;

    fn identity(settings: &StoreConfig, _shared: &Shared) -> StoreConfig {
        settings.clone()
    }

    /// A new `dataDir` restarts it; its retention, `maxBytes`, `scrubInterval` and snapshots
    /// are handed to the running writer, from its next flush on.
    fn reload(old: &StoreConfig, new: &StoreConfig, running: &Offered) -> Reload {
        if old.data_dir != new.data_dir {
            return Reload::Restart;
        }
        let (open, new) = (running.get::<OpenStore>(), new.clone());
        Reload::InPlace(Box::pin(async move {
            let open = open.ok_or("store: its writer is not running")?;
            open.control.set_options(&new).await.map_err(|why| format!("store: {why}"))
        }))
    }

    /// Offers an [`OpenStore`]: its writer and its database file.
    fn start(settings: &StoreConfig, context: Context) -> anyhow::Result<Started> {
        let reader = ReaderSlot::default();
        let (task, control) = spawn(settings, context, reader.clone())?;
        Ok(Started::task(task).offering(OpenStore {
            control,
            database: store::data_dir::database(&settings.data_dir),
            reader,
        }))
    }
}

/// A running store: its writer, and its database file (which readers open on their own).
#[derive(Clone)]
pub struct OpenStore {
    /// Asks the writer to forget series or to take new settings.
    pub control: StoreControl,
    /// The database file.
    pub database: std::path::PathBuf,
    /// The API's reading connection to it.
    pub reader: ReaderSlot,
}

impl std::fmt::Debug for OpenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenStore").field("control", &self.control).field("database", &self.database).finish()
    }
}

/// Opens the store (creating the data directory) and starts its writer.
fn spawn(
    config: &StoreConfig,
    context: Context,
    readers: ReaderSlot,
) -> anyhow::Result<(JoinHandle<()>, StoreControl)> {
    let telemetry = context.telemetry.clone();
    std::fs::create_dir_all(&config.data_dir).with_context(|| {
        format!("cannot create the data directory {} (store.dataDir / --data-dir)", config.data_dir.display())
    })?;
    let lock = store::data_dir::lock(&config.data_dir)?;
    let path = store::data_dir::database(&config.data_dir);
    let mut options = options_of(config);
    let mut recovery = Recovery::default();
    let store = recovery.open(&path, options)?;
    let mut scrubber = Scrubber::new(config.scrub_interval);
    let mut snapshotter = snapshots::Snapshotter::new(&config.data_dir, config.snapshots);
    let damage = Arc::new(std::sync::Mutex::new(Vec::new()));
    let shown = damage.clone();
    let unacknowledged = refresh_damage(&store, &shown);
    publish_usage(
        &telemetry,
        store.usage(),
        config.max_bytes,
        [&scrubber.details()[..], &recovery.details(), &snapshotter.details()],
        unacknowledged,
    );
    let mut flushes = context.flushes();
    let (requests, mut asked) = mpsc::channel::<Request>(4);
    let counts = telemetry.clone();
    let runtime = tokio::runtime::Handle::current();
    let task = tokio::task::spawn_blocking(move || {
        let _owner = lock; // held until the writer ends
        let mut writer = Writer { store: Some(store), path, recovery, readers };
        loop {
            // Flushes first: a forget waits for the flushes queued before it.
            let work = runtime.block_on(async {
                tokio::select! {
                    biased;
                    snapshot = flushes.next() => snapshot.map_or(Work::Stop, Work::Flush),
                    Some(request) = asked.recv() => Work::Request(request),
                }
            });
            match work {
                Work::Flush(snapshot) => {
                    writer.write(&snapshot, &counts, options);
                    snapshotter.step();
                    if let Some(Err(error)) = writer.store.as_ref().map(|store| scrubber.step(store)) {
                        writer.salvage(options, &error);
                    }
                }
                Work::Request(Request::Forget(request)) => forget(writer.store_mut(), request),
                Work::Request(Request::Options(new, scrub_interval, snapshot_settings)) => {
                    snapshotter.set(snapshot_settings);
                    options = new;
                    writer.store_mut().set_options(new);
                    scrubber.set_interval(scrub_interval);
                }
                Work::Request(Request::Damaged(blocks)) => {
                    let found = crate::clock::unix_now_s() as i64;
                    if let Err(error) = writer.store_mut().record_damaged_blocks(found, &blocks) {
                        tracing::warn!(%error, "store: the damaged blocks a read found could not be recorded");
                    }
                }
                Work::Request(Request::Check) => {
                    let recovery = &mut writer.recovery;
                    if let Some(damage) = writer.store.as_ref().and_then(|store| recovery.check(store)) {
                        writer.salvage(options, &damage);
                    }
                }
                Work::Stop => break,
            }
            let Some(store) = &writer.store else { break };
            let unacknowledged = refresh_damage(store, &shown);
            publish_usage(
                &counts,
                store.usage(),
                options.max_bytes,
                [&scrubber.details()[..], &writer.recovery.details(), &snapshotter.details()],
                unacknowledged,
            );
        }
    });
    Ok((task, StoreControl { requests, damage }))
}

/// The writer's store, and what it needs to replace it by a salvaged copy.
struct Writer {
    /// Always `Some` but while a salvage swaps it.
    store: Option<store::Store>,
    path: std::path::PathBuf,
    recovery: Recovery,
    readers: ReaderSlot,
}

impl Writer {
    fn store_mut(&mut self) -> &mut store::Store {
        self.store.as_mut().unwrap_or_else(|| unreachable!("a store but while it is swapped"))
    }

    /// Writes one flush; when SQLite finds the file damaged, salvages it and writes the flush
    /// into the salvaged store.
    fn write(&mut self, snapshot: &Snapshot, telemetry: &SinkTelemetry, options: store::Options) {
        let Err(error) = write_flush(self.store_mut(), snapshot, telemetry) else { return };
        if !error.is_damaged_file() {
            return;
        }
        let salvaged = self.salvage(options, &error);
        let again = self.store.as_mut().filter(|_| salvaged).map(|store| write_flush(store, snapshot, telemetry));
        if !matches!(again, Some(Ok(()))) {
            let count = store::FlushRows::len(snapshot) as u64;
            telemetry.failed(crate::clock::unix_now_s());
            telemetry.drop_points(DropReason::Rejected, count);
            tracing::error!(
                rows = count,
                "store write failed: the file is damaged and was not salvaged; this flush is not stored"
            );
        }
    }

    /// Replaces the store, found damaged (`why`), by a salvaged copy, with every connection to
    /// the file closed meanwhile (the API's reader too: it opens the new file at its next
    /// request). True when it was replaced.
    fn salvage(&mut self, options: store::Options, why: &store::StoreError) -> bool {
        let mut readers = crate::clock::lock(&self.readers);
        *readers = None;
        let store = self.store.take().unwrap_or_else(|| unreachable!("a store but while it is swapped"));
        match self.recovery.replace(store, &self.path, options, why) {
            Ok((store, replaced)) => {
                self.store = Some(store);
                replaced
            }
            Err(error) => {
                tracing::error!(error = %format!("{error:#}"), "the store's writer stops: no store can be opened");
                false
            }
        }
    }
}

/// Forgets the series a request names, and answers it.
fn forget(store: &mut store::Store, request: ForgetRequest) {
    let result = store.forget(&request.keys);
    match &result {
        Ok(forgotten) => tracing::info!(series = forgotten.series, points = forgotten.points, "series forgotten"),
        Err(error) => tracing::error!(%error, "forgetting series failed; nothing was deleted"),
    }
    let _ = request.reply.send(result.map_err(|error| error.to_string()));
}

/// Writes one flush in one transaction, counting rows written or the failure (returned).
fn write_flush(
    store: &mut store::Store,
    snapshot: &Snapshot,
    telemetry: &SinkTelemetry,
) -> Result<(), store::StoreError> {
    let started = Instant::now();
    let count = store::FlushRows::len(snapshot) as u64;
    let failures_before = store.usage().upkeep_failures;
    // A late interval's rows keep their own time; the upkeep after them runs as of now, not
    // as of that older time (which would trim and checkpoint again for a period gone by).
    let now = if snapshot.late { crate::clock::unix_now_s() } else { snapshot.timestamp };
    let written = store.write(now as i64, snapshot);
    if store.usage().upkeep_failures > failures_before {
        let error = store.usage().last_upkeep_error.as_deref().unwrap_or("unknown");
        tracing::error!(error, "store upkeep (compaction, retention, budget) failed; retried at the next flush");
    }
    match written {
        Ok(()) => {
            telemetry.points_out.add(count);
            telemetry.last_flush_us.set(started.elapsed().as_micros() as u64);
            telemetry.succeeded(crate::clock::unix_now_s());
            Ok(())
        }
        Err(error) if error.is_damaged_file() => {
            tracing::error!(%error, rows = count, "store write failed: the file is damaged; it is salvaged and the flush written again");
            Err(error)
        }
        Err(error) => {
            telemetry.failed(crate::clock::unix_now_s());
            telemetry.drop_points(DropReason::Rejected, count);
            tracing::error!(%error, rows = count, "store write failed; this flush is not stored");
            Err(error)
        }
    }
}

/// The store's size, growth and drops, as the sink's details (`/health`, `stats`,
/// `/metrics`, the web page).
/// Reads the record of damage no operator acknowledged yet into `shown` (the latest
/// [`DAMAGE_SHOWN`]); returns how many entries it has. An operator acknowledges from another
/// process (`histd scrub --acknowledge`), so it is read again after every flush (a small table).
fn refresh_damage(store: &store::Store, shown: &std::sync::Mutex<Vec<store::DamageEntry>>) -> u64 {
    match store.damage_record(true) {
        Ok(mut entries) => {
            let count = entries.len() as u64;
            entries.drain(..entries.len().saturating_sub(DAMAGE_SHOWN));
            *crate::clock::lock(shown) = entries;
            count
        }
        Err(error) => {
            tracing::warn!(%error, "store: the record of damage could not be read");
            crate::clock::lock(shown).len() as u64
        }
    }
}

fn publish_usage(
    telemetry: &SinkTelemetry,
    usage: &store::Usage,
    max_bytes: u64,
    stages: [&[Detail]; 3],
    unacknowledged_damage: u64,
) {
    let level = |name, value: f64| Detail { name, value, level: true };
    let total = |name, value: u64| Detail { name, value: value as f64, level: false };
    let mut details: Vec<Detail> = stages.concat();
    details.extend([
        level("store_bytes", usage.bytes() as f64),
        level("store_wal_bytes", usage.wal_bytes as f64),
        level("store_max_bytes", max_bytes as f64),
        level("store_points", usage.points as f64),
        level("store_bytes_per_point", usage.bytes_per_point().unwrap_or(0.0)),
        level("store_growth_bytes_per_hour", usage.growth_bytes_per_hour.unwrap_or(0.0)),
        level("store_compaction_backlog", usage.backlog as f64),
        level("store_last_upkeep_ms", usage.last_upkeep_us as f64 / 1000.0),
        total("store_budget_dropped_points", usage.budget_dropped_points),
        total("store_budget_dropped_blocks", usage.budget_dropped_blocks),
        total("store_corrupt_points", usage.corrupt_points),
        total("store_upkeep_failures", usage.upkeep_failures),
        total("store_expired_series", usage.expired_series),
        level("store_damage_unacknowledged", unacknowledged_damage as f64),
    ]);
    telemetry.set_details(details);
}
