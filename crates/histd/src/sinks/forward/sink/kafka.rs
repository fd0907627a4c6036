//! Producing to a Kafka topic: each batch to the partition it was cut for, once the brokers
//! told the topic's partition count (or an earlier run remembered it).
//!
//! With transactions (`forward.kafka.transactions`, on with `acks: 'all'`), the batches of one
//! send are produced in one transaction and leave the spool once it commits. A transaction is
//! aborted when the brokers did not acknowledge every batch in it, and its batches go again in
//! the next; the globals read committed batches only, so a copy the brokers took without the
//! local hearing of it (a leader that died before acknowledging, a local killed mid-send, whose
//! next start fences this run's producer and aborts what it left open) is never merged. A
//! commit not answered in time is asked about again before anything else is sent.

use std::sync::Arc;
use std::time::Duration;

use agg::Snapshot;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{report_left_at_stop, Delivery, DeliveryParts, Pass, Way};
use crate::backoff::{Backoff, SENDER_STEPS};
use crate::clock::unix_now_s;
use crate::sinks::delivery::Verdict;
use crate::sinks::{DropReason, Flushes, SinkTelemetry};
use fleet::cut::CutSettings;
use fleet::kafka::{Producer, ProducerSettings, Refused, TransactionFailed};
use fleet::ring::{Node, Ring};
use fleet::spool::{Spool, Waiting};

/// Batches produced to Kafka at once before their acknowledgements are awaited.
const KAFKA_IN_FLIGHT: usize = 64;

/// Asks the brokers for the topic's partition count (flushes meanwhile wait, bounded by
/// `forward.spoolBytes`), then runs a delivery that cuts by the partitions.
pub(super) async fn run_on_kafka(
    mut spool: Spool,
    settings: Arc<CutSettings>,
    telemetry: Arc<SinkTelemetry>,
    producing: Producing,
    mut flushes: Flushes,
) {
    let producer = producing.producer.clone();
    let mut held = HeldFlushes::default();
    let dir = spool.dir().map(std::path::Path::to_path_buf);
    let remembered = dir.as_deref().and_then(remembered_partitions);
    let check = remembered.map(|count| tokio::spawn(check_partitions(producer.clone(), count, dir.clone())));
    let partitions = match remembered {
        Some(count) => count,
        None => {
            let waiting = (spool.limit(), spool.bytes());
            let Some(count) = partitions(&producer, &mut flushes, &mut held, &telemetry, waiting).await else {
                held.lost_at_stop(&telemetry);
                report_left_at_stop(&mut spool, &telemetry);
                return;
            };
            if let Some(dir) = &dir {
                remember_partitions(dir, count);
            }
            count
        }
    };
    tracing::info!(partitions, remembered = remembered.is_some(), "forward: producing to Kafka");
    let ring = Arc::new(Ring::new((0..partitions).map(|p| Node::new(p.to_string())).collect()));
    let mut delivery = DeliveryParts { spool, settings, telemetry }.deliver(ring, Way::Kafka(Box::new(producing)));
    for snapshot in held.snapshots.drain(..) {
        delivery.take(snapshot).await;
    }
    delivery.deliver(Some(&mut flushes)).await;
    delivery.run(flushes, Arc::new(Notify::new())).await;
    if let Some(check) = check {
        check.abort();
    }
}

/// The file in `forward.spoolDir` that remembers the topic's partition count.
const PARTITIONS_FILE: &str = "kafka-partitions";

/// The partition count an earlier run learnt, kept in `dir`: a local restarted while the
/// brokers cannot be reached cuts its flushes by it and spools them to disk at once, instead
/// of holding them in memory until the brokers answer (where a crash would lose them).
fn remembered_partitions(dir: &std::path::Path) -> Option<usize> {
    let text = std::fs::read_to_string(dir.join(PARTITIONS_FILE)).ok()?;
    text.trim().parse().ok().filter(|&count: &usize| count > 0)
}

/// Keeps `count` in `dir` (written whole, then renamed); a failure is only logged: the next
/// start asks the brokers again.
fn remember_partitions(dir: &std::path::Path, count: usize) {
    let temporary = dir.join(format!("{PARTITIONS_FILE}.tmp"));
    let written = std::fs::write(&temporary, format!("{count}\n"))
        .and_then(|()| std::fs::rename(&temporary, dir.join(PARTITIONS_FILE)));
    if let Err(error) = written {
        tracing::warn!(%error, "forward: cannot keep the Kafka topic's partition count in forward.spoolDir");
    }
}

/// Once the brokers answer, compares their partition count with the one remembered: a topic
/// given partitions while this local was down is cut by the new count from the next start
/// (as partitions added while it runs are), and said so.
async fn check_partitions(producer: Producer, remembered: usize, dir: Option<std::path::PathBuf>) {
    let mut backoff = Backoff::new(SENDER_STEPS);
    loop {
        match producer.partitions().await {
            Ok(count) if count == remembered => return,
            Ok(count) => {
                tracing::warn!(remembered, count, "forward: the Kafka topic's partition count changed: this run cuts by the one remembered, the next start by the new one");
                if let Some(dir) = &dir {
                    remember_partitions(dir, count);
                }
                return;
            }
            Err(_) => tokio::time::sleep(backoff.failed(None)).await,
        }
    }
}

/// The topic's partition count once the brokers tell it; `None` when the backend stops
/// first. Flushes that come meanwhile are held within `limit` bytes, and shown in
/// `buffered_bytes` with the `spooled` bytes an earlier run left.
async fn partitions(
    producer: &Producer,
    flushes: &mut Flushes,
    held: &mut HeldFlushes,
    telemetry: &SinkTelemetry,
    (limit, spooled): (u64, u64),
) -> Option<usize> {
    let mut backoff = Backoff::new(SENDER_STEPS);
    let mut asking = Box::pin(producer.partitions());
    let mut retry_at: Option<Instant> = None;
    let mut logged = false;
    loop {
        tokio::select! {
            answer = &mut asking, if retry_at.is_none() => match answer {
                Ok(count) => return Some(count),
                Err(reason) => {
                    telemetry.failed(unix_now_s());
                    if !logged {
                        logged = true;
                        tracing::warn!(%reason, "forward: cannot learn the Kafka topic's partitions yet: flushes wait (forward.spoolBytes) and it is asked again");
                    }
                    retry_at = Some(Instant::now() + backoff.failed(None));
                }
            },
            _ = tokio::time::sleep_until(retry_at.unwrap_or_else(Instant::now)), if retry_at.is_some() => {
                retry_at = None;
                asking = Box::pin(producer.partitions());
            }
            snapshot = flushes.next() => match snapshot {
                Some(snapshot) => {
                    held.hold(snapshot, limit, telemetry);
                    telemetry.buffered_bytes.set(spooled + held.bytes);
                }
                None => return None,
            },
        }
    }
}

/// Flushes that came before the topic's partitions were known, bounded in bytes.
#[derive(Default)]
struct HeldFlushes {
    snapshots: std::collections::VecDeque<Arc<Snapshot>>,
    bytes: u64,
}

/// The series a flush holds (what forward counts its points in).
fn series_in(snapshot: &Snapshot) -> u64 {
    (snapshot.counters.len() + snapshot.timers.len() + snapshot.gauges.len() + snapshot.sets.len()) as u64
}

impl HeldFlushes {
    /// Holds `snapshot`; past `limit` bytes the oldest go, counted.
    fn hold(&mut self, snapshot: Arc<Snapshot>, limit: u64, telemetry: &SinkTelemetry) {
        self.bytes += snapshot.queue_bytes;
        self.snapshots.push_back(snapshot);
        while self.bytes > limit && self.snapshots.len() > 1 {
            let Some(oldest) = self.snapshots.pop_front() else { break };
            self.bytes -= oldest.queue_bytes;
            telemetry.drop_points(DropReason::BufferFull, series_in(&oldest));
            tracing::warn!(
                "forward: a flush waiting for the Kafka topic's partitions was dropped (dropped_points.buffer_full)"
            );
        }
    }

    /// The stop came first: what is held is lost, counted.
    fn lost_at_stop(&self, telemetry: &SinkTelemetry) {
        let series: u64 = self.snapshots.iter().map(|snapshot| series_in(snapshot)).sum();
        if series > 0 {
            telemetry.drop_points(DropReason::Shutdown, series);
            tracing::error!(series, "forward: the Kafka topic's partitions were never learnt: flushes lost at the stop (dropped_points.shutdown)");
        }
    }
}

impl Delivery {
    /// Produces what waits, oldest first, each batch to the partition it was cut for, up to
    /// [`KAFKA_IN_FLIGHT`] at once (in one transaction, with transactions), then waits for the
    /// brokers' acknowledgements; a batch they did not take stays, in order.
    pub(super) async fn deliver_to_kafka(&mut self, mut flushes: Option<&mut Flushes>) -> Pass {
        let timeout = self.producing().settings.delivery_timeout;
        let wait_until = self.stop_deadline.unwrap_or_else(|| Instant::now() + timeout + Duration::from_secs(5));
        let transactional = self.producing().producer.transactional();
        if transactional && !self.settle_uncommitted(&mut flushes, wait_until).await {
            return Pass::Left { asked: None };
        }
        let waiting: Vec<Waiting> = self.spool().oldest(KAFKA_IN_FLIGHT);
        if waiting.is_empty() {
            return Pass::Done;
        }
        if transactional && !self.open_transaction(&mut flushes, wait_until).await {
            return Pass::Left { asked: None };
        }
        let mut answered = self.produce(waiting, &mut flushes, wait_until).await;
        if transactional {
            answered = self.end_transaction(answered, &mut flushes, wait_until).await;
        }
        let mut pass = Pass::Done;
        for (batch, verdict) in &answered {
            if !self.settle(batch, verdict) {
                pass.left(None);
            }
        }
        // A commit not answered yet: its batches are still in flight (never dropped for room).
        let unknown: Vec<u64> = self.producing().uncommitted.iter().map(|batch| batch.sequence).collect();
        unknown.into_iter().for_each(|sequence| self.spool().set_sending(sequence, true));
        pass
    }

    /// Produces `waiting` and awaits the brokers' acknowledgements: what became of each batch
    /// (none settled yet).
    async fn produce(
        &mut self,
        waiting: Vec<Waiting>,
        flushes: &mut Option<&mut Flushes>,
        wait_until: Instant,
    ) -> Vec<(Waiting, Verdict)> {
        let mut produced = Vec::new();
        let mut answered = Vec::new();
        for batch in waiting {
            let partition = self.node_of(&batch.part);
            let Some(body) = self.body(&batch) else { continue };
            self.spool().set_sending(batch.sequence, true);
            match self.producing().producer.produce(partition, &batch.part, &body) {
                Ok(acknowledged) => produced.push((batch, acknowledged)),
                Err(reason) => {
                    answered.push((batch, Verdict::retry(reason)));
                    break;
                }
            }
        }
        let mut acknowledgements = Vec::new();
        for (batch, acknowledged) in produced {
            let acknowledged = tokio::time::timeout_at(wait_until, acknowledged);
            let verdict = match self.taking_flushes_while(acknowledged, flushes).await {
                Ok(Ok(())) => Verdict::DELIVERED,
                Ok(Err(Refused::ForGood(reason))) => Verdict::Rejected(reason),
                Ok(Err(Refused::Retry(reason))) => Verdict::retry(reason),
                Err(_) => Verdict::retry("no acknowledgement from the brokers in time"),
            };
            acknowledgements.push((batch, verdict));
        }
        acknowledgements.extend(answered);
        acknowledgements
    }

    /// The Kafka way's producer and its transactions.
    fn producing(&mut self) -> &mut Producing {
        let Way::Kafka(producing) = &mut self.way else { unreachable!("producing to Kafka") };
        producing
    }

    /// Opens this send's transaction, readying the producer's transactions first (once per
    /// producer: the brokers fence the run before and abort what it left open). False (counted,
    /// logged once per run of failures) when it cannot: the batches wait for the retry.
    async fn open_transaction(&mut self, flushes: &mut Option<&mut Flushes>, wait_until: Instant) -> bool {
        if !self.producing().ready {
            let producer = self.producing().producer.clone();
            let timeout = remaining(wait_until);
            let readied = self.taking_flushes_while(async move { producer.init_transactions(timeout).await }, flushes);
            if let Err(failed) = readied.await {
                self.transaction_failed(&failed);
                if matches!(failed, TransactionFailed::Fatal(_)) {
                    self.renew_producer();
                }
                return false;
            }
            self.producing().ready = true;
        }
        if let Err(failed) = self.producing().producer.begin() {
            // A transaction this producer thinks open, or a fatal state: a new producer starts
            // clean (its start aborts whatever this one left).
            self.transaction_failed(&failed);
            self.renew_producer();
            return false;
        }
        true
    }

    /// Ends the open transaction: committed when the brokers acknowledged every batch in it
    /// (they are then delivered), else aborted (those acknowledged go again, with it). A commit
    /// not answered by `wait_until` leaves its batches in `uncommitted` (waiting, to be asked
    /// about first).
    async fn end_transaction(
        &mut self,
        mut answered: Vec<(Waiting, Verdict)>,
        flushes: &mut Option<&mut Flushes>,
        wait_until: Instant,
    ) -> Vec<(Waiting, Verdict)> {
        let taken = |verdict: &Verdict| matches!(verdict, Verdict::Delivered { .. });
        let failed = if answered.iter().all(|(_, verdict)| taken(verdict)) {
            let producer = self.producing().producer.clone();
            let timeout = remaining(wait_until);
            match self.taking_flushes_while(async move { producer.commit(timeout).await }, flushes).await {
                Ok(()) => return answered,
                Err(TransactionFailed::Retry(reason)) => {
                    self.producing().uncommitted = answered.iter().map(|(batch, _)| batch.clone()).collect();
                    let unknown = format!("the transaction's commit is not answered yet: {reason}");
                    return answered.into_iter().map(|(batch, _)| (batch, Verdict::retry(unknown.clone()))).collect();
                }
                Err(failed) => failed,
            }
        } else {
            TransactionFailed::Abort("the brokers did not take every batch of the transaction".into())
        };
        let aborted = format!("its transaction was aborted: {}", failed.reason());
        self.abort_or_renew(failed, flushes, wait_until).await;
        for (_, verdict) in &mut answered {
            if taken(verdict) {
                *verdict = Verdict::retry(aborted.clone());
            }
        }
        answered
    }

    /// Asks again about a commit that was not answered; true once nothing is left unknown (its
    /// batches settled: delivered when it committed, waiting to go again when aborted).
    async fn settle_uncommitted(&mut self, flushes: &mut Option<&mut Flushes>, wait_until: Instant) -> bool {
        let batches = std::mem::take(&mut self.producing().uncommitted);
        if batches.is_empty() {
            return true;
        }
        let answered = batches.into_iter().map(|batch| (batch, Verdict::DELIVERED)).collect();
        for (batch, verdict) in self.end_transaction(answered, flushes, wait_until).await {
            self.settle(&batch, &verdict);
        }
        self.producing().uncommitted.is_empty()
    }

    /// Aborts the failed transaction, or when it cannot be (a fatal error, an abort that
    /// failed), makes a new producer, whose start aborts it.
    async fn abort_or_renew(
        &mut self,
        failed: TransactionFailed,
        flushes: &mut Option<&mut Flushes>,
        wait_until: Instant,
    ) {
        if !matches!(failed, TransactionFailed::Fatal(_)) {
            let producer = self.producing().producer.clone();
            let timeout = remaining(wait_until);
            match self.taking_flushes_while(async move { producer.abort(timeout).await }, flushes).await {
                Ok(()) => {
                    self.sender.telemetry().add_to_detail("transactions_aborted", 1.0);
                    return;
                }
                Err(failed) => self.transaction_failed(&failed),
            }
        } else {
            self.transaction_failed(&failed);
        }
        self.renew_producer();
    }

    /// A transactional step failed: counted in `errors`, logged once per run of failures. A
    /// producer fenced by another with its transactional id is named at once: two locals
    /// sharing a source (or a `transactionalId`) fence each other at every flush.
    fn transaction_failed(&mut self, failed: &TransactionFailed) {
        let fenced = failed.reason().to_ascii_lowercase().contains("fenced");
        let first = fenced && !std::mem::replace(&mut self.producing().fenced_told, true);
        if let (TransactionFailed::Fatal(reason), true) = (failed, first) {
            let id = self.producing().settings.transactional_id.clone().unwrap_or_default();
            tracing::warn!(transactional_id = %id, reason, "forward.kafka: another producer with this local's transactional id fenced it: two locals share it (give each its own forward.source, or forward.kafka.transactionalId); its batches wait and go again (logged once; counted in errors)");
        }
        let reason = format!("Kafka transaction: {}", failed.reason());
        self.sender.record(&Verdict::retry(reason), 0, 0);
    }

    /// Replaces the producer by a new one (its transactions readied at the next send). The old
    /// one is let go of on a blocking thread: librdkafka's teardown may wait on the brokers.
    fn renew_producer(&mut self) {
        let producing = self.producing();
        match Producer::new(&producing.settings) {
            Ok(producer) => {
                let old = std::mem::replace(&mut producing.producer, producer);
                producing.ready = false;
                producing.uncommitted.clear();
                tokio::task::spawn_blocking(move || drop(old));
                tracing::warn!("forward: a new Kafka producer replaces one whose transaction failed (what it left open is aborted when the new one starts)");
            }
            Err(reason) => {
                tracing::error!(%reason, "forward: cannot make a new Kafka producer; the old one is tried again")
            }
        }
    }
}

/// The Kafka way's producer, and where its transactions stand.
pub(super) struct Producing {
    producer: Producer,
    /// `forward.kafka`, for a new producer after a fatal error.
    settings: ProducerSettings,
    /// Whether this producer's transactions are readied (`init_transactions` answered).
    ready: bool,
    /// The batches of a transaction whose commit was not answered (asked about first).
    uncommitted: Vec<Waiting>,
    /// Another producer's fencing of this local was logged (once a run).
    fenced_told: bool,
}

impl Producing {
    /// A producer with `settings`, its transactions not readied yet.
    pub(super) fn new(settings: &ProducerSettings) -> Result<Producing, String> {
        Ok(Producing {
            producer: Producer::new(settings)?,
            settings: settings.clone(),
            ready: false,
            uncommitted: Vec::new(),
            fenced_told: false,
        })
    }
}

/// The time left until `deadline`, at least a second (a step given no time fails at once).
fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now()).max(Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_partition_count_is_remembered_and_anything_else_is_not() {
        let dir = std::env::temp_dir().join(format!("histd-partitions-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(remembered_partitions(&dir), None, "nothing kept yet");
        remember_partitions(&dir, 12);
        assert_eq!(remembered_partitions(&dir), Some(12));
        for text in ["0\n", "x\n", "", "-3"] {
            std::fs::write(dir.join(PARTITIONS_FILE), text).unwrap();
            assert_eq!(remembered_partitions(&dir), None, "{text:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
