//! What every sink counts, as typed counters and gauges: one struct per sink, written by the
//! sink (and by the flusher for its queue), read by the management `stats` reply and
//! `/health` through [`SinkTelemetry::entries`], so each name is spelled once.

use crate::telemetry::{Counter, Gauge};

/// Why a sink dropped points it had taken on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Its retry buffer was full (the oldest points went).
    BufferFull,
    /// It could not deliver them before the shutdown deadline.
    Shutdown,
    /// The destination refused them for good (a write that failed, a rejected request).
    Rejected,
    /// Written to a connection that then broke, possibly unread by the peer, and no longer
    /// kept to be sent again (the resend window was smaller than what was in flight).
    PossiblyLost,
    /// Kept on disk and read back damaged (its checksum did not verify): set aside as
    /// `*.corrupt`, never sent.
    Corrupt,
}

impl DropReason {
    /// Every reason, in the order [`SinkTelemetry::entries`] lists them.
    pub const ALL: [DropReason; 5] = [
        DropReason::BufferFull,
        DropReason::Shutdown,
        DropReason::Rejected,
        DropReason::PossiblyLost,
        DropReason::Corrupt,
    ];

    /// The reason's place in [`DropReason::ALL`] (and in [`SinkTelemetry::dropped_points`]).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name in `dropped_points.<reason>`.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::BufferFull => "buffer_full",
            DropReason::Shutdown => "shutdown",
            DropReason::Rejected => "rejected",
            DropReason::PossiblyLost => "possibly_lost",
            DropReason::Corrupt => "corrupt",
        }
    }
}

/// The Etsy spellings a sink's status has in Etsy's `stats` reply, for the sinks that have
/// Etsy counterparts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EtsyStatus {
    /// No Etsy counterpart.
    None,
    /// Etsy's graphite backend: `last_flush`, `last_exception`, `flush_time`, `flush_length`.
    Graphite,
    /// Etsy's console backend: `lastFlush`, `lastException`.
    Console,
}

/// One sink's counters and gauges.
#[derive(Debug)]
pub struct SinkTelemetry {
    /// The sink's name, the prefix of its `stats` lines.
    pub sink: &'static str,
    /// Which Etsy names it also reports under.
    pub etsy: EtsyStatus,
    /// Snapshots (or, for the repeater, packets) waiting in its queue.
    pub queued: Gauge,
    /// Snapshots (packets) the flusher (readers) could not queue because the queue was full.
    pub queue_full_drops: Counter,
    /// The estimated bytes of what waits in its queue.
    pub queued_bytes: Gauge,
    /// The most bytes its queue and retry buffer hold together (a queue always takes one
    /// snapshot when it is empty, whatever its size).
    pub queue_limit_bytes: u64,
    /// Flushes (packets) delivered whole.
    pub delivered: Counter,
    /// Points delivered: Graphite lines, store rows, repeated packets.
    pub points_out: Counter,
    /// Bytes delivered.
    pub bytes_out: Counter,
    /// Deliveries tried again after a failure.
    pub retries: Counter,
    /// Failed delivery attempts.
    pub errors: Counter,
    /// Points dropped after they were taken on, by reason (indexed as [`DropReason::ALL`]).
    pub dropped_points: [Counter; DropReason::ALL.len()],
    /// Points sent again after a connection broke (they may arrive twice: Graphite keeps one
    /// value per name and timestamp).
    pub resent_points: Counter,
    /// Bytes held for a later retry.
    pub buffered_bytes: Gauge,
    /// Bytes already written but kept to be sent again if the connection breaks (counted in
    /// the retry buffer's limit, given up first).
    pub resend_window_bytes: Gauge,
    /// Unix seconds at start.
    pub started_unix_s: u64,
    /// Unix seconds of the last complete delivery (0: none yet).
    pub last_success_unix_s: Gauge,
    /// Unix seconds of the last failure (0: none).
    pub last_error_unix_s: Gauge,
    /// How long the last flush took to deliver, in microseconds.
    pub last_flush_us: Gauge,
    /// The size of the last flush, in bytes.
    pub last_flush_bytes: Gauge,
    /// Values one sink alone has (the store's size and drops), set by the sink once a flush.
    details: std::sync::Mutex<Vec<Detail>>,
    /// Why the last failure happened (`/health`'s `sink_last_errors`).
    last_error: std::sync::Mutex<Option<String>>,
}

/// A value one sink alone publishes beside the shared ones.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Detail {
    /// Its name in `/health`, `stats` and `/metrics` (`histd_sink_<name>`).
    pub name: &'static str,
    /// Its value.
    pub value: f64,
    /// A level (what is held now: a gauge) rather than a running total (a counter).
    pub level: bool,
}

impl SinkTelemetry {
    /// Zeroed telemetry for `sink`, started at `startup_unix_s`.
    pub fn new(sink: &'static str, etsy: EtsyStatus, startup_unix_s: u64) -> Self {
        SinkTelemetry {
            sink,
            etsy,
            started_unix_s: startup_unix_s,
            queued: Gauge::default(),
            queue_full_drops: Counter::default(),
            queued_bytes: Gauge::default(),
            queue_limit_bytes: u64::MAX,
            delivered: Counter::default(),
            points_out: Counter::default(),
            bytes_out: Counter::default(),
            retries: Counter::default(),
            errors: Counter::default(),
            dropped_points: Default::default(),
            resent_points: Counter::default(),
            buffered_bytes: Gauge::default(),
            resend_window_bytes: Gauge::default(),
            last_success_unix_s: Gauge::default(),
            last_error_unix_s: Gauge::default(),
            last_flush_us: Gauge::default(),
            last_flush_bytes: Gauge::default(),
            details: std::sync::Mutex::new(Vec::new()),
            last_error: std::sync::Mutex::new(None),
        }
    }

    /// Replaces the sink's own values.
    pub fn set_details(&self, details: Vec<Detail>) {
        *self.details() = details;
    }

    fn details(&self) -> std::sync::MutexGuard<'_, Vec<Detail>> {
        self.details.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The same telemetry with a byte limit for the queue (and retry buffer).
    pub fn with_queue_limit(self, bytes: u64) -> Self {
        SinkTelemetry { queue_limit_bytes: bytes, ..self }
    }

    /// Whether one more item of `bytes` may be queued: always into an empty queue, else only
    /// within the limit (with what the retry buffer holds).
    pub fn may_queue(&self, bytes: u64) -> bool {
        let held = self.queued_bytes.get();
        held == 0 || held + self.buffered_bytes.get() + bytes <= self.queue_limit_bytes
    }

    /// Records that the sink took an item of `bytes` off its queue, leaving `left` items.
    pub fn dequeued(&self, bytes: u64, left: usize) {
        self.queued_bytes.sub(bytes);
        self.queued.set(left as u64);
    }

    /// Counts points dropped for `reason`.
    pub fn drop_points(&self, reason: DropReason, points: u64) {
        self.dropped_points[reason.index()].add(points);
    }

    /// Points dropped for `reason` so far.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped_points[reason.index()].get()
    }

    /// Records a complete delivery at `now_unix_s`.
    pub fn succeeded(&self, now_unix_s: u64) {
        self.delivered.add(1);
        self.last_success_unix_s.set(now_unix_s);
    }

    /// Records a failed attempt at `now_unix_s`.
    pub fn failed(&self, now_unix_s: u64) {
        self.errors.add(1);
        self.last_error_unix_s.set(now_unix_s);
    }

    /// [`SinkTelemetry::failed`], keeping why.
    pub fn failed_because(&self, now_unix_s: u64, reason: &str) {
        self.failed(now_unix_s);
        self.note_error(reason);
    }

    /// Keeps why something failed that is not a delivery of its own (a receiver's health
    /// check), without counting an error.
    pub fn note_error(&self, reason: &str) {
        *self.last_error.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(reason.to_string());
    }

    /// Why the last failure happened, if one did.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Adds `count` to the detail `name` (a running total), keeping the other details.
    pub fn add_to_detail(&self, name: &'static str, count: f64) {
        let mut details = self.details();
        match details.iter_mut().find(|detail| detail.name == name) {
            Some(detail) => detail.value += count,
            None => details.push(Detail { name, value: count, level: false }),
        }
    }

    /// Every value by its `stats` name, at `now_unix_s`: first the Etsy backend's own names
    /// with Etsy's values (unix seconds; the `stats` reply shows names starting `last_` as
    /// seconds since, as Etsy does), then histd's (`seconds_since_success` and
    /// `seconds_since_error`, -1 for never).
    pub fn entries(&self, now_unix_s: u64) -> Vec<(String, f64)> {
        let mut entries: Vec<(String, f64)> =
            self.etsy_entries().into_iter().map(|(n, v)| (n.to_string(), v)).collect();
        entries.extend(self.histd_entries(now_unix_s));
        entries
    }

    /// True for the values of [`SinkTelemetry::histd_entries`] that are levels (what is held
    /// now, seconds since) rather than running totals: `/metrics` types them as gauges.
    pub fn is_level(&self, name: &str) -> bool {
        const LEVELS: [&str; 6] = [
            "queued",
            "queued_bytes",
            "buffered_bytes",
            "resend_window_bytes",
            "seconds_since_success",
            "seconds_since_error",
        ];
        LEVELS.contains(&name) || self.details().iter().any(|detail| detail.level && detail.name == name)
    }

    /// histd's values alone, by name (what `/health` shows).
    pub fn histd_entries(&self, now_unix_s: u64) -> Vec<(String, f64)> {
        let mut entries = Vec::new();
        let since = |unix_s: u64| if unix_s == 0 { -1.0 } else { now_unix_s.saturating_sub(unix_s) as f64 };
        let counts = [
            ("queued", self.queued.get()),
            ("queue_full_drops", self.queue_full_drops.get()),
            ("queued_bytes", self.queued_bytes.get()),
            ("delivered", self.delivered.get()),
            ("points_out", self.points_out.get()),
            ("bytes_out", self.bytes_out.get()),
            ("retries", self.retries.get()),
            ("resent_points", self.resent_points.get()),
            ("errors", self.errors.get()),
            ("buffered_bytes", self.buffered_bytes.get()),
            ("resend_window_bytes", self.resend_window_bytes.get()),
        ];
        entries.extend(counts.into_iter().map(|(name, value)| (name.to_string(), value as f64)));
        for reason in DropReason::ALL {
            entries.push((format!("dropped_points.{}", reason.as_str()), self.dropped(reason) as f64));
        }
        entries.push(("seconds_since_success".to_string(), since(self.last_success_unix_s.get())));
        entries.push(("seconds_since_error".to_string(), since(self.last_error_unix_s.get())));
        entries.extend(self.details().iter().map(|detail| (detail.name.to_string(), detail.value)));
        entries
    }

    /// The values under Etsy's names, as Etsy sets them: `last_flush` starts at the start
    /// time, `last_exception` at 0 (graphite) or the start time (console, which never updates
    /// it in Etsy; histd does on a failed write).
    pub fn etsy_entries(&self) -> Vec<(&'static str, f64)> {
        let or_start = |unix_s: u64| if unix_s == 0 { self.started_unix_s } else { unix_s } as f64;
        let (success, error) = (or_start(self.last_success_unix_s.get()), self.last_error_unix_s.get());
        match self.etsy {
            EtsyStatus::None => Vec::new(),
            EtsyStatus::Graphite => vec![
                ("last_flush", success),
                ("last_exception", error as f64),
                ("flush_time", self.last_flush_us.get() as f64 / 1000.0),
                ("flush_length", self.last_flush_bytes.get() as f64),
            ],
            EtsyStatus::Console => vec![("lastFlush", success), ("lastException", or_start(error))],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_values_it_publishes() {
        let telemetry = SinkTelemetry::new("graphite", EtsyStatus::Graphite, 100);
        let names: Vec<String> = telemetry.histd_entries(100).into_iter().map(|(name, _)| name).collect();
        let levels: Vec<&String> = names.iter().filter(|name| telemetry.is_level(name)).collect();
        assert_eq!(levels.len(), 6, "every level is a published name: {levels:?}");
        let edges = crate::telemetry::EdgeCounters::default();
        let edge_levels =
            edges.entries().iter().filter(|(name, _)| crate::telemetry::EdgeCounters::is_level(name)).count();
        assert_eq!(edge_levels, 6);
    }

    #[test]
    fn publishes_every_value_under_one_name() {
        let telemetry = SinkTelemetry::new("graphite", EtsyStatus::Graphite, 100);
        telemetry.points_out.add(5);
        telemetry.drop_points(DropReason::BufferFull, 3);
        telemetry.failed(130);
        telemetry.succeeded(140);
        telemetry.last_flush_us.set(2500);
        let entries = telemetry.entries(150);
        let value = |name: &str| entries.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
        let cases = [
            ("last_flush", Some(140.0)),
            ("last_exception", Some(130.0)),
            ("flush_time", Some(2.5)),
            ("points_out", Some(5.0)),
            ("delivered", Some(1.0)),
            ("errors", Some(1.0)),
            ("dropped_points.buffer_full", Some(3.0)),
            ("dropped_points.shutdown", Some(0.0)),
            ("seconds_since_success", Some(10.0)),
            ("seconds_since_error", Some(20.0)),
            ("lastFlush", None),
        ];
        for (name, want) in cases {
            assert_eq!(value(name), want, "{name}");
        }
        let names: Vec<&String> = entries.iter().map(|(n, _)| n).collect();
        let unique: std::collections::BTreeSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "each name once: {names:?}");
    }

    #[test]
    fn every_reason_has_its_own_counter() {
        assert!(DropReason::ALL.iter().enumerate().all(|(at, reason)| reason.index() == at));
        let telemetry = SinkTelemetry::new("graphite", EtsyStatus::Graphite, 0);
        DropReason::ALL.iter().for_each(|reason| telemetry.drop_points(*reason, 1 + reason.index() as u64));
        assert!(DropReason::ALL.iter().all(|reason| telemetry.dropped(*reason) == 1 + reason.index() as u64));
    }

    #[test]
    fn a_queue_keeps_to_its_byte_limit() {
        let telemetry = SinkTelemetry::new("graphite", EtsyStatus::Graphite, 0).with_queue_limit(100);
        assert!(telemetry.may_queue(500), "an empty queue takes one snapshot of any size");
        telemetry.queued_bytes.add(500);
        assert!(!telemetry.may_queue(1));
        telemetry.dequeued(500, 0);
        telemetry.queued_bytes.add(40);
        telemetry.buffered_bytes.set(50);
        assert!(telemetry.may_queue(10) && !telemetry.may_queue(11), "the retry buffer counts too");
    }

    #[test]
    fn never_is_minus_one_and_etsy_starts_at_startup() {
        let telemetry = SinkTelemetry::new("console", EtsyStatus::Console, 40);
        let entries = telemetry.entries(50);
        for (name, want) in [
            ("seconds_since_error", -1.0),
            ("seconds_since_success", -1.0),
            ("lastFlush", 40.0),
            ("lastException", 40.0),
        ] {
            assert!(entries.contains(&(name.to_string(), want)), "{name}: {entries:?}");
        }
        let graphite = SinkTelemetry::new("graphite", EtsyStatus::Graphite, 40);
        assert_eq!(graphite.etsy_entries()[..2], [("last_flush", 40.0), ("last_exception", 0.0)]);
    }
}
