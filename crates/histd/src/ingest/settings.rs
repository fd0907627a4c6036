//! The intake's limits (histd keys): how datagram listeners read (reader threads, reuseport or
//! shared socket, receive buffer, batch shape), and the bounds on stream, management and HTTP
//! connections.

use serde_json::{json, Value};

use super::ReaderMode;
use crate::config_reader::{ConfigError, Reader};

/// The default `udpReceiveBufferBytes`: 16 MiB.
pub const DEFAULT_RECEIVE_BUFFER: usize = 16 * 1024 * 1024;
/// The default `udpBatchDatagrams`.
pub const DEFAULT_BATCH_DATAGRAMS: usize = 32;
/// The default `maxDatagramBytes`: any UDP payload fits.
pub const DEFAULT_MAX_DATAGRAM: usize = 65_536;
/// Partial stream lines held across all connections, by default.
pub const DEFAULT_STREAM_PENDING_BYTES: usize = 64 * 1024 * 1024;
/// The longest statsd stream line kept, by default.
pub const DEFAULT_MAX_STREAM_LINE_BYTES: usize = 1024 * 1024;
/// Management connections served at once, by default.
pub const DEFAULT_MGMT_MAX_CONNECTIONS: usize = 16;
/// The longest management command line, by default.
pub const DEFAULT_MGMT_MAX_LINE_BYTES: usize = 64 * 1024;
/// How long datagram readers keep reading at shutdown, by default.
pub const DEFAULT_SHUTDOWN_DRAIN_MS: usize = 2_000;

/// Reading settings for datagram listeners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngestConfig {
    /// `udpReaders`: reader threads per UDP listener (default: the cores histd may run on).
    pub readers: usize,
    /// `udpReaderMode`: `reuseport` (a socket per reader) or `shared` (one socket).
    pub mode: ReaderMode,
    /// `udpReceiveBufferBytes`: SO_RCVBUF asked for each socket (16 MiB).
    pub receive_buffer: usize,
    /// `udpBatchDatagrams`: datagrams per `recvmmsg` (32).
    pub batch_datagrams: usize,
    /// `maxDatagramBytes`: longer datagrams are cut and counted (65536).
    pub max_datagram_bytes: usize,
    /// `shutdownDrainMs`: how long, at shutdown, datagram readers keep reading what their
    /// sockets hold (what is left then is counted in `shutdown_unread_datagrams`).
    pub shutdown_drain: std::time::Duration,
    /// `streamPendingBytes`: bytes of partial lines (no newline yet) held across every TCP and
    /// Unix stream connection; past it a connection's partial line is cut.
    pub stream_pending_bytes: usize,
    /// `maxStreamConnections`: TCP and Unix stream connections open at once (4096); more are
    /// closed at once and counted.
    pub max_stream_connections: usize,
    /// `connectionIdleTimeoutMs`: a statsd stream or management connection that sends nothing
    /// for this long is closed and counted (10 minutes; `None`: never).
    pub idle_timeout: Option<std::time::Duration>,
    /// `httpMaxConnections`: HTTP connections open at once (256); more are closed and counted.
    pub http_max_connections: usize,
    /// `httpMaxConnectionsPerAddress`: HTTP connections open at once from one client address
    /// (64; 0: no cap); more are closed and counted.
    pub http_max_connections_per_address: usize,
    /// `httpHeaderTimeoutMs`: how long an HTTP client may take to send a request's headers
    /// (10 s); then the connection is closed and counted.
    pub http_header_timeout: std::time::Duration,
    /// `httpBodyTimeoutMs`: how long an HTTP client may take to send a request's body (30 s);
    /// then it is answered 408, the connection closed and counted (`http_body_timeouts`).
    pub http_body_timeout: std::time::Duration,
    /// `httpAnswerBytes`: what `/metrics` answers not yet taken by their clients may hold at
    /// once (256 MiB); past it a scrape is answered 503 and counted (`refused_api_answers`).
    pub http_answer_bytes: usize,
    /// `mgmtFirstCommandTimeoutMs`: a management connection that sends no command at all for
    /// this long is closed and counted (10 s; after its first command, `connectionIdleTimeoutMs`
    /// applies): silent connections cannot hold the management port's slots.
    pub mgmt_first_command_timeout: std::time::Duration,
    /// `maxStreamLineBytes`: the longest statsd line a TCP or Unix stream may send (1 MiB); a
    /// longer one is discarded whole and counted (`bad_lines.too_long`).
    pub max_stream_line_bytes: usize,
    /// `mgmtMaxConnections`: management connections served at once (16); more are closed at
    /// once and counted (`refused_management_connections`).
    pub mgmt_max_connections: usize,
    /// `mgmtMaxLineBytes`: the longest management command line (64 KiB); a longer one is
    /// answered `ERROR` and discarded whole.
    pub mgmt_max_line_bytes: usize,
}

impl IngestConfig {
    /// The settings as `histd check-config` prints them.
    pub fn effective(&self) -> Value {
        json!({
            "udpReaders": self.readers,
            "udpReaderMode": match self.mode { ReaderMode::ReusePort => "reuseport", ReaderMode::Shared => "shared" },
            "udpReceiveBufferBytes": self.receive_buffer,
            "udpBatchDatagrams": self.batch_datagrams,
            "maxDatagramBytes": self.max_datagram_bytes,
            "shutdownDrainMs": self.shutdown_drain.as_millis() as u64,
            "streamPendingBytes": self.stream_pending_bytes,
            "maxStreamConnections": self.max_stream_connections,
            "connectionIdleTimeoutMs": self.idle_timeout.map_or(0, |t| t.as_millis() as u64),
            "httpMaxConnections": self.http_max_connections,
            "httpMaxConnectionsPerAddress": self.http_max_connections_per_address,
            "httpHeaderTimeoutMs": self.http_header_timeout.as_millis() as u64,
            "httpBodyTimeoutMs": self.http_body_timeout.as_millis() as u64,
            "httpAnswerBytes": self.http_answer_bytes,
            "mgmtFirstCommandTimeoutMs": self.mgmt_first_command_timeout.as_millis() as u64,
            "maxStreamLineBytes": self.max_stream_line_bytes,
            "mgmtMaxConnections": self.mgmt_max_connections,
            "mgmtMaxLineBytes": self.mgmt_max_line_bytes,
        })
    }
}

/// Reads the ingest keys.
pub fn ingest(top: &Reader<'_>) -> Result<IngestConfig, ConfigError> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mode = match top.string("udpReaderMode")?.as_deref() {
        None | Some("reuseport") => ReaderMode::ReusePort,
        Some("shared") => ReaderMode::Shared,
        Some(other) => return Err(top.error("udpReaderMode", format!("'{other}' is not reuseport or shared"))),
    };
    Ok(IngestConfig {
        readers: count(top, "udpReaders", cores, 1, 256)?,
        mode,
        receive_buffer: count(top, "udpReceiveBufferBytes", DEFAULT_RECEIVE_BUFFER, 1, i32::MAX as usize)?,
        batch_datagrams: count(top, "udpBatchDatagrams", DEFAULT_BATCH_DATAGRAMS, 1, 1024)?,
        max_datagram_bytes: count(top, "maxDatagramBytes", DEFAULT_MAX_DATAGRAM, 512, 1 << 20)?,
        shutdown_drain: std::time::Duration::from_millis(count(
            top,
            "shutdownDrainMs",
            DEFAULT_SHUTDOWN_DRAIN_MS,
            0,
            600_000,
        )? as u64),
        stream_pending_bytes: count(top, "streamPendingBytes", DEFAULT_STREAM_PENDING_BYTES, 1 << 20, 1 << 40)?,
        max_stream_connections: count(top, "maxStreamConnections", 4096, 1, 1_000_000)?,
        idle_timeout: match count(top, "connectionIdleTimeoutMs", 600_000, 0, 86_400_000)? {
            0 => None,
            ms => Some(std::time::Duration::from_millis(ms as u64)),
        },
        http_max_connections: count(top, "httpMaxConnections", 256, 1, 100_000)?,
        http_max_connections_per_address: count(top, "httpMaxConnectionsPerAddress", 64, 0, 100_000)?,
        http_header_timeout: std::time::Duration::from_millis(
            count(top, "httpHeaderTimeoutMs", 10_000, 1, 600_000)? as u64
        ),
        http_body_timeout: std::time::Duration::from_millis(
            count(top, "httpBodyTimeoutMs", 30_000, 1, 3_600_000)? as u64
        ),
        http_answer_bytes: count(top, "httpAnswerBytes", 256 << 20, 1 << 20, 1 << 40)?,
        mgmt_first_command_timeout: std::time::Duration::from_millis(count(
            top,
            "mgmtFirstCommandTimeoutMs",
            10_000,
            1,
            3_600_000,
        )? as u64),
        // At least a read's chunk: a line within one read is never measured on its own.
        max_stream_line_bytes: count(top, "maxStreamLineBytes", DEFAULT_MAX_STREAM_LINE_BYTES, 65_536, 64 << 20)?,
        mgmt_max_connections: count(top, "mgmtMaxConnections", DEFAULT_MGMT_MAX_CONNECTIONS, 1, 4096)?,
        mgmt_max_line_bytes: count(top, "mgmtMaxLineBytes", DEFAULT_MGMT_MAX_LINE_BYTES, 1024, 16 << 20)?,
    })
}

/// A whole number from `low` to `high` at `key`, or `default`.
pub fn count(top: &Reader<'_>, key: &str, default: usize, low: usize, high: usize) -> Result<usize, ConfigError> {
    match top.number(key)? {
        None => Ok(default),
        Some(n) if n.fract() == 0.0 && n >= low as f64 && n <= high as f64 => Ok(n as usize),
        Some(n) => Err(top.error(key, format!("expected a whole number from {low} to {high}, got {n}"))),
    }
}
