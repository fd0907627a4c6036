//! One destination's sender: what each [`Verdict`] does to its counters, its log and its next
//! try. Every way out of the process keeps one: each [`Outbox`](super::Outbox), and forward's
//! delivery from its spool (one for the nodes, or the Kafka topic).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Verdict;
use crate::backoff::Backoff;
use crate::clock::unix_now_s;
use crate::sinks::{DropReason, SinkTelemetry};

/// A destination's counts, waits and once-per-run logs.
pub struct Sender {
    /// Its name in the log (`graphite`, `prometheus target vm`, `forward`).
    name: String,
    telemetry: Arc<SinkTelemetry>,
    backoff: Backoff,
    retry_at: Option<Instant>,
    /// Failing since the last delivery (logged once per run of failures).
    failing: bool,
    /// Dropping since the last delivery (logged once per run).
    dropping: bool,
    /// Partial successes since the last full one (logged once per run).
    partial: bool,
}

impl Sender {
    /// A sender named `name` in the log, waiting `steps` (first, longest) after failures and
    /// counting into `telemetry`.
    pub fn new(name: impl Into<String>, steps: (Duration, Duration), telemetry: Arc<SinkTelemetry>) -> Self {
        Sender {
            name: name.into(),
            telemetry,
            backoff: Backoff::new(steps),
            retry_at: None,
            failing: false,
            dropping: false,
            partial: false,
        }
    }

    /// What it counts into.
    pub fn telemetry(&self) -> &Arc<SinkTelemetry> {
        &self.telemetry
    }

    /// When the next try is due (none while nothing waits after a failure).
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    /// The due retry begins: counted in `retries`.
    pub fn retrying(&self) {
        self.telemetry.retries.add(1);
    }

    /// Counts what became of a parcel of `points` points and `bytes` bytes. Delivered (maybe
    /// in part) or refused for good, it leaves the buffer: true. To be tried again, it stays:
    /// false, and the run of failures is logged once; [`Sender::wait`] then sets the next try.
    pub fn record(&mut self, verdict: &Verdict, points: u64, bytes: u64) -> bool {
        match verdict {
            Verdict::Delivered { rejected, reason } => {
                self.delivered(points, *rejected, reason.as_deref(), bytes);
                true
            }
            Verdict::Rejected(reason) => {
                self.telemetry.failed_because(unix_now_s(), reason);
                self.telemetry.drop_points(DropReason::Rejected, points);
                tracing::warn!(destination = %self.name, points, %reason, "the receiver refused a request: dropped (dropped_points.rejected)");
                true
            }
            Verdict::Retry { reason, .. } => {
                self.telemetry.failed_because(unix_now_s(), reason);
                if !self.failing {
                    self.failing = true;
                    tracing::warn!(destination = %self.name, %reason, "sending failed; buffering and retrying");
                } else {
                    tracing::debug!(destination = %self.name, %reason, "sending failed again");
                }
                false
            }
        }
    }

    /// Sets the next try once a pass left parcels to retry: after `asked` when the receiver
    /// said so (`Retry-After`, capped), else after the backoff's next step.
    pub fn wait(&mut self, asked: Option<Duration>) {
        self.retry_at = Some(Instant::now() + self.backoff.failed(asked));
    }

    /// Nothing waits for a retry any more.
    pub fn caught_up(&mut self) {
        self.retry_at = None;
    }

    /// Counts `points` the buffer dropped when full (its bound `limit` bytes), logged once per
    /// run of drops.
    pub fn dropped_oldest(&mut self, points: u64, limit: u64) {
        self.telemetry.drop_points(DropReason::BufferFull, points);
        if !self.dropping {
            self.dropping = true;
            tracing::warn!(destination = %self.name, limit, "retry buffer full: dropping the oldest points (dropped_points.buffer_full)");
        }
    }

    /// Counts `points` (`bytes`) still held at the stop's deadline as lost.
    pub fn lost_at_stop(&self, points: u64, bytes: u64) {
        self.telemetry.drop_points(DropReason::Shutdown, points);
        tracing::error!(destination = %self.name, points, bytes, "receiver unreachable at exit: undelivered points lost (dropped_points.shutdown)");
    }

    fn delivered(&mut self, points: u64, rejected: u64, reason: Option<&str>, bytes: u64) {
        let rejected = rejected.min(points);
        self.telemetry.points_out.add(points - rejected);
        self.telemetry.bytes_out.add(bytes);
        self.telemetry.succeeded(unix_now_s());
        self.backoff.reset();
        (self.failing, self.dropping) = (false, false);
        if rejected == 0 {
            self.partial = false;
            return;
        }
        self.telemetry.drop_points(DropReason::Rejected, rejected);
        if !self.partial {
            self.partial = true;
            let reason = reason.unwrap_or_default();
            tracing::warn!(destination = %self.name, rejected, %reason, "the receiver took a request in part: the rest counted in dropped_points.rejected");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::EtsyStatus;

    fn sender() -> Sender {
        let telemetry = Arc::new(SinkTelemetry::new("test", EtsyStatus::None, 0));
        Sender::new("test", (Duration::from_secs(1), Duration::from_secs(4)), telemetry)
    }

    #[test]
    fn each_verdict_counts_as_it_should() {
        /// (verdict, leaves the buffer, points out, rejected, bytes out, errors)
        type Case = (Verdict, bool, u64, u64, u64, u64);
        let cases: [Case; 5] = [
            (Verdict::DELIVERED, true, 10, 0, 100, 0),
            (Verdict::Delivered { rejected: 3, reason: Some("bad".into()) }, true, 7, 3, 100, 0),
            (Verdict::Delivered { rejected: 30, reason: None }, true, 0, 10, 100, 0),
            (Verdict::Rejected("no".into()), true, 0, 10, 0, 1),
            (Verdict::retry("down"), false, 0, 0, 0, 1),
        ];
        for (verdict, leaves, out, rejected, bytes, errors) in cases {
            let mut sender = sender();
            assert_eq!(sender.record(&verdict, 10, 100), leaves, "{verdict:?}");
            let telemetry = sender.telemetry();
            assert_eq!(
                (
                    telemetry.points_out.get(),
                    telemetry.dropped(DropReason::Rejected),
                    telemetry.bytes_out.get(),
                    telemetry.errors.get()
                ),
                (out, rejected, bytes, errors),
                "{verdict:?}"
            );
        }
    }

    #[test]
    fn waits_follow_the_receiver_or_the_backoff_and_a_delivery_starts_over() {
        let mut sender = sender();
        let due_in = |sender: &Sender| sender.retry_at().map(|at| at.saturating_duration_since(Instant::now()));
        sender.wait(Some(Duration::from_secs(30)));
        assert!(due_in(&sender) > Some(Duration::from_secs(29)), "Retry-After obeyed");
        sender.wait(None);
        assert!(due_in(&sender) > Some(Duration::from_millis(1500)), "the second step: 2 s ± 20 %");
        sender.record(&Verdict::DELIVERED, 1, 1);
        sender.wait(None);
        assert!(due_in(&sender) < Some(Duration::from_millis(1200)), "back to the first step");
        sender.caught_up();
        assert_eq!(sender.retry_at(), None);
    }
}
