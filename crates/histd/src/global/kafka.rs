//! A global as a member of a Kafka consumer group (`global.kafka`): the partitions the group
//! assigns it are the series it owns (locals cut every flush by partition, see
//! `sinks/forward/kafka.rs`), and each message is a forwarded batch, merged as one posted to
//! `/api/v1/forward` is (checked, screened, its identity merged once).
//!
//! Kafka is the journal: an offset is committed only once the flush that carried its batch
//! was taken (`Global::carried`), so a global killed at any moment loses nothing: the group
//! gives its partitions to another member, which reads again from the last commit, and the
//! killed one never flushed what it had merged since. When the group takes partitions away
//! from a live member (another joins, or leaves), the member commits what it has read of them
//! before it lets go: that is in its current interval and it flushes it; the next owner
//! starts after it. A duplicate (a batch a local produced twice) is merged once by the member
//! that reads both.
//!
//! What it may count twice: batches between a flush and the commit that follows it (that
//! commit is asynchronous, milliseconds) when the global is killed in that moment; and the
//! two copies of a batch its local produced twice (a leader died before acknowledging it,
//! past `forward.kafka.deliveryTimeoutMs`) when two members read one each.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::{Message, Offset, TopicPartitionList};
use tokio::task::JoinHandle;

use super::Global;
use crate::aggregation::Receipt;
use crate::clock::lock;
use crate::sinks::backoff::{Backoff, SENDER_STEPS};
use crate::sinks::forward::kafka::ConsumerSettings;

/// The credential batches read from Kafka are remembered under (their identities are bound
/// to it as a posted batch's are to its token's name).
pub const CREDENTIAL: &str = "kafka";

/// What this member holds of the topic.
#[derive(Debug, Default)]
struct Offsets {
    /// Bumped when partitions are taken away: receipts read before were committed then.
    generation: u64,
    /// The partitions assigned now.
    assigned: HashSet<i32>,
    /// The last offset read of each assigned partition.
    read: HashMap<i32, i64>,
    /// The highest offset this member ever took of each partition, kept across rebalances: a
    /// message at or below it (fetched before a revocation and handed over after the same
    /// partition came back) was merged already, and committed with what it was merged in.
    taken: HashMap<i32, i64>,
}

/// The consumer's context: librdkafka's log at debug level, and the rebalance rule above.
struct Membership {
    topic: String,
    offsets: Arc<Mutex<Offsets>>,
}

impl rdkafka::ClientContext for Membership {
    fn log(&self, _level: rdkafka::config::RDKafkaLogLevel, facility: &str, message: &str) {
        tracing::debug!(facility, message, "librdkafka");
    }

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        tracing::debug!(%error, reason, "librdkafka");
    }
}

impl ConsumerContext for Membership {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(revoked) = rebalance else { return };
        let mut offsets = lock(&self.offsets);
        let mut list = TopicPartitionList::new();
        for element in revoked.elements() {
            let partition = element.partition();
            if let Some(offset) = offsets.read.remove(&partition) {
                let _ = list.add_partition_offset(&self.topic, partition, Offset::Offset(offset + 1));
            }
            offsets.assigned.remove(&partition);
        }
        offsets.generation += 1;
        if list.count() > 0 {
            match consumer.commit(&list, CommitMode::Sync) {
                Ok(()) => tracing::info!(
                    partitions = list.count(),
                    "global.kafka: partitions taken away: what was read of them is committed (this global flushes it)"
                ),
                Err(error) => {
                    tracing::warn!(%error, "global.kafka: partitions taken away: committing what was read of them failed (the next owner reads it again)")
                }
            }
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(assigned) = rebalance {
            let partitions: Vec<i32> = assigned.elements().iter().map(|element| element.partition()).collect();
            tracing::info!(?partitions, "global.kafka: partitions assigned");
            lock(&self.offsets).assigned.extend(partitions);
        }
    }
}

/// Commits the offsets of what a flush carried.
pub struct Committer {
    consumer: Arc<StreamConsumer<Membership>>,
    offsets: Arc<Mutex<Offsets>>,
    topic: String,
}

impl std::fmt::Debug for Committer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Committer").field("topic", &self.topic).finish()
    }
}

impl Committer {
    /// Commits, per partition still assigned under the current generation, the offset after
    /// the last message `receipts` name (asynchronously: the flusher never waits).
    pub fn commit(&self, receipts: &[Receipt]) {
        let offsets = lock(&self.offsets);
        let mut last: HashMap<i32, i64> = HashMap::new();
        for receipt in receipts {
            if let Receipt::Log { partition, offset, generation } = *receipt {
                if generation == offsets.generation && offsets.assigned.contains(&partition) {
                    let entry = last.entry(partition).or_insert(offset);
                    *entry = (*entry).max(offset);
                }
            }
        }
        if last.is_empty() {
            return;
        }
        let mut list = TopicPartitionList::new();
        for (partition, offset) in last {
            let _ = list.add_partition_offset(&self.topic, partition, Offset::Offset(offset + 1));
        }
        // Still under the lock the rebalance takes: a revocation comes wholly before (these
        // offsets are then below what it commits) or after (their generation is then past).
        if let Err(error) = self.consumer.commit(&list, CommitMode::Async) {
            tracing::warn!(%error, "global.kafka: committing offsets failed (their batches may be read again by the next owner)");
        }
        drop(offsets);
    }
}

impl Committer {
    /// At the stop, once reading has stopped and the final flush was taken: commits every
    /// offset read (all flushed now) and leaves the group, so the others take the partitions
    /// at once.
    pub fn leave(self) {
        let offsets = lock(&self.offsets);
        let mut list = TopicPartitionList::new();
        for (partition, offset) in &offsets.read {
            let _ = list.add_partition_offset(&self.topic, *partition, Offset::Offset(offset + 1));
        }
        drop(offsets);
        if list.count() > 0 {
            if let Err(error) = self.consumer.commit(&list, CommitMode::Sync) {
                tracing::warn!(%error, "global.kafka: the last commit failed (the next owner reads the last flush's batches again)");
            }
        }
        self.consumer.unsubscribe();
    }
}

/// Joins the consumer group of `global.kafka` and merges what it reads into `global`; `None`
/// without `global.kafka`.
pub fn start(global: Arc<Global>) -> anyhow::Result<Option<JoinHandle<()>>> {
    let Some(settings) = global.config().kafka.clone() else { return Ok(None) };
    let consumer = Arc::new(consumer(&settings).map_err(|why| anyhow::anyhow!("global.kafka: {why}"))?);
    let offsets = consumer.context().offsets.clone();
    let committer =
        Committer { consumer: consumer.clone(), offsets: offsets.clone(), topic: settings.cluster.topic.clone() };
    *lock(&global.log) = Some(committer);
    Ok(Some(tokio::spawn(read(consumer, offsets, global))))
}

fn consumer(settings: &ConsumerSettings) -> Result<StreamConsumer<Membership>, String> {
    let membership = Membership { topic: settings.cluster.topic.clone(), offsets: Default::default() };
    let consumer: StreamConsumer<Membership> =
        settings.client_config()?.create_with_context(membership).map_err(|error| error.to_string())?;
    consumer.subscribe(&[&settings.cluster.topic]).map_err(|error| error.to_string())?;
    Ok(consumer)
}

/// Reads messages until the task is stopped.
async fn read(consumer: Arc<StreamConsumer<Membership>>, offsets: Arc<Mutex<Offsets>>, global: Arc<Global>) {
    let mut backoff = Backoff::new(SENDER_STEPS);
    let (mut failing, mut refusing) = (false, false);
    loop {
        let message = match consumer.recv().await {
            Ok(message) => message,
            Err(error) => {
                if !failing {
                    failing = true;
                    tracing::warn!(%error, "global.kafka: reading failed; trying again");
                }
                tokio::time::sleep(backoff.failed(None)).await;
                continue;
            }
        };
        (failing, _) = (false, backoff.reset());
        let (partition, offset) = (message.partition(), message.offset());
        let generation = {
            let mut offsets = lock(&offsets);
            if !offsets.assigned.contains(&partition) {
                // Fetched before its partition was taken away: its next owner reads it.
                continue;
            }
            if offsets.taken.get(&partition).is_some_and(|&taken| offset <= taken) {
                continue; // merged already by this member
            }
            offsets.taken.insert(partition, offset);
            offsets.generation
        };
        let receipt = Receipt::Log { partition, offset, generation };
        match global.receive_logged(message.payload().unwrap_or_default(), receipt) {
            Ok(_) => refusing = false,
            Err(refusal) if !refusing => {
                refusing = true;
                tracing::warn!(partition, offset, %refusal, "global.kafka: a message is not a batch this global takes: skipped (messages.forward_batches_refused)");
            }
            Err(refusal) => tracing::debug!(partition, offset, %refusal, "global.kafka: another message skipped"),
        }
        lock(&offsets).read.insert(partition, offset);
    }
}
