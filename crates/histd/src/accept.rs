//! What an accept loop does when `accept` fails: at the descriptor limit (`EMFILE`, `ENFILE`)
//! the pending connection stays queued and every retry fails at once, so a loop that retries
//! immediately burns a core and logs without end. It backs off instead, and warns once per
//! interval with the number of failures since the last warning.

use std::time::{Duration, Instant};

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
