//! The daemon's self-telemetry that no reader table carries: typed counters, each counted
//! where it happens (an atomic add, never a log line per event) and published the same way
//! to the management `stats` reply and `/health`.

pub mod budgets;
mod sinks;

pub use sinks::{Detail, DropReason, EtsyStatus, SinkTelemetry};

use std::sync::atomic::{AtomicU64, Ordering};

/// A count that only goes up.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `amount`.
    pub fn add(&self, amount: u64) {
        self.0.fetch_add(amount, Ordering::Relaxed);
    }

    /// The count so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A value that goes up and down (a queue's depth, bytes held).
#[derive(Debug, Default)]
pub struct Gauge(AtomicU64);

impl Gauge {
    /// Sets it.
    pub fn set(&self, value: u64) {
        self.0.store(value, Ordering::Relaxed);
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Adds `amount` unless that would take it past `limit`; whether it did.
    pub fn try_add(&self, amount: u64, limit: u64) -> bool {
        self.0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(amount).filter(|total| *total <= limit)
            })
            .is_ok()
    }

    /// Adds `amount` (past any limit: for what is held already).
    pub fn add(&self, amount: u64) {
        self.0.fetch_add(amount, Ordering::Relaxed);
    }

    /// Takes `amount` off (never below zero).
    pub fn sub(&self, amount: u64) {
        let _ = self.0.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| Some(held.saturating_sub(amount)));
    }
}

/// What the edges of the daemon refused or could not keep, outside any reader's table.
#[derive(Debug, Default)]
pub struct EdgeCounters {
    /// Connections to the management port or a statsd stream listener closed unread because
    /// their first line was an HTTP request or header (a web page's cross-protocol request).
    pub refused_http_connections: Counter,
    /// Management connections closed at once because as many as allowed were open.
    pub refused_management_connections: Counter,
    /// Management command lines longer than `mgmtMaxLineBytes`, answered `ERROR` unread.
    pub refused_management_lines: Counter,
    /// Statsd stream connections closed at once because `maxStreamConnections` were open.
    pub refused_stream_connections: Counter,
    /// HTTP connections closed at once because `httpMaxConnections` were open.
    pub refused_api_connections: Counter,
    /// HTTP connections closed at once because `httpMaxConnectionsPerAddress` were open from
    /// their address.
    pub refused_address_connections: Counter,
    /// Stream and management connections closed after `connectionIdleTimeoutMs` of silence,
    /// and management and HTTP connections a new one displaced when every slot was taken
    /// (silent, or a forwarded body still arriving).
    pub idle_closed_connections: Counter,
    /// HTTP connections closed because a request's headers took past `httpHeaderTimeoutMs`.
    pub http_header_timeouts: Counter,
    /// Store API requests answered 400: a parameter that does not read, or asks past a
    /// limit (`queryMaxSteps`, `queryMaxSeries`, the fixed bounds on patterns and depth).
    pub refused_api_requests: Counter,
    /// Datagrams still in a socket buffer when the shutdown drain's time ran out.
    pub shutdown_unread_datagrams: Counter,
    /// Stream connections still sending when the shutdown drain's time ran out (what they sent
    /// after it is not read).
    pub shutdown_cut_connections: Counter,
    /// Bytes of partial lines (no newline yet) held across every stream connection.
    pub stream_pending_bytes: Gauge,
    /// Forwarded batches merged (`global.accept`).
    pub forward_batches_merged: Counter,
    /// Series those batches held.
    pub forward_series_merged: Counter,
    /// Forwarded batches acknowledged without merging: their identity was merged before.
    pub forward_batches_duplicate: Counter,
    /// Forwarded bodies refused: malformed (HTTP 400), another encoding (415), or sent while
    /// `global.accept` is off (503).
    pub forward_batches_refused: Counter,
    /// Journal files (`global.journalDir`) found damaged at start (their checksum, header or
    /// batch did not read): set aside as `*.corrupt`, not merged.
    pub journal_corrupt_batches: Counter,
    /// Stored blocks a read found damaged (their checksum or bytes do not hold), each counted
    /// once: their rows are left out of every answer (`/health` names them).
    pub store_corrupt_blocks: Counter,
    /// Series and group rows a read found damaged (their checksum does not hold), each
    /// counted once per reading connection: a series row's points are left out of every
    /// answer, a group row's series answered from raw rows, until the writer salvages the file
    /// (which drops the series row and rebuilds the group row).
    pub store_damaged_rows: Counter,
    /// Batch identities forgotten to stay within `global.dedupBatches` or `global.dedupBytes`.
    pub forward_ids_forgotten: Counter,
    /// Forwarded requests answered 503 (`Retry-After`): `global.maxBytesInFlight` was held,
    /// or `global.maxLateIntervals` late intervals were.
    pub forward_batches_busy: Counter,
    /// Forwarded batches that came after the flush they belong to: flushed in a late
    /// interval of their own, stamped with that flush's time.
    pub forward_batches_late: Counter,
    /// Kafka offset commits (`global.kafka`) the group's coordinator did not acknowledge;
    /// each is made again a second later.
    pub forward_commits_failed: Counter,
    /// Partitions whose offsets a flush carried and the coordinator has not acknowledged yet
    /// (`global.kafka`): a global killed now has their batches read again by the next owner.
    pub forward_commits_pending: Gauge,
    /// The topic's partitions the consumer group gives this global now (`global.kafka`).
    pub forward_partitions_assigned: Gauge,
    /// Kafka record batches the client could not decode (`global.kafka`): damaged ones
    /// skipped, or one in a codec this histd lacks, where its partition is held (`/health`
    /// names each).
    pub forward_batches_unreadable: Counter,
    /// Partitions whose reading is held at a batch this histd cannot decode: `/health` says
    /// `degraded`.
    pub forward_partitions_held: Gauge,
    /// Messages waiting in this global's assigned partitions (`global.kafka`): each
    /// partition's last stable offset less the next offset read, summed (`/health` has each).
    pub forward_consumer_lag: Gauge,
    /// Kafka messages a restarted global passed over because its store holds them already
    /// (flushed before it was killed, not committed then: `global/rejoin.rs`).
    pub forward_batches_already_stored: Counter,
    /// Kafka messages this global merged that another member of its group reads again (a
    /// commit that failed as partitions were taken away; partitions a restarted global found
    /// given to another member past what it had committed): counted twice in the group.
    pub forward_batches_possibly_twice: Counter,
    /// Batches read from Kafka refused with `global.kafka.signingKeys`: unsigned, of a source
    /// without a key, or signed with another key (counted in `forward_batches_refused` too).
    pub forward_refused_signatures: Counter,
    /// Forwarded batches refused: an interval this histd does not believe (counted in
    /// `forward_batches_refused` too).
    pub forward_refused_intervals: Counter,
    /// Forwarded series keys cleaned by `keyNameSanitize`'s rules (the series kept).
    pub forward_keys_sanitized: Counter,
    /// Forwarded series dropped: nothing was left of the key once cleaned.
    pub forward_refused_empty_keys: Counter,
    /// Forwarded series dropped: a NaN or infinite value or total.
    pub forward_refused_non_finite: Counter,
    /// Forwarded gauges dropped: stamped too far ahead of this histd's clock.
    pub forward_refused_future_gauges: Counter,
    /// HTTP requests refused: the `Host` header names neither an address, `localhost` nor a
    /// name in `http.hostnames` (DNS rebinding).
    pub refused_http_hosts: Counter,
    /// HTTP requests refused: a state-changing request a web page could send (another
    /// origin, or a content type that needs no preflight).
    pub refused_http_origins: Counter,
    /// HTTP requests refused: no credential, or a wrong one, for the route's role (401/403).
    pub refused_http_credentials: Counter,
    /// Statsd datagrams dropped: their source is outside the listener's `allow` networks.
    pub refused_ingest_datagrams: Counter,
    /// Statsd stream connections closed at once: their source is outside `allow`.
    pub refused_ingest_connections: Counter,
    /// HTTP requests whose body did not arrive within `httpBodyTimeoutMs`.
    pub http_body_timeouts: Counter,
    /// `/metrics` scrapes answered 503: the answers not yet taken by their clients held
    /// `httpAnswerBytes`.
    pub refused_api_answers: Counter,
    /// HTTPS connections whose handshake failed (no or an untrusted client certificate, not
    /// TLS at all) or took past `httpHeaderTimeoutMs`.
    pub http_tls_failures: Counter,
    /// Config reloads applied (SIGHUP, `POST /-/reload`).
    pub config_reloads: Counter,
    /// Config reloads refused: the file did not read or was invalid (the old config runs on).
    pub config_reload_failures: Counter,
    /// The smallest UDP receive buffer as the kernel reads it back (`SO_RCVBUF`: twice what
    /// was set, half being its bookkeeping); 0 without UDP listeners.
    pub receive_buffer_bytes: Gauge,
}

impl EdgeCounters {
    /// Records a UDP socket's receive buffer (the smallest is kept).
    pub fn udp_receive_buffer(&self, kernel_bytes: u64) {
        let current = self.receive_buffer_bytes.get();
        if current == 0 || kernel_bytes < current {
            self.receive_buffer_bytes.set(kernel_bytes);
        }
    }

    /// True for the entries that are levels (bytes held now, the buffer granted) rather than
    /// running totals: `/metrics` types them as gauges.
    pub fn is_level(name: &str) -> bool {
        matches!(
            name,
            "stream_pending_bytes"
                | "receive_buffer_bytes"
                | "forward_commits_pending"
                | "forward_partitions_assigned"
                | "forward_partitions_held"
                | "forward_consumer_lag"
        )
    }

    /// Every counter by its `stats` name.
    pub fn entries(&self) -> [(&'static str, u64); 47] {
        [
            ("refused_http_connections", self.refused_http_connections.get()),
            ("refused_management_connections", self.refused_management_connections.get()),
            ("refused_management_lines", self.refused_management_lines.get()),
            ("refused_stream_connections", self.refused_stream_connections.get()),
            ("refused_api_connections", self.refused_api_connections.get()),
            ("refused_address_connections", self.refused_address_connections.get()),
            ("idle_closed_connections", self.idle_closed_connections.get()),
            ("http_header_timeouts", self.http_header_timeouts.get()),
            ("refused_api_requests", self.refused_api_requests.get()),
            ("shutdown_unread_datagrams", self.shutdown_unread_datagrams.get()),
            ("shutdown_cut_connections", self.shutdown_cut_connections.get()),
            ("forward_batches_merged", self.forward_batches_merged.get()),
            ("forward_series_merged", self.forward_series_merged.get()),
            ("forward_batches_duplicate", self.forward_batches_duplicate.get()),
            ("forward_batches_refused", self.forward_batches_refused.get()),
            ("forward_ids_forgotten", self.forward_ids_forgotten.get()),
            ("journal_corrupt_batches", self.journal_corrupt_batches.get()),
            ("store_corrupt_blocks", self.store_corrupt_blocks.get()),
            ("store_damaged_rows", self.store_damaged_rows.get()),
            ("forward_batches_busy", self.forward_batches_busy.get()),
            ("forward_batches_late", self.forward_batches_late.get()),
            ("forward_commits_failed", self.forward_commits_failed.get()),
            ("forward_commits_pending", self.forward_commits_pending.get()),
            ("forward_partitions_assigned", self.forward_partitions_assigned.get()),
            ("forward_batches_unreadable", self.forward_batches_unreadable.get()),
            ("forward_partitions_held", self.forward_partitions_held.get()),
            ("forward_consumer_lag", self.forward_consumer_lag.get()),
            ("forward_batches_already_stored", self.forward_batches_already_stored.get()),
            ("forward_batches_possibly_twice", self.forward_batches_possibly_twice.get()),
            ("forward_refused_intervals", self.forward_refused_intervals.get()),
            ("forward_refused_signatures", self.forward_refused_signatures.get()),
            ("forward_keys_sanitized", self.forward_keys_sanitized.get()),
            ("forward_refused_empty_keys", self.forward_refused_empty_keys.get()),
            ("forward_refused_non_finite", self.forward_refused_non_finite.get()),
            ("forward_refused_future_gauges", self.forward_refused_future_gauges.get()),
            ("refused_http_hosts", self.refused_http_hosts.get()),
            ("refused_http_origins", self.refused_http_origins.get()),
            ("refused_http_credentials", self.refused_http_credentials.get()),
            ("refused_ingest_datagrams", self.refused_ingest_datagrams.get()),
            ("refused_ingest_connections", self.refused_ingest_connections.get()),
            ("http_body_timeouts", self.http_body_timeouts.get()),
            ("refused_api_answers", self.refused_api_answers.get()),
            ("http_tls_failures", self.http_tls_failures.get()),
            ("config_reloads", self.config_reloads.get()),
            ("config_reload_failures", self.config_reload_failures.get()),
            ("stream_pending_bytes", self.stream_pending_bytes.get()),
            ("receive_buffer_bytes", self.receive_buffer_bytes.get()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::Gauge;

    #[test]
    fn a_gauge_keeps_to_its_limit() {
        let gauge = Gauge::default();
        assert!(gauge.try_add(60, 100));
        assert!(!gauge.try_add(41, 100));
        assert!(gauge.try_add(40, 100));
        gauge.sub(150);
        assert_eq!(gauge.get(), 0);
    }
}
