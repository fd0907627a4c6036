//! The store sink: every flush written to the embedded store by one writer thread (one
//! transaction a flush, then compaction, retention and the disk budget), with the store's size
//! and drops published in the sink's telemetry.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use agg::Snapshot;
use anyhow::Context as _;
use tokio::sync::{mpsc, oneshot};

use serde_json::{json, Value};
use tokio::task::JoinHandle;

use super::{Backend, Context, Detail, DropReason, Shared, SinkTelemetry, Started};
use crate::config_reader::keys::KeyDoc;
use crate::config_reader::{ConfigError, Reader};
pub mod config;
mod damage;
mod scrub;

pub use config::StoreConfig;
pub use damage::DamagedBlocks;
use scrub::Scrubber;

/// The database file inside the data directory.
pub const DATABASE: &str = "histd.db";

/// Asks the store's writer to forget series (`DELETE /api/v1/series`) or to keep the store by
/// new settings (a reload): the writer does it between two flushes, so it never races a write.
#[derive(Debug, Clone)]
pub struct StoreControl {
    requests: mpsc::Sender<Request>,
}

#[derive(Debug)]
struct ForgetRequest {
    keys: Vec<store::SeriesKey>,
    reply: oneshot::Sender<Result<store::Forgotten, String>>,
}

/// What the writer is asked between flushes.
#[derive(Debug)]
enum Request {
    Forget(ForgetRequest),
    /// New retention, disk budget and scrub interval (a config reload).
    Options(store::Options, Option<std::time::Duration>),
}

impl StoreControl {
    /// Forgets `keys` in the store; an error says why it could not.
    pub async fn forget(&self, keys: Vec<store::SeriesKey>) -> Result<store::Forgotten, String> {
        let (reply, answer) = oneshot::channel();
        let stopped = || "the store's writer has stopped".to_string();
        self.requests.send(Request::Forget(ForgetRequest { keys, reply })).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Keeps the store by `config`'s retention and disk budget from the next flush on.
    pub async fn set_options(&self, config: &StoreConfig) -> Result<(), String> {
        let request = Request::Options(options_of(config), config.scrub_interval);
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

    /// Only its directory: its retention and disk budget are applied in place by a reload.
    fn identity(settings: &StoreConfig, _shared: &Shared) -> Value {
        json!({ "dataDir": settings.data_dir })
    }

    /// Offers an [`OpenStore`]: its writer and its database file.
    fn start(settings: &StoreConfig, context: Context) -> anyhow::Result<Started> {
        let (task, control) = spawn(settings, context)?;
        Ok(Started::task(task).offering(OpenStore { control, database: settings.data_dir.join(DATABASE) }))
    }
}

/// A running store: its writer, and its database file (which readers open on their own).
#[derive(Debug, Clone)]
pub struct OpenStore {
    /// Asks the writer to forget series or to take new settings.
    pub control: StoreControl,
    /// The database file.
    pub database: std::path::PathBuf,
}

/// Opens the store (creating the data directory) and starts its writer.
fn spawn(config: &StoreConfig, context: Context) -> anyhow::Result<(JoinHandle<()>, StoreControl)> {
    let telemetry = context.telemetry.clone();
    std::fs::create_dir_all(&config.data_dir).with_context(|| {
        format!("cannot create the data directory {} (store.dataDir / --data-dir)", config.data_dir.display())
    })?;
    let lock = lock_data_dir(&config.data_dir)?;
    let path = config.data_dir.join(DATABASE);
    let mut options = options_of(config);
    let (mut store, set_aside) = open_or_set_aside(&path, options)?;
    let mut scrubber = Scrubber::new(config.scrub_interval);
    scrubber.files_set_aside = set_aside;
    publish_usage(&telemetry, store.usage(), config.max_bytes, &scrubber);
    let mut flushes = context.flushes();
    let (requests, mut asked) = mpsc::channel::<Request>(4);
    let counts = telemetry.clone();
    let runtime = tokio::runtime::Handle::current();
    let task = tokio::task::spawn_blocking(move || {
        let _owner = lock; // held until the writer ends
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
                    write_flush(&mut store, &snapshot, &counts);
                    scrubber.step(&store);
                }
                Work::Request(Request::Forget(request)) => forget(&mut store, request),
                Work::Request(Request::Options(new, scrub_interval)) => {
                    options = new;
                    store.set_options(new);
                    scrubber.set_interval(scrub_interval);
                }
                Work::Stop => break,
            }
            publish_usage(&counts, store.usage(), options.max_bytes, &scrubber);
        }
    });
    Ok((task, StoreControl { requests }))
}

/// Opens the store at `path`. A file SQLite finds damaged (a bad header, truncated, pages
/// overwritten) never keeps the daemon from starting: it is moved aside whole, with its
/// write-ahead log, as `histd.db.damaged-<unix s>` (logged, counted in
/// `store_damaged_files_set_aside`) and a fresh store begins; ingest and the other backends go
/// on. Any other failure (no space, no permission) stops the start, as it should.
fn open_or_set_aside(path: &Path, options: store::Options) -> anyhow::Result<(store::Store, u64)> {
    match store::Store::open(path, options) {
        Ok(store) => Ok((store, 0)),
        Err(error) if error.is_damaged_file() => {
            let aside = format!("{}.damaged-{}", path.display(), crate::clock::unix_now_s());
            for suffix in ["", "-wal", "-shm"] {
                let file = format!("{}{suffix}", path.display());
                if Path::new(&file).exists() {
                    std::fs::rename(&file, format!("{aside}{suffix}"))
                        .with_context(|| format!("cannot move the damaged store {file} aside"))?;
                }
            }
            tracing::error!(
                %error,
                kept = %aside,
                "the store file is damaged: it is kept aside for recovery, and a fresh store begins (store_damaged_files_set_aside)"
            );
            let store = store::Store::open(path, options)
                .with_context(|| format!("cannot open a fresh store {}", path.display()))?;
            Ok((store, 1))
        }
        Err(error) => Err(error).with_context(|| format!("cannot open the store {}", path.display())),
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

/// The lock file inside the data directory: it holds the owner's pid.
pub const LOCK_FILE: &str = "histd.lock";

/// Makes this process the data directory's one writer: an exclusive `flock` on its lock file,
/// held for as long as the returned file is open (the kernel releases it when the process ends,
/// however it ends). A second daemon on the same directory gets an error naming the directory
/// and the pid that holds it.
pub(crate) fn lock_data_dir(dir: &Path) -> anyhow::Result<File> {
    use std::io::{Read, Seek, Write};
    use std::os::fd::AsRawFd;
    let path = dir.join(LOCK_FILE);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("cannot open the lock file {}", path.display()))?;
    // SAFETY: flock on an open descriptor this function owns; no memory is touched.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        let holder = holder.trim();
        let holder = if holder.is_empty() { "another process".to_string() } else { format!("histd pid {holder}") };
        anyhow::bail!(
            "the data directory {} is in use by {holder} (store.dataDir / --data-dir: one histd per directory)",
            dir.display()
        );
    }
    file.set_len(0)?;
    file.rewind()?;
    write!(file, "{}", std::process::id())?;
    Ok(file)
}

/// Writes one flush in one transaction, counting rows written or the failure.
fn write_flush(store: &mut store::Store, snapshot: &Snapshot, telemetry: &SinkTelemetry) {
    let started = Instant::now();
    let count = store::FlushRows::len(snapshot) as u64;
    let failures_before = store.usage().upkeep_failures;
    let written = store.write(snapshot.timestamp as i64, snapshot);
    if store.usage().upkeep_failures > failures_before {
        let error = store.usage().last_upkeep_error.as_deref().unwrap_or("unknown");
        tracing::error!(error, "store upkeep (compaction, retention, budget) failed; retried at the next flush");
    }
    match written {
        Ok(()) => {
            telemetry.points_out.add(count);
            telemetry.last_flush_us.set(started.elapsed().as_micros() as u64);
            telemetry.succeeded(crate::clock::unix_now_s());
        }
        Err(error) => {
            telemetry.failed(crate::clock::unix_now_s());
            telemetry.drop_points(DropReason::Rejected, count);
            tracing::error!(%error, rows = count, "store write failed; this flush is not stored");
        }
    }
}

/// The store's size, growth and drops, as the sink's details (`/health`, `stats`,
/// `/metrics`, the web page).
fn publish_usage(telemetry: &SinkTelemetry, usage: &store::Usage, max_bytes: u64, scrubber: &Scrubber) {
    let level = |name, value: f64| Detail { name, value, level: true };
    let total = |name, value: u64| Detail { name, value: value as f64, level: false };
    let [passes, scrubbed, damaged, set_aside] = scrubber.details();
    telemetry.set_details(vec![
        passes,
        scrubbed,
        damaged,
        set_aside,
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
    ]);
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_owner_per_data_directory() {
        let dir = std::env::temp_dir().join(format!("histd-lock-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = super::lock_data_dir(&dir).unwrap();
        let error = super::lock_data_dir(&dir).unwrap_err().to_string();
        let want = format!("{} is in use by histd pid {}", dir.display(), std::process::id());
        assert!(error.contains(&want), "{error}");
        drop(first);
        assert!(super::lock_data_dir(&dir).is_ok(), "free again once the owner is gone");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
