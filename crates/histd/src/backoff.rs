//! How every sender waits after a failure (remote write, otlp, circonus, forward, graphite, the
//! alert notifications): exponential steps from a first wait to a longest one, each with up to
//! ±20 % jitter so that many senders whose receiver comes back do not all retry at one moment;
//! a receiver's `Retry-After` is obeyed instead, up to [`MAX_RETRY_AFTER`]; a success starts
//! over from the first step. And how long every sender keeps trying at shutdown.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The longest `Retry-After` obeyed: a receiver asking for more is retried after this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// At shutdown, how long a sender keeps trying to deliver what it holds (graphite, forward,
/// every HTTP destination); what is left then is counted as `dropped_points.shutdown` (forward
/// keeps it in its spool directory when it has one).
pub const FINAL_DEADLINE: Duration = Duration::from_secs(5);

/// The waits of the HTTP and TCP backends, as Prometheus' own remote write has them (its
/// max_backoff is 5 s): a receiver that comes back is written to within seconds.
pub const SENDER_STEPS: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(5));

/// One sender's waits.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    longest: Duration,
    step: Duration,
    /// xorshift state for the jitter (no cryptographic quality needed).
    noise: u64,
}

impl Backoff {
    /// Waits from `first`, doubling up to `longest`.
    pub fn new((first, longest): (Duration, Duration)) -> Backoff {
        static SENDERS: AtomicU64 = AtomicU64::new(0);
        let clock =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
        let sender = SENDERS.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Backoff { first, longest, step: first, noise: (clock ^ sender) | 1 }
    }

    /// The wait after one more failure: `retry_after` when the receiver said so (capped), else
    /// the current step with jitter; then the step doubles.
    pub fn failed(&mut self, retry_after: Option<Duration>) -> Duration {
        let wait = match retry_after {
            Some(asked) => asked.min(MAX_RETRY_AFTER),
            None => self.jittered(self.step),
        };
        self.step = (self.step * 2).min(self.longest);
        wait
    }

    /// Back to the first step (after a success).
    pub fn reset(&mut self) {
        self.step = self.first;
    }

    /// `step` scaled by a factor in [0.8, 1.2).
    fn jittered(&mut self, step: Duration) -> Duration {
        self.noise ^= self.noise << 13;
        self.noise ^= self.noise >> 7;
        self.noise ^= self.noise << 17;
        let unit = (self.noise >> 11) as f64 / (1u64 << 53) as f64;
        step.mul_f64(0.8 + 0.4 * unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_with_jitter_and_start_over_after_a_success() {
        let ms = Duration::from_millis;
        let mut backoff = Backoff::new((ms(250), ms(5000)));
        let steps = [250, 500, 1000, 2000, 4000, 5000, 5000];
        for step in steps {
            let wait = backoff.failed(None);
            assert!(wait >= ms(step).mul_f64(0.8) && wait < ms(step).mul_f64(1.2), "{wait:?} around {step} ms");
        }
        assert_eq!(backoff.failed(Some(ms(1500))), ms(1500), "the receiver's Retry-After");
        assert_eq!(backoff.failed(Some(Duration::from_secs(3600))), MAX_RETRY_AFTER, "capped");
        backoff.reset();
        let first = backoff.failed(None);
        assert!(first >= ms(200) && first < ms(300), "after a success, the first step again: {first:?}");
    }

    #[test]
    fn jitter_spreads_senders() {
        let waits: Vec<Duration> = (0..50).map(|_| Backoff::new(SENDER_STEPS).failed(None)).collect();
        let distinct: std::collections::BTreeSet<_> = waits.iter().collect();
        assert!(distinct.len() > 10, "{waits:?}");
    }
}
