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
        let slot = self.try_admit();
        if slot.is_none() {
            refused.add(1);
        }
        slot
    }

    /// A slot for a new connection; `None` when all are taken (counted by the caller).
    pub fn try_admit(&self) -> Option<OwnedSemaphorePermit> {
        self.0.clone().try_acquire_owned().ok()
    }
}

impl ConnectionSlots {
    /// A slot freed within `wait` (one a [`Waiters::evict`] just asked to close); `None`
    /// after it, counted in `refused`.
    pub async fn admit_within(&self, wait: Duration, refused: &Counter) -> Option<OwnedSemaphorePermit> {
        let slot = tokio::time::timeout(wait, self.0.clone().acquire_owned()).await.ok().and_then(Result::ok);
        if slot.is_none() {
            refused.add(1);
        }
        slot
    }
}

/// Connections that sat silent between commands, which a new connection may displace when
/// every slot is taken: 16 clients that send one command and stay silent (an idle timeout of
/// minutes) would otherwise lock everyone out that long (issue 48, N14).
#[derive(Debug, Default)]
pub struct Waiters {
    waiting: std::sync::Mutex<std::collections::BTreeMap<u64, (Instant, Arc<tokio::sync::Notify>)>>,
    next_id: std::sync::atomic::AtomicU64,
}

/// One connection's place among the [`Waiters`], while it waits for a line.
#[derive(Debug)]
pub struct Waiting<'a> {
    waiters: &'a Waiters,
    id: u64,
    /// Told when a new connection takes this one's slot.
    pub evicted: Arc<tokio::sync::Notify>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        crate::clock::lock(&self.waiters.waiting).remove(&self.id);
    }
}

impl Waiters {
    /// Notes a connection waiting for its next line, until the result drops.
    pub fn wait(&self) -> Waiting<'_> {
        let evicted = Arc::new(tokio::sync::Notify::new());
        let mut waiting = crate::clock::lock(&self.waiting);
        // Numbered under the lock, so the first entry is the one waiting longest.
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        waiting.insert(id, (Instant::now(), evicted.clone()));
        Waiting { waiters: self, id, evicted }
    }

    /// Asks the connection silent the longest, for `silent` at least, to close; whether one was.
    pub fn evict(&self, silent: Duration) -> bool {
        let mut waiting = crate::clock::lock(&self.waiting);
        match waiting.first_entry() {
            Some(oldest) if oldest.get().0.elapsed() >= silent => {
                oldest.remove().1.notify_one();
                true
            }
            _ => false,
        }
    }
}

/// The connections open from each client address, at most `most` each (0: no cap): one
/// address cannot take every slot of a listener.
#[derive(Debug)]
pub struct AddressSlots {
    most: usize,
    open: Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
}

/// One connection's place in its address's share, given back when it drops.
#[derive(Debug)]
pub struct AddressSlot {
    address: std::net::IpAddr,
    open: Option<Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>>,
}

impl AddressSlots {
    /// At most `most` connections from one address at once (0: no cap).
    pub fn new(most: usize) -> AddressSlots {
        AddressSlots { most, open: Arc::default() }
    }

    /// A place for a new connection from `address`; `None` when its share is open already.
    pub fn admit(&self, address: std::net::IpAddr) -> Option<AddressSlot> {
        if self.most == 0 {
            return Some(AddressSlot { address, open: None });
        }
        let mut open = crate::clock::lock(&self.open);
        let count = open.entry(address).or_default();
        if *count >= self.most {
            return None;
        }
        *count += 1;
        Some(AddressSlot { address, open: Some(self.open.clone()) })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let Some(open) = &self.open else { return };
        let mut open = crate::clock::lock(open);
        if let Some(count) = open.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.address);
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One address holds at most its share; another address is not held back by it; a share
    /// comes back as its connections close; 0 caps nothing.
    #[test]
    fn each_address_holds_at_most_its_share() {
        let (a, b): (std::net::IpAddr, std::net::IpAddr) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        // (the cap, connections from a, then from b, how many of each are admitted)
        let cases = [(2, 3, 1, (2, 1)), (0, 5, 5, (5, 5)), (1, 1, 2, (1, 1))];
        for (most, from_a, from_b, want) in cases {
            let slots = AddressSlots::new(most);
            let held_a: Vec<_> = (0..from_a).filter_map(|_| slots.admit(a)).collect();
            let held_b: Vec<_> = (0..from_b).filter_map(|_| slots.admit(b)).collect();
            assert_eq!((held_a.len(), held_b.len()), want, "cap {most}");
            drop(held_a);
            assert!(slots.admit(a).is_some(), "cap {most}: a's share came back");
            drop(held_b);
            assert!(crate::clock::lock(&slots.open).is_empty(), "cap {most}: nothing left held");
        }
    }
}
