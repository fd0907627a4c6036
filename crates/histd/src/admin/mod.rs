//! The management interface (Etsy's `lib/mgmt_server.js`), TCP, default 127.0.0.1:8126.
//!
//! Line framed (Etsy treats each TCP segment as one command; histd runs every line), each
//! reply byte-identical to Etsy's. Commands: `help`, `health [up|down]`, `stats`, `counters`,
//! `timers`, `gauges`, `sets`, `delcounters|deltimers|delgauges|delsets <key|prefix.*>...`,
//! `config`, `quit`; anything else is `ERROR`.
//!
//! A connection whose line is an HTTP request line or header is closed at once, with nothing
//! in it run, and counted in `refused_http_connections`: browsers let any web page send HTTP to
//! any port, and the body of such a request would otherwise run as commands.

mod command;
mod inspect;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub(crate) use command::on_aggregator;
pub use command::{execute, Command};

use crate::accept::{within_idle, AcceptFailures, ConnectionSlots, Waiters};
use crate::aggregation::Aggregation;
use crate::telemetry::EdgeCounters;

/// How long a reply may take to be taken by its client before the connection is closed (a
/// client that never reads would otherwise hold its dump for good).
const REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What the commands read and change.
#[derive(Debug)]
pub struct AdminState {
    /// The aggregator (dumps read it with the readers' interval so far absorbed).
    pub aggregation: Arc<Aggregation>,
    /// `health up|down`.
    pub healthy: AtomicBool,
    /// Unix seconds at start.
    pub started_unix_s: u64,
    /// The running sinks (their telemetry, for `stats`).
    pub sinks: Arc<crate::backends::Roster>,
    /// The config file's settings in force, for `config` and `/health`.
    pub config: ConfigInForce,
    /// What the edges refused or could not keep.
    pub edges: Arc<EdgeCounters>,
    /// Silence after which a management connection is closed (`connectionIdleTimeoutMs`).
    pub idle_timeout: Option<std::time::Duration>,
    /// How long a new management connection may take to send its first command
    /// (`mgmtFirstCommandTimeoutMs`).
    pub first_command_timeout: std::time::Duration,
    /// Connections served at once (`mgmtMaxConnections`); more are closed at once and counted
    /// in `refused_management_connections` (each may hold a full dump while its client reads).
    pub max_connections: usize,
    /// The longest command line read (`mgmtMaxLineBytes`); a longer one is discarded whole
    /// and answered `ERROR`.
    pub max_line: usize,
}

/// The config file's settings in force: what `config` prints (Etsy's `config` shows the
/// config object the daemon runs with) and what `/health` names. A reload replaces it with the
/// new file's settings, except those that take a restart, which keep the values in force.
#[derive(Debug)]
pub struct ConfigInForce {
    /// The file read (`None`: the built-in local default).
    pub file: Option<std::path::PathBuf>,
    raw: std::sync::Mutex<serde_json::Map<String, serde_json::Value>>,
    loaded_unix_s: std::sync::atomic::AtomicU64,
}

impl ConfigInForce {
    /// The settings of `file` as read at `now` (unix seconds).
    pub fn new(file: Option<std::path::PathBuf>, raw: serde_json::Map<String, serde_json::Value>, now: u64) -> Self {
        ConfigInForce { file, raw: std::sync::Mutex::new(raw), loaded_unix_s: now.into() }
    }

    /// The settings in force, as the file spells them.
    pub fn raw(&self) -> serde_json::Map<String, serde_json::Value> {
        crate::clock::lock(&self.raw).clone()
    }

    /// A reload at `now` put `raw` in force.
    pub fn replace(&self, raw: serde_json::Map<String, serde_json::Value>, now: u64) {
        *crate::clock::lock(&self.raw) = raw;
        self.loaded_unix_s.store(now, std::sync::atomic::Ordering::Relaxed);
    }

    /// `{"file", "loaded_unix_s"}` for `/health`: which file is in force, read when.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "file": self.file.as_ref().map(|path| path.display().to_string()),
            "loaded_unix_s": self.loaded_unix_s.load(std::sync::atomic::Ordering::Relaxed),
        })
    }
}

/// When every slot is taken, a new connection displaces the one silent the longest between
/// commands, if that one has been silent for `mgmtFirstCommandTimeoutMs`, and waits this long
/// for its slot.
const DISPLACE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Serves management connections until shutdown.
pub async fn serve(listener: TcpListener, state: Arc<AdminState>, mut shutdown: watch::Receiver<bool>) {
    let mut failures = AcceptFailures::default();
    let slots = Arc::new(ConnectionSlots::new(state.max_connections));
    let waiters = Arc::new(Waiters::default());
    let refused = &state.edges.refused_management_connections;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let state = state.clone();
                    let waiters = waiters.clone();
                    if let Some(slot) = slots.try_admit() {
                        tokio::spawn(async move {
                            serve_connection(stream, state, &waiters).await;
                            drop(slot);
                        });
                    } else if waiters.evict(state.first_command_timeout) {
                        let slots = slots.clone();
                        tokio::spawn(async move {
                            let refused = &state.edges.refused_management_connections;
                            let Some(slot) = slots.admit_within(DISPLACE_WAIT, refused).await else { return };
                            serve_connection(stream, state, &waiters).await;
                            drop(slot);
                        });
                    } else {
                        refused.add(1);
                    }
                }
                Err(error) => failures.failed("management", &error).await,
            },
            _ = shutdown.changed() => break,
        }
    }
}

async fn serve_connection(stream: TcpStream, state: Arc<AdminState>, waiters: &Waiters) {
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    let mut first = true;
    loop {
        line.clear();
        let max_line = state.max_line;
        let mut limited = (&mut reader).take(max_line as u64);
        // A connection that never sends a command gives its slot back soon; an interactive
        // one that has sent one may stay for the idle timeout.
        let timeout = match first {
            true => Some(
                state.idle_timeout.map_or(state.first_command_timeout, |idle| idle.min(state.first_command_timeout)),
            ),
            false => state.idle_timeout,
        };
        // After its first command a silent connection may be displaced by a new one when
        // every slot is taken (Waiters).
        let waiting = (!first).then(|| waiters.wait());
        first = false;
        let evicted = async {
            match &waiting {
                Some(waiting) => waiting.evicted.notified().await,
                None => std::future::pending().await,
            }
        };
        let read = tokio::select! {
            read = within_idle(timeout, limited.read_until(b'\n', &mut line)) => read,
            _ = evicted => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "displaced")),
        };
        drop(waiting);
        match read {
            Err(error) if error.kind() == std::io::ErrorKind::TimedOut => {
                state.edges.idle_closed_connections.add(1);
                return;
            }
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.len() == max_line && !line.ends_with(b"\n") {
            // Too long to be a command: discarded whole, never run in pieces.
            state.edges.refused_management_lines.add(1);
            if !skip_line(&mut reader, max_line).await || writer.write_all(b"ERROR\n").await.is_err() {
                return;
            }
            continue;
        }
        if crate::cross_protocol::looks_like_http(&line) {
            state.edges.refused_http_connections.add(1);
            return;
        }
        let text = String::from_utf8_lossy(&line);
        let command = Command::parse(&text);
        if command == Command::Quit {
            return;
        }
        let reply = execute(&command, &state);
        if !matches!(tokio::time::timeout(REPLY_TIMEOUT, writer.write_all(reply.as_bytes())).await, Ok(Ok(()))) {
            return;
        }
    }
}

/// Reads and drops the rest of a line; false when the connection ended first.
async fn skip_line(reader: &mut BufReader<tokio::net::tcp::OwnedReadHalf>, max_line: usize) -> bool {
    let mut rest = Vec::new();
    loop {
        rest.clear();
        match reader.take(max_line as u64).read_until(b'\n', &mut rest).await {
            Ok(0) | Err(_) => return false,
            Ok(_) if rest.ends_with(b"\n") => return true,
            Ok(_) => {}
        }
    }
}
