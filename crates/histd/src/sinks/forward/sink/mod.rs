//! The task: each flush is cut into parts (encode.rs) by the nodes up at that moment, queued
//! in the spool (on disk first with `forward.spoolDir`), and sent oldest first, each to the
//! node it was cut for (ring.rs). A health task asks every node's `/health` each
//! `forward.checkInterval`; a node that fails a request or a check is down until a check
//! succeeds, and the spool is sent as soon as one comes back.
//!
//! 5xx, 429 and no answer mark the node down: its batches wait (retried with backoff from
//! 0.25 s to 5 s, or after the node's `Retry-After`), for `forward.redirectAfterMs` at most,
//! then go to the next node, while the other nodes' batches go on. Any other 4xx refuses the
//! batch for good (`dropped_points.rejected`). At stop, what is left after 5 s stays in
//! `forward.spoolDir` for the next start, or without one is counted as
//! `dropped_points.shutdown`. What each answer does to the counters, the log and the next
//! try is the delivery engine's [`Sender`]'s, as for every other destination.
//!
//! Posting to the nodes and their health checks are nodes.rs; producing to a Kafka topic, in
//! transactions, is kafka.rs.

use std::sync::Arc;
use std::time::Duration;

use agg::Snapshot;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::config::ForwardConfig;
use crate::backoff::{FINAL_DEADLINE, SENDER_STEPS};
use crate::clock::unix_now_s;
use crate::http_client::Client;
use crate::sinks::delivery::{Sender, Verdict};
use crate::sinks::{DropReason, Flushes, SinkTelemetry};
use fleet::cut::{cut, CutSettings, Part};
use fleet::ring::Ring;
use fleet::spool::{Dropped, Spool, Waiting};

/// The detail counting spooled batch files set aside as damaged (`forward.corrupt_batches`),
/// whatever their headers still say of the series they held.
pub const CORRUPT_BATCHES: &str = "corrupt_batches";

mod kafka;
mod nodes;

/// Starts one destination's tasks (the backend's one, or one of `forward.paths`), reading
/// `flushes` and counting into `telemetry`; fails when its `spoolDir` cannot be opened.
pub fn spawn(
    config: &ForwardConfig,
    settings: CutSettings,
    telemetry: Arc<SinkTelemetry>,
    flushes: Flushes,
) -> anyhow::Result<JoinHandle<()>> {
    let token = config.token().map_err(|why| anyhow::anyhow!(why))?;
    let tls = config.client_tls().map_err(|why| anyhow::anyhow!(why))?;
    let (spool, dropped) = Spool::open(config.spool_dir.clone(), config.spool_bytes)
        .map_err(|error| anyhow::anyhow!("forward.spoolDir: {error}"))?;
    // Files found damaged at start: never sent, their series (as their headers say) lost, and
    // each counted as a batch (a file whose header does not read says no series at all).
    telemetry.errors.add(dropped.batches);
    telemetry.drop_points(DropReason::Corrupt, dropped.series);
    if dropped.batches > 0 {
        telemetry.add_to_detail(CORRUPT_BATCHES, dropped.batches as f64);
    }
    if !spool.is_empty() {
        tracing::info!(
            batches = spool.len(),
            bytes = spool.bytes(),
            "forward: sending the batches an earlier run left in the spool"
        );
    }
    let settings = Arc::new(settings);
    match &config.kafka {
        Some(producer_settings) => {
            let producing =
                kafka::Producing::new(producer_settings).map_err(|why| anyhow::anyhow!("forward.kafka: {why}"))?;
            Ok(tokio::spawn(kafka::run_on_kafka(spool, settings, telemetry, producing, flushes)))
        }
        None => Ok(nodes::spawn_on_nodes(config, DeliveryParts { spool, settings, telemetry }, (token, tls), flushes)),
    }
}

/// Where batches go.
enum Way {
    /// Posted to the global nodes, each to the node it was cut for.
    Nodes {
        /// One per node, in ring order (taken out while its request is in flight).
        clients: Vec<Option<Client>>,
        /// `forward.redirectAfterMs`.
        redirect_after: Duration,
    },
    /// Produced to a Kafka topic, each to the partition it was cut for.
    Kafka(Box<kafka::Producing>),
}

/// The spool and the way that empties it.
struct Delivery {
    /// The nodes, or the topic's partitions (named by their numbers, all always up).
    ring: Arc<Ring>,
    way: Way,
    /// Always `Some` but while a blocking thread writes to it.
    spool: Option<Spool>,
    settings: Arc<CutSettings>,
    /// The interval start of the last flush cut (each cut's is later: its own identity).
    last_start_ms: u64,
    /// What each answer does to the counters, the log and the next try.
    sender: Sender,
    /// `forward.spoolDir` refused a write since the batches it could not take were sent.
    spool_failing: bool,
    /// At the stop, when trying ends.
    stop_deadline: Option<Instant>,
}

impl Delivery {
    async fn run(mut self, mut snapshots: Flushes, node_came_back: Arc<Notify>) {
        loop {
            let retry_at = self.sender.retry_at();
            tokio::select! {
                snapshot = snapshots.next() => match snapshot {
                    Some(snapshot) => {
                        self.take(snapshot).await;
                        if self.sender.retry_at().is_none() {
                            self.deliver(Some(&mut snapshots)).await;
                        }
                    }
                    None => break,
                },
                _ = tokio::time::sleep_until(retry_at.unwrap_or_else(Instant::now)), if retry_at.is_some() => {
                    self.sender.retrying();
                    self.deliver(Some(&mut snapshots)).await;
                }
                () = node_came_back.notified() => if !self.spool().is_empty() {
                    self.deliver(Some(&mut snapshots)).await;
                }
            }
        }
        self.deliver_before(Instant::now() + FINAL_DEADLINE).await;
        let telemetry = self.sender.telemetry().clone();
        report_left_at_stop(self.spool(), &telemetry);
    }

    fn spool(&mut self) -> &mut Spool {
        self.spool.as_mut().unwrap_or_else(|| unreachable!("the spool is back after every write"))
    }

    /// Cuts a flush and queues its parts, on a blocking thread (encoding and file writes).
    async fn take(&mut self, snapshot: Arc<Snapshot>) {
        let mut spool = self.spool.take().unwrap_or_else(|| unreachable!("the spool is back after every write"));
        let (ring, settings, previous_start_ms) = (self.ring.clone(), self.settings.clone(), self.last_start_ms);
        let queued = tokio::task::spawn_blocking(move || {
            let parts = cut(&snapshot, &settings, &ring, previous_start_ms);
            let start_ms = parts.iter().map(|part| part.interval_start_ms).max();
            let result = queue(&mut spool, &ring, parts);
            (spool, start_ms, result)
        })
        .await;
        let Ok((spool, start_ms, result)) = queued else {
            unreachable!("cutting a flush does not panic");
        };
        self.spool = Some(spool);
        // A late interval's start is earlier: the next cut still starts after the last one.
        self.last_start_ms = start_ms.unwrap_or(self.last_start_ms).max(self.last_start_ms);
        match result {
            Ok(dropped) => self.count_dropped(dropped),
            Err(error) => {
                self.sender.telemetry().failed(unix_now_s());
                tracing::error!(%error, "forward: cannot queue this flush: lost (forward.errors)");
            }
        }
        self.note_write_failure();
        let bytes = self.spool().bytes();
        self.sender.telemetry().buffered_bytes.set(bytes);
    }

    /// A batch `forward.spoolDir` could not take is held in memory and sent as the others:
    /// counted in `errors`, logged once per run of failures.
    fn note_write_failure(&mut self) {
        match self.spool().take_write_failure() {
            Some(error) => {
                self.sender.telemetry().errors.add(1);
                if !self.spool_failing {
                    self.spool_failing = true;
                    tracing::error!(%error, "forward: cannot write to forward.spoolDir: batches are held in memory and sent from there until it can (they do not survive a restart)");
                }
            }
            None if self.spool_failing && self.spool().held_in_memory().0 == 0 => {
                self.spool_failing = false;
                tracing::info!("forward: forward.spoolDir takes batches again");
            }
            None => {}
        }
    }

    fn count_dropped(&self, dropped: Dropped) {
        if dropped.batches > 0 {
            self.sender.telemetry().drop_points(DropReason::BufferFull, dropped.series);
            tracing::warn!(batches = dropped.batches, series = dropped.series, "forward: spool full (forward.spoolBytes): the oldest batches were dropped (dropped_points.buffer_full)");
        }
    }

    /// Sends what waits, oldest first, the way the backend is set up; `flushes` (when given)
    /// are taken into the spool while an answer or the brokers' acknowledgements are awaited,
    /// so a flush that comes meanwhile is on disk, not in the queue, should the process die.
    async fn deliver(&mut self, flushes: Option<&mut Flushes>) {
        let pass = match &self.way {
            Way::Nodes { .. } => self.deliver_to_nodes(flushes).await,
            Way::Kafka(_) => self.deliver_to_kafka(flushes).await,
        };
        match pass {
            Pass::Done => self.sender.caught_up(),
            Pass::Left { asked } => self.sender.wait(asked),
        }
    }

    /// Awaits `work` (which must not hold the delivery) while the flushes that come meanwhile
    /// are cut and spooled, so they are on disk, not in the queue, should the process die.
    /// `flushes` becomes `None` at the stop (the run's loop sees it next).
    async fn taking_flushes_while<T>(
        &mut self,
        work: impl std::future::Future<Output = T>,
        flushes: &mut Option<&mut Flushes>,
    ) -> T {
        let mut work = std::pin::pin!(work);
        loop {
            let Some(queue) = flushes.as_deref_mut() else { return work.await };
            tokio::select! {
                done = &mut work => return done,
                snapshot = queue.next() => match snapshot {
                    Some(snapshot) => self.take(snapshot).await,
                    None => *flushes = None,
                },
            }
        }
    }

    /// A spooled batch's body; `None` (counted, logged) when it cannot be read or is damaged.
    fn body(&mut self, batch: &Waiting) -> Option<bytes::Bytes> {
        match self.spool().body(batch) {
            Ok(body) => Some(body),
            Err(error) if error.kind() == std::io::ErrorKind::InvalidData => {
                tracing::error!(%error, sequence = batch.sequence, series = batch.series, "forward: a spooled batch was damaged on disk: set aside as .corrupt, not sent (dropped_points.corrupt)");
                self.sender.telemetry().errors.add(1);
                self.sender.telemetry().drop_points(DropReason::Corrupt, batch.series);
                self.sender.telemetry().add_to_detail(CORRUPT_BATCHES, 1.0);
                self.spool().set_aside(batch.sequence);
                None
            }
            Err(error) => {
                tracing::error!(%error, "forward: a spooled batch cannot be read: dropped (dropped_points.rejected)");
                self.sender.telemetry().drop_points(DropReason::Rejected, batch.series);
                self.remove(batch.sequence);
                None
            }
        }
    }

    /// Counts what became of `batch` (its series as points) and removes it from the spool
    /// unless it waits for a retry; true when it is gone.
    fn settle(&mut self, batch: &Waiting, verdict: &Verdict) -> bool {
        self.spool().set_sending(batch.sequence, false);
        let gone = self.sender.record(verdict, batch.series, batch.bytes);
        if gone {
            self.remove(batch.sequence);
        }
        gone
    }

    /// The ring index of the node a part was cut for; a node no longer configured hands its
    /// parts to the node that owns its name.
    fn node_of(&self, part: &str) -> usize {
        let nodes = self.ring.nodes();
        nodes.iter().position(|node| node.name == part).unwrap_or_else(|| self.ring.owner(part.as_bytes()))
    }

    fn remove(&mut self, sequence: u64) {
        if let Err(error) = self.spool().remove(sequence) {
            tracing::error!(%error, "forward: cannot remove a sent batch from forward.spoolDir (it will be sent again and merged once)");
        }
        let bytes = self.spool().bytes();
        self.sender.telemetry().buffered_bytes.set(bytes);
    }

    async fn deliver_before(&mut self, deadline: Instant) {
        self.stop_deadline = Some(deadline);
        while !self.spool().is_empty() && Instant::now() < deadline {
            self.deliver(None).await;
            if let Some(retry_at) = self.sender.retry_at() {
                tokio::time::sleep_until(retry_at.min(deadline)).await;
            }
        }
    }
}

/// At the stop: what no destination took waits in `forward.spoolDir` for the next start, or
/// without one (and for what the directory could not take) is lost, counted.
fn report_left_at_stop(spool: &mut Spool, telemetry: &SinkTelemetry) {
    if spool.is_empty() {
        return;
    }
    let (batches, bytes, on_disk) = (spool.len(), spool.bytes(), spool.on_disk());
    if on_disk {
        let (in_memory, series) = spool.held_in_memory();
        if in_memory > 0 {
            telemetry.drop_points(DropReason::Shutdown, series);
            tracing::error!(batches = in_memory, series, "forward: batches forward.spoolDir could not take were still in memory at the stop: lost (dropped_points.shutdown)");
        }
        tracing::warn!(
            batches = batches as u64 - in_memory,
            bytes,
            "forward: no node took these batches before the stop: they wait in forward.spoolDir for the next start"
        );
        return;
    }
    let mut series = 0;
    while let Ok(Some(batch)) = spool.pop_front() {
        series += batch.series;
    }
    telemetry.drop_points(DropReason::Shutdown, series);
    tracing::error!(batches, series, "forward: no node took these batches before the stop and there is no forward.spoolDir: lost (dropped_points.shutdown)");
}

/// What a delivery starts with before its destinations are known.
struct DeliveryParts {
    spool: Spool,
    settings: Arc<CutSettings>,
    telemetry: Arc<SinkTelemetry>,
}

impl DeliveryParts {
    /// The delivery to `ring`'s nodes or partitions, the `way` they are reached.
    fn deliver(self, ring: Arc<Ring>, way: Way) -> Delivery {
        let name = match way {
            Way::Nodes { .. } => self.telemetry.sink.to_string(),
            Way::Kafka(_) => format!("{} (kafka)", self.telemetry.sink),
        };
        Delivery {
            ring,
            way,
            spool: Some(self.spool),
            settings: self.settings,
            sender: Sender::new(name, SENDER_STEPS, self.telemetry),
            last_start_ms: 0,
            spool_failing: false,
            stop_deadline: None,
        }
    }
}

/// What a pass over the spool left.
enum Pass {
    /// Nothing to try again.
    Done,
    /// Batches to try again: after the longest `Retry-After` a node asked for, or the backoff.
    Left { asked: Option<Duration> },
}

impl Pass {
    /// Some batch is left, to be tried again after `asked` (when its receiver said so).
    fn left(&mut self, asked: Option<Duration>) {
        let longest = match self {
            Pass::Done => asked,
            Pass::Left { asked: before } => (*before).max(asked),
        };
        *self = Pass::Left { asked: longest };
    }
}

/// Queues a flush's parts, each under the name of the node it was cut for.
fn queue(spool: &mut Spool, ring: &Ring, parts: Vec<Part>) -> std::io::Result<Dropped> {
    let mut dropped = Dropped::default();
    for part in parts {
        let more = spool.push(&ring.nodes()[part.node].name, part.series, part.body)?;
        dropped.batches += more.batches;
        dropped.series += more.series;
    }
    Ok(dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_waits_as_long_as_the_longest_retry_after_asked() {
        let s = Duration::from_secs;
        /// (what each batch left asked, the pass's wait: `None` when nothing was left)
        type Case = (Vec<Option<Duration>>, Option<Option<Duration>>);
        let cases: [Case; 4] = [
            (vec![], None),
            (vec![None], Some(None)),
            (vec![Some(s(1)), None], Some(Some(s(1)))),
            (vec![Some(s(1)), Some(s(3)), Some(s(2))], Some(Some(s(3)))),
        ];
        for (asks, want) in cases {
            let mut pass = Pass::Done;
            asks.iter().for_each(|asked| pass.left(*asked));
            let got = match pass {
                Pass::Done => None,
                Pass::Left { asked } => Some(asked),
            };
            assert_eq!(got, want, "{asks:?}");
        }
    }
}
