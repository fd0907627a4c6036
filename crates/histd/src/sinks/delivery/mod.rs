//! The one delivery engine for what leaves the process to one destination: remote write,
//! otlp, circonus (HTTP, [`http`]), graphite's plaintext and pickle (TCP), the alert
//! notifications (Alertmanager and webhooks).
//!
//! An [`Outbox`] holds a destination's [`Parcel`]s in order, bounded in bytes (and in count
//! where a destination asks), the oldest dropped first and counted
//! (`dropped_points.buffer_full`); sends the oldest through its [`Transport`], which says what
//! became of it ([`Verdict`]); waits after a failure with the backoff every sender has (or
//! the receiver's `Retry-After`); and at the stop keeps trying until [`FINAL_DEADLINE`],
//! counting what is left (`dropped_points.shutdown`). What a verdict does to the counters,
//! the log and the next try is its [`Sender`]'s: every destination counts the same things in
//! its [`SinkTelemetry`] (`points_out`, `bytes_out`, `retries`, `errors`, `buffered_bytes`,
//! `dropped_points.*`) and logs a run of failures or drops once.
//!
//! Forward keeps the same [`Sender`] and [`Verdict`]s, with a buffer of its own: a spool on
//! disk whose batches each go to the node (or Kafka partition) they were cut for, in order per
//! node, while the other nodes' go on (see `forward/sink.rs`).

pub mod http;
pub mod sender;

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::SinkTelemetry;
use crate::backoff::FINAL_DEADLINE;

pub use http::{plain_judge, spawn_http_sink, Destination, Request, BATCH_QUEUE};
pub use sender::Sender;

/// Something an [`Outbox`] holds and sends whole.
pub trait Parcel: Send + 'static {
    /// Its size, for the outbox's bound and `bytes_out`.
    fn bytes(&self) -> u64;
    /// The data points it carries, for the counters.
    fn points(&self) -> u64;
    /// Whether this parcel makes `older` (queued before it) pointless to send: `older` is then
    /// let go of, not counted as dropped. None does by default.
    fn supersedes(&self, _older: &Self) -> bool {
        false
    }
}

/// What became of one parcel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Taken; `rejected` of its points were refused by the receiver (a partial success),
    /// with its reason.
    Delivered { rejected: u64, reason: Option<String> },
    /// Try again later: after `after` when the receiver said so, else after the backoff.
    Retry { reason: String, after: Option<Duration> },
    /// Refused for good: dropped and counted.
    Rejected(String),
}

impl Verdict {
    /// Taken whole.
    pub const DELIVERED: Verdict = Verdict::Delivered { rejected: 0, reason: None };

    /// Try again after the backoff (the receiver named no wait).
    pub fn retry(reason: impl Into<String>) -> Verdict {
        Verdict::Retry { reason: reason.into(), after: None }
    }
}

/// A way to one destination.
pub trait Transport: Send + 'static {
    /// What it sends.
    type Parcel: Parcel;

    /// Sends `parcel` once.
    fn send(&mut self, parcel: &Self::Parcel) -> impl Future<Output = Verdict> + Send;

    /// Takes `parcel` back after it was delivered (a TCP transport keeps what may still be in
    /// flight, to send again if the connection breaks). Dropped by default.
    fn delivered(&mut self, parcel: Self::Parcel) {
        drop(parcel);
    }

    /// Parcels delivered before that must go again (the connection they went on broke): the
    /// outbox puts them first. None by default.
    fn take_resend(&mut self) -> Vec<Self::Parcel> {
        Vec::new()
    }

    /// The outbox's room left, in bytes, after every change: what a transport keeps beside
    /// it must fit there. Nothing to do by default.
    fn room(&mut self, _bytes: u64) {}
}

/// An outbox's bounds and waits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The bytes it holds at most: past them the oldest parcels are dropped (the newest always
    /// stays, so a bound below one parcel does not drop everything).
    pub bytes: u64,
    /// The parcels it holds at most (the same way).
    pub parcels: usize,
    /// The first and the longest wait between tries.
    pub steps: (Duration, Duration),
}

/// One destination's ordered, bounded buffer and its sender.
pub struct Outbox<T: Transport> {
    transport: T,
    limits: Limits,
    parcels: VecDeque<T::Parcel>,
    bytes: u64,
    sender: Sender,
}

impl<T: Transport> Outbox<T> {
    /// An empty outbox named `name` in the log (`graphite`, `prometheus target vm`,
    /// `alerts.webhook`) sending through `transport`, counting into `telemetry`.
    pub fn new(name: impl Into<String>, transport: T, limits: Limits, telemetry: Arc<SinkTelemetry>) -> Self {
        Outbox {
            transport,
            limits,
            parcels: VecDeque::new(),
            bytes: 0,
            sender: Sender::new(name, limits.steps, telemetry),
        }
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.parcels.is_empty()
    }

    /// When the next try is due (none while nothing failed).
    pub fn retry_at(&self) -> Option<Instant> {
        self.sender.retry_at()
    }

    /// Queues `parcel` last, letting go of what it supersedes and, past the bounds, of the
    /// oldest.
    pub fn push(&mut self, parcel: T::Parcel) {
        let before = self.parcels.len();
        self.parcels.retain(|older| !parcel.supersedes(older));
        if self.parcels.len() != before {
            self.bytes = self.parcels.iter().map(Parcel::bytes).sum();
        }
        self.bytes += parcel.bytes();
        self.parcels.push_back(parcel);
        self.enforce_limits();
    }

    /// Sends each parcel of `parcels` as it comes, in order, and the ones that failed when
    /// their retry is due; when `parcels` closes, [`Outbox::finish`]es.
    pub async fn run<I>(mut self, mut parcels: mpsc::Receiver<I>)
    where
        I: IntoIterator<Item = T::Parcel>,
    {
        loop {
            let retry_at = self.retry_at();
            tokio::select! {
                batch = parcels.recv() => match batch {
                    Some(batch) => {
                        batch.into_iter().for_each(|parcel| self.push(parcel));
                        if retry_at.is_none() {
                            self.deliver().await;
                        }
                    }
                    None => break,
                },
                _ = tokio::time::sleep_until(retry_at.unwrap_or_else(Instant::now)), if retry_at.is_some() => {
                    self.retry().await;
                }
            }
        }
        self.finish().await;
    }

    /// The due retry: counted, then [`Outbox::deliver`].
    pub async fn retry(&mut self) -> bool {
        self.sender.retrying();
        self.deliver().await
    }

    /// Sends what is held, oldest first, until a parcel must wait for a retry; true when
    /// nothing is left.
    pub async fn deliver(&mut self) -> bool {
        while let Some(parcel) = self.parcels.front() {
            let (bytes, points) = (parcel.bytes(), parcel.points());
            let verdict = self.transport.send(parcel).await;
            let resend = self.transport.take_resend();
            let taken = matches!(verdict, Verdict::Delivered { .. });
            self.sender.record(&verdict, points, bytes);
            if let Verdict::Retry { after, .. } = verdict {
                self.put_first(resend);
                self.sender.wait(after);
                return false;
            }
            if let Some(sent) = self.parcels.pop_front() {
                self.bytes -= bytes;
                if taken {
                    self.transport.delivered(sent);
                }
            }
            self.put_first(resend);
            self.transport.room(self.limits.bytes.saturating_sub(self.bytes));
            self.sender.telemetry().buffered_bytes.set(self.bytes);
        }
        self.sender.caught_up();
        true
    }

    /// Keeps trying what is held until [`FINAL_DEADLINE`], then counts the rest as lost.
    pub async fn finish(self) {
        self.finish_within(FINAL_DEADLINE).await;
    }

    async fn finish_within(mut self, grace: Duration) {
        let deadline = Instant::now() + grace;
        while !self.parcels.is_empty() && Instant::now() < deadline {
            if self.deliver().await {
                break;
            }
            if let Some(retry_at) = self.retry_at() {
                tokio::time::sleep_until(retry_at.min(deadline)).await;
            }
        }
        if !self.parcels.is_empty() {
            let points: u64 = self.parcels.iter().map(Parcel::points).sum();
            self.sender.lost_at_stop(points, self.bytes);
        }
    }

    /// Puts `resend` (oldest first) before everything held.
    fn put_first(&mut self, resend: Vec<T::Parcel>) {
        if resend.is_empty() {
            return;
        }
        for parcel in resend.into_iter().rev() {
            self.bytes += parcel.bytes();
            self.parcels.push_front(parcel);
        }
        self.enforce_limits();
    }

    /// Drops the oldest parcels past the bounds, keeping the newest.
    fn enforce_limits(&mut self) {
        self.transport.room(self.limits.bytes.saturating_sub(self.bytes));
        while (self.bytes > self.limits.bytes || self.parcels.len() > self.limits.parcels) && self.parcels.len() > 1 {
            let Some(oldest) = self.parcels.pop_front() else { break };
            self.bytes -= oldest.bytes();
            self.sender.dropped_oldest(oldest.points(), self.limits.bytes);
        }
        self.sender.telemetry().buffered_bytes.set(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::DropReason;
    use crate::telemetry::EtsyStatus;

    /// A parcel: its number, size and points (its group for `supersedes`).
    #[derive(Debug)]
    struct Item(u64, u64, u64);

    impl Parcel for Item {
        fn bytes(&self) -> u64 {
            self.1
        }
        fn points(&self) -> u64 {
            self.2
        }
        fn supersedes(&self, older: &Self) -> bool {
            self.2 == 99 && older.2 == 99
        }
    }

    /// Answers from a script (then always delivers), records what it was asked to send; hands
    /// back `resend` once, on the first send.
    #[derive(Default)]
    struct Script {
        verdicts: VecDeque<Verdict>,
        sent: Vec<u64>,
        resend: Vec<Item>,
    }

    impl Transport for Script {
        type Parcel = Item;
        async fn send(&mut self, item: &Item) -> Verdict {
            self.sent.push(item.0);
            self.verdicts.pop_front().unwrap_or(Verdict::DELIVERED)
        }
        fn take_resend(&mut self) -> Vec<Item> {
            std::mem::take(&mut self.resend)
        }
    }

    fn outbox(script: Script, bytes: u64, parcels: usize) -> (Outbox<Script>, Arc<SinkTelemetry>) {
        let telemetry = Arc::new(SinkTelemetry::new("test", EtsyStatus::None, 0));
        let limits = Limits { bytes, parcels, steps: (Duration::from_millis(1), Duration::from_millis(2)) };
        (Outbox::new("test", script, limits, telemetry.clone()), telemetry)
    }

    #[tokio::test]
    async fn sends_in_order_and_a_failure_keeps_the_order_for_the_retry() {
        let script = Script { verdicts: [Verdict::DELIVERED, Verdict::retry("down")].into(), ..Default::default() };
        let (mut outbox, telemetry) = outbox(script, u64::MAX, usize::MAX);
        (1..=3).for_each(|n| outbox.push(Item(n, 10, 1)));
        assert!(!outbox.deliver().await, "the second failed");
        assert!(outbox.retry_at().is_some());
        assert_eq!((telemetry.buffered_bytes.get(), telemetry.points_out.get()), (20, 1));
        assert!(outbox.retry().await);
        assert_eq!(outbox.transport.sent, [1, 2, 2, 3]);
        assert_eq!((telemetry.points_out.get(), telemetry.retries.get(), telemetry.buffered_bytes.get()), (3, 1, 0));
        assert_eq!(outbox.retry_at(), None);
    }

    #[tokio::test]
    async fn refusals_and_partial_successes_are_counted_as_rejected() {
        let verdicts =
            [Verdict::Rejected("bad".into()), Verdict::Delivered { rejected: 2, reason: Some("two".into()) }];
        let (mut outbox, telemetry) =
            outbox(Script { verdicts: verdicts.into(), ..Default::default() }, u64::MAX, usize::MAX);
        outbox.push(Item(1, 10, 5));
        outbox.push(Item(2, 10, 5));
        assert!(outbox.deliver().await);
        assert_eq!((telemetry.points_out.get(), telemetry.dropped(DropReason::Rejected)), (3, 7));
        assert_eq!(telemetry.bytes_out.get(), 10, "only the delivered request's bytes");
    }

    #[test]
    fn past_its_bounds_the_oldest_go_and_the_newest_stays() {
        /// (limit in bytes, limit in parcels, sizes pushed, parcels kept, points dropped)
        type Case = (u64, usize, &'static [u64], &'static [u64], u64);
        let cases: [Case; 4] = [
            (25, usize::MAX, &[10, 10, 10], &[2, 3], 1),
            (5, usize::MAX, &[10, 10], &[2], 1),
            (u64::MAX, 2, &[1, 1, 1, 1], &[3, 4], 2),
            (u64::MAX, usize::MAX, &[1, 1], &[1, 2], 0),
        ];
        for (bytes, parcels, sizes, kept, dropped) in cases {
            let (mut outbox, telemetry) = outbox(Script::default(), bytes, parcels);
            for (n, size) in sizes.iter().enumerate() {
                outbox.push(Item(n as u64 + 1, *size, 1));
            }
            let held: Vec<u64> = outbox.parcels.iter().map(|item| item.0).collect();
            assert_eq!(
                (held.as_slice(), telemetry.dropped(DropReason::BufferFull)),
                (kept, dropped),
                "{bytes} {parcels} {sizes:?}"
            );
            assert_eq!(telemetry.buffered_bytes.get(), outbox.parcels.iter().map(|item| item.1).sum::<u64>());
        }
    }

    #[test]
    fn a_newer_parcel_lets_go_of_what_it_supersedes_uncounted() {
        let (mut outbox, telemetry) = outbox(Script::default(), u64::MAX, usize::MAX);
        outbox.push(Item(1, 10, 99));
        outbox.push(Item(2, 10, 1));
        outbox.push(Item(3, 10, 99));
        let held: Vec<u64> = outbox.parcels.iter().map(|item| item.0).collect();
        assert_eq!(
            (held, telemetry.dropped(DropReason::BufferFull), telemetry.buffered_bytes.get()),
            (vec![2, 3], 0, 20)
        );
    }

    #[tokio::test]
    async fn what_a_transport_hands_back_goes_first() {
        let script = Script { resend: vec![Item(7, 10, 1), Item(8, 10, 1)], ..Default::default() };
        let (mut outbox, telemetry) = outbox(script, u64::MAX, usize::MAX);
        outbox.push(Item(1, 10, 1));
        outbox.push(Item(2, 10, 1));
        assert!(outbox.deliver().await);
        assert_eq!(outbox.transport.sent, [1, 7, 8, 2]);
        assert_eq!(telemetry.points_out.get(), 4);
    }

    #[tokio::test]
    async fn at_the_stop_it_tries_until_the_deadline_and_counts_the_rest() {
        let script = Script {
            verdicts: std::iter::repeat_with(|| Verdict::retry("down")).take(10_000).collect(),
            ..Default::default()
        };
        let (mut outbox, telemetry) = outbox(script, u64::MAX, usize::MAX);
        outbox.push(Item(1, 10, 4));
        let started = Instant::now();
        outbox.finish_within(Duration::from_millis(50)).await;
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(telemetry.dropped(DropReason::Shutdown), 4);
    }
}
