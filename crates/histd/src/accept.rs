//! What an accept loop does when `accept` fails: at the descriptor limit (`EMFILE`, `ENFILE`)
//! the pending connection stays queued and every retry fails at once, so a loop that retries
//! immediately burns a core and logs without end. It backs off instead, and warns once per
//! interval with the number of failures since the last warning. Also what every listener
//! bounds: how many connections it serves at once ([`ConnectionSlots`]) and how long one may
//! stay silent ([`within_idle`]).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::telemetry::Counter;

/// How long to wait before accepting again after a failure.
const BACKOFF: Duration = Duration::from_millis(100);
/// At most one warning per listener in this long.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Accept failures of one listener, for rate-limited warnings.
#[derive(Debug, Default)]
pub struct AcceptFailures {
    last_warned: Option<Instant>,
    since_warning: u64,
}

impl AcceptFailures {
    /// Records `error` on the listener called `listener`, warns if due, and waits before the
    /// next accept.
    pub async fn failed(&mut self, listener: &str, error: &std::io::Error) {
        self.since_warning += 1;
        let due = match self.last_warned {
            None => true,
            Some(at) => at.elapsed() >= WARN_EVERY,
        };
        if due {
            let failures = std::mem::take(&mut self.since_warning);
            tracing::warn!(%error, listener, failures, "accept failed (at the file descriptor limit?); backing off");
            self.last_warned = Some(Instant::now());
        }
        tokio::time::sleep(BACKOFF).await;
    }
}

/// The connections a listener (or several sharing it) serves at once.
#[derive(Debug, Clone)]
pub struct ConnectionSlots(Arc<Semaphore>);

impl ConnectionSlots {
    /// Room for `connections` at once.
    pub fn new(connections: usize) -> Self {
        ConnectionSlots(Arc::new(Semaphore::new(connections)))
    }

    /// A slot for a new connection, held until the permit drops; `None` when all are taken
    /// (counted in `refused`: the caller closes the connection).
    pub fn admit(&self, refused: &Counter) -> Option<OwnedSemaphorePermit> {
        let slot = self.0.clone().try_acquire_owned().ok();
        if slot.is_none() {
            refused.add(1);
        }
        slot
    }
}

/// `read`, or a `TimedOut` error once `idle` passes first (`None`: no limit).
pub async fn within_idle<T>(
    idle: Option<Duration>,
    read: impl Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    let Some(idle) = idle else { return read.await };
    match tokio::time::timeout(idle, read).await {
        Ok(result) => result,
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "idle")),
    }
}
