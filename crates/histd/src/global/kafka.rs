//! A global as a member of a Kafka consumer group (`global.kafka`): the partitions the group
//! assigns it are the series it owns (locals cut every flush by partition, see
//! `sinks/forward/kafka.rs`), and each message is a forwarded batch, merged as one posted to
//! `/api/v1/forward` is (checked, screened, its identity merged once).
//!
//! Kafka is the journal: an offset is committed only once every backend has taken the flush
//! that carried its batch (`Global::carried`, when the flush is let go of), so a global killed at any moment loses nothing: the group
//! gives its partitions to another member, which reads again from the last commit, and the
//! killed one never flushed what it had merged since. When the group takes partitions away
//! from a live member (another joins, or leaves), the member commits what it has read of them
//! before it lets go: that is in its current interval and it flushes it; the next owner
//! starts after it. A duplicate (a batch a local produced twice) is merged once by the member
//! that reads both.
//!
//! The reading thread commits, synchronously, each partition whose offset a flush carried
//! past the last one the coordinator acknowledged (librdkafka tells an asynchronous commit's
//! outcome to no one here): a commit that fails (a broker failing over) is counted
//! (`messages.forward_commits_failed`) and made again every second until it is acknowledged
//! (`forward_commits_pending` partitions wait meanwhile), and a revocation tries its commit
//! a few times before it lets go. Commits and rebalances both run on that thread, so they
//! never interleave.
//!
//! A restarted global takes its place back as itself (global/rejoin.rs): a static member of
//! the group, it is given its own partitions at once, and it passes over the messages its store
//! holds past the group's commit (flushed before it stopped, not committed then).
//!
//! What it may count twice (counted in `forward_batches_possibly_twice` where it can be
//! told): what was read of partitions taken away while the commit could not be made (the
//! group fenced this member, or the coordinator is failing over): the next owner reads it
//! again; batches flushed and not committed by a global killed and not back within the
//! session timeout (another member reads them again); a global without the store; and the two
//! copies of a batch its local produced twice (a leader died before acknowledging it, past
//! `forward.kafka.deliveryTimeoutMs`) when two members read one each.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::{Message, Offset, TopicPartitionList};

use super::rejoin::{self, Stored};
use super::standing::{KafkaStanding, LagTrend, PartitionStanding};
use super::unreadable::{Cause, Found, Seen, Watcher};
use super::{Global, UnreadableBatch};
use crate::aggregation::Receipt;
use crate::backoff::{Backoff, SENDER_STEPS};
use crate::clock::lock;
use crate::telemetry::EdgeCounters;
use fleet::kafka::ConsumerSettings;
use fleet::signing::SourceKeys;

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
    /// The last offset a flush carried of each assigned partition.
    carried: HashMap<i32, i64>,
    /// The last offset the coordinator acknowledged as committed of each assigned partition.
    acknowledged: HashMap<i32, i64>,
    /// The first offset taken of each assigned partition since it was assigned.
    first: HashMap<i32, i64>,
    /// What the store holds of the topic (read at start): messages passed over.
    stored: Stored,
    /// The store's positions were weighed against the group's commits once (at the first
    /// assignment): partitions given to another member past them are counted then.
    stored_weighed: bool,
    /// When the coordinator last acknowledged a commit.
    acknowledged_at: Option<std::time::Instant>,
}

impl Offsets {
    /// Notes the offsets `receipts` name that were read under the current generation from a
    /// partition still assigned.
    fn carry(&mut self, receipts: &[Receipt]) {
        for receipt in receipts {
            if let Receipt::Log { partition, offset, generation } = *receipt {
                if generation == self.generation && self.assigned.contains(&partition) {
                    let carried = self.carried.entry(partition).or_insert(offset);
                    *carried = (*carried).max(offset);
                }
            }
        }
    }

    /// Each partition whose carried offset the coordinator has not acknowledged yet, with the
    /// offset to commit (the next one to read).
    fn unacknowledged(&self) -> Vec<(i32, i64)> {
        let mut due: Vec<(i32, i64)> = self
            .carried
            .iter()
            .filter(|(partition, carried)| self.acknowledged.get(partition).is_none_or(|done| done < carried))
            .map(|(&partition, &carried)| (partition, carried + 1))
            .collect();
        due.sort_unstable();
        due
    }

    /// The coordinator acknowledged `next` (the offset after the last one committed) for a
    /// partition; ignored once the partition was taken away.
    fn acknowledge(&mut self, partition: i32, next: i64) {
        self.acknowledged_at = Some(std::time::Instant::now());
        if self.assigned.contains(&partition) {
            let done = self.acknowledged.entry(partition).or_insert(next - 1);
            *done = (*done).max(next - 1);
        }
    }

    /// Publishes the levels: partitions waiting for an acknowledged commit, and assigned.
    fn publish(&self, edges: &EdgeCounters) {
        edges.forward_commits_pending.set(self.unacknowledged().len() as u64);
        edges.forward_partitions_assigned.set(self.assigned.len() as u64);
    }

    /// Notes `offset` of `partition` read under `generation`: committed with the next flush,
    /// unless the partition was taken away meanwhile.
    fn note_read(&mut self, partition: i32, offset: i64, generation: u64) {
        if self.generation == generation {
            self.read.insert(partition, offset);
        }
    }

    /// Forgets a partition taken away; the last offset read of it, if any.
    fn release(&mut self, partition: i32) -> Option<i64> {
        self.assigned.remove(&partition);
        self.carried.remove(&partition);
        self.acknowledged.remove(&partition);
        self.first.remove(&partition);
        self.read.remove(&partition)
    }

    /// The messages of `partition` read since its last acknowledged commit (or since it was
    /// assigned): what the next owner reads again if the commit of what was read fails.
    fn unacknowledged_reads(&self, partition: i32) -> u64 {
        let Some(&read) = self.read.get(&partition) else { return 0 };
        let first = self.first.get(&partition).map_or(read, |first| first - 1);
        let done = self.acknowledged.get(&partition).copied().unwrap_or(first).max(first);
        (read - done).max(0) as u64
    }
}

/// A list of `(partition, next offset)` of `topic` to commit.
fn commit_list(topic: &str, offsets: impl IntoIterator<Item = (i32, i64)>) -> TopicPartitionList {
    let mut list = TopicPartitionList::new();
    for (partition, next) in offsets {
        let _ = list.add_partition_offset(topic, partition, Offset::Offset(next));
    }
    list
}

/// How often a revocation tries its commit before it lets the partitions go.
const REVOKE_COMMIT_ATTEMPTS: u32 = 5;

/// The consumer's context: librdkafka's log at debug level and the rebalance rule above.
struct Membership {
    topic: String,
    offsets: Arc<Mutex<Offsets>>,
    edges: Arc<EdgeCounters>,
    /// Broker errors a person must mend, logged once.
    told: fleet::kafka::BrokerErrors,
    /// Where each partition stands, as the client's last statistics said.
    standing: Mutex<BTreeMap<i32, Standing>>,
    /// The group fenced this member: another has its instance id (logged once).
    fenced: AtomicBool,
    /// Its static membership id (global/rejoin.rs).
    instance: Option<String>,
}

/// How often the client reports where the partitions stand (librdkafka's statistics).
const STATISTICS_EVERY: &str = "5000";

/// One partition as the client's statistics show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Standing {
    /// The group's committed offset (negative: none).
    committed: i64,
    /// The log's start.
    start: i64,
    /// The last offset a `read_committed` consumer may read past: the last stable offset (an
    /// open transaction holds it back), as the last fetch from the leader said.
    end: i64,
    /// Fetching runs from a known leader.
    fetching: bool,
}

impl rdkafka::ClientContext for Membership {
    fn log(&self, _level: rdkafka::config::RDKafkaLogLevel, facility: &str, message: &str) {
        tracing::debug!(facility, message, "librdkafka");
    }

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        let fenced = error.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::FencedInstanceId)
            || reason.contains("group.instance.id");
        if !fenced {
            self.told.note(&error, reason, "global.kafka");
        } else if !self.fenced.swap(true, Ordering::Relaxed) {
            tracing::error!(reason, "global.kafka: another member of the group has this global's instance id (global.kafka.instanceId, or the kafka-instance-id file of a data directory copied from another global): the group fenced this one, which reads nothing more; give each global an id of its own and restart it");
        }
    }

    fn stats(&self, statistics: rdkafka::Statistics) {
        let Some(topic) = statistics.topics.get(&self.topic) else { return };
        let standing = topic.partitions.values().filter(|p| p.partition >= 0).map(|p| {
            let fetching = p.fetch_state == "active" && p.leader >= 0;
            (p.partition, Standing { committed: p.committed_offset, start: p.lo_offset, end: p.ls_offset, fetching })
        });
        *lock(&self.standing) = standing.collect();
    }
}

impl ConsumerContext for Membership {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(revoked) = rebalance else { return };
        let mut offsets = lock(&self.offsets);
        let unsure: u64 =
            revoked.elements().iter().map(|element| offsets.unacknowledged_reads(element.partition())).sum();
        let read: Vec<(i32, i64)> = revoked
            .elements()
            .iter()
            .filter_map(|element| offsets.release(element.partition()).map(|read| (element.partition(), read + 1)))
            .collect();
        offsets.generation += 1;
        offsets.publish(&self.edges);
        drop(offsets);
        if read.is_empty() {
            return;
        }
        let list = commit_list(&self.topic, read);
        for attempt in 1..=REVOKE_COMMIT_ATTEMPTS {
            match consumer.commit(&list, CommitMode::Sync) {
                Ok(()) => {
                    tracing::info!(
                        partitions = list.count(),
                        "global.kafka: partitions taken away: what was read of them is committed (this global flushes it)"
                    );
                    return;
                }
                Err(error) if attempt == REVOKE_COMMIT_ATTEMPTS => {
                    self.edges.forward_commits_failed.add(1);
                    self.edges.forward_batches_possibly_twice.add(unsure);
                    tracing::warn!(%error, attempts = attempt, messages = unsure, "global.kafka: partitions taken away: committing what was read of them failed (the next owner reads them again: counted twice, messages.forward_batches_possibly_twice)");
                }
                Err(_) => {
                    self.edges.forward_commits_failed.add(1);
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
            }
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(assigned) = rebalance {
            let partitions: Vec<i32> = assigned.elements().iter().map(|element| element.partition()).collect();
            tracing::info!(?partitions, "global.kafka: partitions assigned");
            let mut offsets = lock(&self.offsets);
            offsets.assigned.extend(partitions);
            offsets.publish(&self.edges);
            drop(offsets);
            self.weigh_stored(consumer);
        }
    }
}

/// How long the group's committed offsets are waited for after an assignment.
const COMMITTED_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl Membership {
    /// Weighs what the store holds against the group's commits (global/rejoin.rs): of an
    /// assigned partition, what lies past the commit is passed over; without a commit (a new
    /// group, or a topic made again) or with one past it all, the store's positions are
    /// forgotten. At the first assignment, a partition given to another member with its
    /// commit behind what the store holds is counted as read twice.
    fn weigh_stored(&self, consumer: &BaseConsumer<Self>) {
        let (partitions, first) = {
            let offsets = lock(&self.offsets);
            if offsets.stored.is_empty() {
                return;
            }
            (offsets.stored.partitions(), !offsets.stored_weighed)
        };
        let committed =
            consumer.committed_offsets(commit_list(&self.topic, partitions.iter().map(|&p| (p, 0))), COMMITTED_WAIT);
        let committed: HashMap<i32, Option<i64>> = match committed {
            Ok(list) => list
                .elements()
                .iter()
                .map(|element| (element.partition(), element.offset().to_raw().filter(|&offset| offset >= 0)))
                .collect(),
            Err(error) => {
                tracing::warn!(%error, "global.kafka: the group's commits could not be read: what the store holds is passed over as it is");
                return;
            }
        };
        let mut offsets = lock(&self.offsets);
        offsets.stored_weighed = true;
        for partition in partitions {
            let Some(last) = offsets.stored.last(partition) else { continue };
            let commit = committed.get(&partition).copied().flatten();
            let assigned = offsets.assigned.contains(&partition);
            match commit {
                Some(commit) if commit <= last && assigned => {
                    tracing::info!(partition, commit, stored_through = last, "global.kafka: the store holds messages past the group's commit (flushed before this global stopped, not committed then): passed over, not merged again");
                }
                Some(commit) if commit <= last => {
                    if first {
                        let twice = (last + 1 - commit) as u64;
                        self.edges.forward_batches_possibly_twice.add(twice);
                        tracing::warn!(partition, commit, stored_through = last, messages = twice, "global.kafka: another member reads messages this global stored before it stopped (not committed then): counted twice in the group (messages.forward_batches_possibly_twice)");
                    }
                }
                _ => offsets.stored.forget(partition),
            }
        }
    }
}

/// Notes the offsets of what each flush carried, for the reading thread to commit; at the stop,
/// commits what was read and leaves the group.
pub struct Committer {
    consumer: Arc<BaseConsumer<Membership>>,
    edges: Arc<EdgeCounters>,
    offsets: Arc<Mutex<Offsets>>,
    topic: String,
}

impl std::fmt::Debug for Committer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Committer").field("topic", &self.topic).finish()
    }
}

impl Committer {
    /// Notes the offsets of what a flush carried (`receipts`, per partition still assigned
    /// under the current generation): the reading thread commits them
    /// ([`Commits::commit_carried`]).
    pub fn note_carried(&self, receipts: &[Receipt]) {
        let mut offsets = lock(&self.offsets);
        offsets.carry(receipts);
        offsets.publish(&self.edges);
    }
}

impl Committer {
    /// At the stop, once reading has stopped and the final flush was taken: commits every
    /// offset read (all flushed now) and leaves the group, so the others take the partitions
    /// at once.
    pub fn leave(self) {
        let offsets = lock(&self.offsets);
        let list = commit_list(&self.topic, offsets.read.iter().map(|(&partition, &read)| (partition, read + 1)));
        let unsure: u64 = offsets.read.keys().map(|&partition| offsets.unacknowledged_reads(partition)).sum();
        drop(offsets);
        if list.count() > 0 {
            if let Err(error) = self.consumer.commit(&list, CommitMode::Sync) {
                self.edges.forward_batches_possibly_twice.add(unsure);
                tracing::warn!(%error, messages = unsure, "global.kafka: the last commit failed (the next owner reads the last flush's batches again: messages.forward_batches_possibly_twice; restarted within global.kafka.sessionTimeoutMs, this global passes over what its store holds)");
            }
        }
        self.leave_group();
    }

    /// Leaves the group so that the others take the partitions at once. A static member
    /// (global/rejoin.rs) closing does not leave (the group would keep its partitions for it
    /// for `sessionTimeoutMs`): it unsubscribes, and the revocation that starts is served here
    /// (the reading thread has stopped) until the partitions are let go of; what is fetched
    /// meanwhile is left to the next owner.
    fn leave_group(&self) {
        self.consumer.unsubscribe();
        let until = std::time::Instant::now() + LEAVE_WAIT;
        let mut released_at = None;
        while std::time::Instant::now() < until {
            let _ = self.consumer.poll(POLL);
            let released = lock(&self.offsets).assigned.is_empty();
            match released_at {
                None if released => released_at = Some(std::time::Instant::now()),
                // The request that leaves the group goes out once the partitions are let go of.
                Some(at) if at.elapsed() >= LEAVE_SENT => return,
                _ => {}
            }
        }
        tracing::warn!(waited_s = LEAVE_WAIT.as_secs(), "global.kafka: leaving the group took too long: the others take this global's partitions after global.kafka.sessionTimeoutMs");
    }
}

/// How long a stop waits for the group to be left.
const LEAVE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long the client is given, once the partitions are let go of, to send the request that
/// leaves the group.
const LEAVE_SENT: std::time::Duration = std::time::Duration::from_millis(300);

/// The thread reading the topic (its own, not the runtime's: a rebalance commits
/// synchronously inside librdkafka's poll).
pub struct Reader {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").finish_non_exhaustive()
    }
}

impl Reader {
    /// Stops reading (within one [`POLL`]) and waits for the thread: what it merged is then
    /// in the interval the final flush takes.
    pub async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread;
        let joined = tokio::time::timeout(STOP_WAIT, tokio::task::spawn_blocking(move || thread.join())).await;
        if !matches!(joined, Ok(Ok(Ok(())))) {
            tracing::warn!(waited_s = STOP_WAIT.as_secs(), "global.kafka: the reading thread did not stop in time (a commit waiting for an unreachable coordinator): the final flush goes without it");
        }
    }
}

/// How long a stop waits for the reading thread.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long one poll of the consumer waits for a message (and a stop waits at most).
pub const POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Joins the consumer group of `global.kafka` and merges what it reads into `global` on a
/// thread of its own; `None` without `global.kafka`. `store_dir`: the store's data
/// directory, when the store runs (its positions are passed over; the instance id is kept
/// there, else in `global.journalDir`).
pub fn start(global: Arc<Global>, store_dir: Option<&std::path::Path>) -> anyhow::Result<Option<Reader>> {
    let Some(settings) = global.config().kafka.clone() else { return Ok(None) };
    let keys =
        settings.signing_keys.as_deref().map(SourceKeys::read).transpose().map_err(|why| anyhow::anyhow!(why))?;
    let edges = global.edges.clone();
    let home = store_dir.or(global.config().journal_dir.as_deref());
    let instance = rejoin::instance_id(settings.instance_id.as_deref(), home)
        .map_err(|why| anyhow::anyhow!("global.kafka.instanceId: {why}"))?;
    match &instance {
        Some(id) => {
            tracing::info!(instance_id = %id, group = %settings.group, "global.kafka: a static member of its group: restarted within sessionTimeoutMs, it gets its partitions back at once")
        }
        None => {
            tracing::warn!(group = %settings.group, "global.kafka: no instance id (no store, no global.journalDir, no global.kafka.instanceId): a restart of this global leaves its partitions unread for global.kafka.sessionTimeoutMs")
        }
    }
    let stored = match store_dir {
        None => Stored::default(),
        Some(dir) => {
            let file = store::data_dir::database(dir);
            Stored::read(&file, &settings.cluster.topic).unwrap_or_else(|why| {
                tracing::warn!(file = %file.display(), error = %why, "global.kafka: where the store's batches were read cannot be told: a message flushed before the last stop and not committed then is merged again");
                Stored::default()
            })
        }
    };
    let consumer = consumer(&settings, edges.clone(), instance.as_deref(), stored)
        .map_err(|why| anyhow::anyhow!("global.kafka: {why}"))?;
    let consumer = Arc::new(consumer);
    let offsets = consumer.context().offsets.clone();
    let committer = Committer {
        consumer: consumer.clone(),
        edges,
        offsets: offsets.clone(),
        topic: settings.cluster.topic.clone(),
    };
    *lock(&global.log) = Some(committer);
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let thread = std::thread::Builder::new()
        .name("kafka-reader".into())
        .spawn(move || read(&consumer, &offsets, &global, keys, &stopped))
        .map_err(|error| anyhow::anyhow!("global.kafka: cannot start the reading thread: {error}"))?;
    Ok(Some(Reader { stop, thread }))
}

fn consumer(
    settings: &ConsumerSettings,
    edges: Arc<EdgeCounters>,
    instance: Option<&str>,
    stored: Stored,
) -> Result<BaseConsumer<Membership>, String> {
    let membership = Membership {
        topic: settings.cluster.topic.clone(),
        offsets: Arc::new(Mutex::new(Offsets { stored, ..Offsets::default() })),
        edges,
        told: Default::default(),
        standing: Default::default(),
        fenced: AtomicBool::new(false),
        instance: instance.map(str::to_string),
    };
    let mut config = settings.client_config()?;
    config.set("statistics.interval.ms", STATISTICS_EVERY);
    if let Some(instance) = instance {
        config.set("group.instance.id", instance);
    }
    let consumer: BaseConsumer<Membership> =
        config.create_with_context(membership).map_err(|error| error.to_string())?;
    consumer.subscribe(&[&settings.cluster.topic]).map_err(|error| error.to_string())?;
    Ok(consumer)
}

/// Reads messages, and commits what flushes carried, until `stop` is set; with `keys`
/// (`global.kafka.signingKeys`) only batches signed by their source are merged.
fn read(
    consumer: &BaseConsumer<Membership>,
    offsets: &Mutex<Offsets>,
    global: &Global,
    keys: Option<SourceKeys>,
    stop: &AtomicBool,
) {
    let mut backoff = Backoff::new(SENDER_STEPS);
    let (mut failing, mut refusing) = (false, false);
    let mut commits = Commits::default();
    let mut fetching_paused = false;
    let mut lookout = Lookout::default();
    loop {
        commits.commit_carried(consumer, offsets);
        if stop.load(Ordering::Relaxed) {
            break;
        }
        // While `global.maxLateIntervals` late intervals wait for the backends, fetching
        // pauses (a message read now could start one more); the poll goes on, so the group
        // still hears from this member and rebalances run. Backends that take them at once
        // are waited for first: a replayed backlog then flows without a pause and a fetch at
        // each bound (probe P5: 32 late intervals a second that way).
        let held = global.late_intervals_held() && !late_intervals_taken(global, stop);
        if held != fetching_paused {
            fetching_paused = held;
            pause_fetching(consumer, held);
        }
        if fetching_paused {
            lookout.paused();
        }
        lookout.look(consumer, offsets, global);
        let polled = consumer.poll(POLL);
        if stop.load(Ordering::Relaxed) {
            break; // what was fetched is read by the next owner (it is not committed)
        }
        let message = match polled {
            None => continue,
            Some(Ok(message)) => message,
            Some(Err(rdkafka::error::KafkaError::MessageConsumption(code))) if Cause::of(code).is_some() => {
                // librdkafka fetches the batch again by itself: no backoff here.
                lookout.error(Cause::of(code).unwrap_or(Cause::Silent));
                continue;
            }
            Some(Err(error)) => {
                if !failing {
                    failing = true;
                    tracing::warn!(%error, "global.kafka: reading failed; trying again");
                }
                pause(backoff.failed(None), stop);
                continue;
            }
        };
        (failing, _) = (false, backoff.reset());
        let (partition, offset) = (message.partition(), message.offset());
        lookout.read(partition, global, &consumer.context().topic);
        let generation = match take(offsets, partition, offset) {
            Take::Merge(generation) => generation,
            Take::Stored(generation) => {
                global.edges.forward_batches_already_stored.add(1);
                global.note_read_unmerged(Receipt::Log { partition, offset, generation });
                lock(offsets).note_read(partition, offset, generation);
                continue;
            }
            Take::Not => continue,
        };
        let receipt = Receipt::Log { partition, offset, generation };
        let signature = message.headers().and_then(|headers| {
            use rdkafka::message::Headers as _;
            headers.iter().find(|header| header.key == fleet::signing::HEADER).and_then(|h| h.value)
        });
        let proof = keys.as_ref().map(|keys| super::Proof { keys, signature });
        match global.receive_logged(message.payload().unwrap_or_default(), proof, receipt) {
            Ok(_) => refusing = false,
            Err(refusal) if !refusing => {
                refusing = true;
                tracing::warn!(partition, offset, %refusal, "global.kafka: a message is not a batch this global takes: skipped (messages.forward_batches_refused)");
            }
            Err(refusal) => tracing::debug!(partition, offset, %refusal, "global.kafka: another message skipped"),
        }
        lock(offsets).note_read(partition, offset, generation);
    }
}

/// The reading thread's look at where the partitions stand, every [`LOOK_EVERY`]: record
/// batches the client cannot read (global/unreadable.rs), and the lag (global/standing.rs).
#[derive(Debug, Default)]
struct Lookout {
    watcher: Watcher,
    looked_at: Option<std::time::Instant>,
    /// An error of the client's about a batch was logged (once, until one is read again).
    told: bool,
    /// The lag's trend, over the partitions `trend_of`.
    trend: LagTrend,
    trend_of: Vec<i32>,
}

/// How often the partitions' positions are looked at.
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a seek may wait for the client.
const LOOK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl Lookout {
    /// librdkafka reported a batch it cannot decode (`cause`), naming no partition.
    fn error(&mut self, cause: Cause) {
        if !std::mem::replace(&mut self.told, true) {
            tracing::warn!(
                cause = cause.describe(),
                "global.kafka: the Kafka client cannot read a record batch; its partition is found by its stall"
            );
        }
        self.watcher.error(cause, std::time::Instant::now());
    }

    /// Fetching was paused on purpose.
    fn paused(&mut self) {
        self.watcher.paused();
    }

    /// A message of `partition` was read: it moves.
    fn read(&mut self, partition: i32, global: &Global, topic: &str) {
        if self.watcher.read(partition) {
            publish(&self.watcher, global, topic);
        }
    }

    /// Looks at where the partitions stand (at most every [`LOOK_EVERY`]): holds those newly
    /// stuck, skips what was stuck for `global.kafka.skipUnreadableAfterMs`.
    fn look(&mut self, consumer: &BaseConsumer<Membership>, offsets: &Mutex<Offsets>, global: &Global) {
        let now = std::time::Instant::now();
        if self.looked_at.is_some_and(|at| now.duration_since(at) < LOOK_EVERY) {
            return;
        }
        self.looked_at = Some(now);
        let topic = consumer.context().topic.clone();
        let assigned = lock(offsets).assigned.clone();
        let mut changed = self.watcher.keep_assigned(|partition| assigned.contains(&partition));
        let skip_after = global.config().kafka.as_ref().and_then(|kafka| kafka.skip_unreadable_after);
        let seen = partitions_seen(consumer, offsets);
        self.stand(&seen, consumer, offsets, global, now);
        for found in self.watcher.look(&seen, now, skip_after) {
            changed = true;
            match found {
                Found::Held { partition, offset, cause } => {
                    global.edges.forward_batches_unreadable.add(1);
                    tracing::error!(topic, partition, offset, cause = cause.describe(), "global.kafka: a partition stopped at a record batch this histd cannot read: held there (/health says degraded; global.kafka.skipUnreadableAfterMs reads past a damaged one)");
                }
                Found::Skip { partition, offset, cause } => {
                    let batch =
                        UnreadableBatch { topic: topic.clone(), partition, offset, reason: cause.describe().into() };
                    skip(consumer, offsets, global, batch);
                    self.told = false;
                }
            }
        }
        if changed {
            publish(&self.watcher, global, &topic);
        }
    }
}

impl Lookout {
    /// Publishes where this member stands in the topic (global/standing.rs): each partition's
    /// lag, the commits, whether the lag grows without bound.
    fn stand(
        &mut self,
        seen: &[Seen],
        consumer: &BaseConsumer<Membership>,
        offsets: &Mutex<Offsets>,
        global: &Global,
        now: std::time::Instant,
    ) {
        let partitions: Vec<PartitionStanding> = seen
            .iter()
            .map(|seen| PartitionStanding {
                partition: seen.partition,
                next: seen.next,
                end: seen.end,
                lag: (seen.end - seen.next).max(0),
            })
            .collect();
        let lag = partitions.iter().map(|p| p.lag).sum();
        let assigned: Vec<i32> = partitions.iter().map(|p| p.partition).collect();
        if assigned != self.trend_of {
            self.trend.reset();
            self.trend_of = assigned;
        }
        self.trend.note(lag, now);
        let (pending, acknowledged_at) = {
            let offsets = lock(offsets);
            (offsets.unacknowledged().len() as u64, offsets.acknowledged_at)
        };
        let context = consumer.context();
        let settings = global.config().kafka.as_ref();
        let standing = KafkaStanding {
            topic: context.topic.clone(),
            group: settings.map(|kafka| kafka.group.clone()).unwrap_or_default(),
            instance_id: context.instance.clone(),
            partitions,
            lag,
            commits_pending: pending,
            last_commit_age_s: acknowledged_at.map(|at| now.saturating_duration_since(at).as_secs()),
            falling_behind: self.trend.falling_behind(),
        };
        global.edges.forward_consumer_lag.set(lag.max(0) as u64);
        global.show_standing(standing);
    }
}

/// The partitions held now, for `/health`.
fn publish(watcher: &Watcher, global: &Global, topic: &str) {
    let held = watcher.held().into_iter().map(|(partition, offset, cause)| UnreadableBatch {
        topic: topic.to_string(),
        partition,
        offset,
        reason: cause.describe().to_string(),
    });
    global.hold_unreadable(held.collect());
}

/// Where each assigned partition stands, as the client's last statistics said: the next
/// offset this member would read of it (after the last one read, else the group's committed
/// offset, else the log's start) and the offset it may read up to. Partitions not fetching from
/// a known leader are left out: a partition whose leader moves is not stuck.
fn partitions_seen(consumer: &BaseConsumer<Membership>, offsets: &Mutex<Offsets>) -> Vec<Seen> {
    let (assigned, read) = {
        let offsets = lock(offsets);
        (offsets.assigned.clone(), offsets.read.clone())
    };
    let standing = lock(&consumer.context().standing).clone();
    standing
        .into_iter()
        .filter(|(partition, standing)| standing.fetching && assigned.contains(partition))
        .map(|(partition, standing)| {
            let committed = (standing.committed >= 0).then_some(standing.committed);
            let next = read.get(&partition).map(|last| last + 1).or(committed).unwrap_or(standing.start);
            Seen { partition, next, end: standing.end }
        })
        .collect()
}

/// Reads past the record at `batch.offset`: counted, logged, named in `/health`, and its
/// offset committed with the next flush.
fn skip(consumer: &BaseConsumer<Membership>, offsets: &Mutex<Offsets>, global: &Global, batch: UnreadableBatch) {
    let UnreadableBatch { partition, offset, .. } = batch;
    let topic = consumer.context().topic.as_str();
    if let Err(error) = consumer.seek(topic, partition, Offset::Offset(offset + 1), LOOK_WAIT) {
        tracing::warn!(topic, partition, offset, %error, "global.kafka: reading past an unreadable record failed; tried again");
        return;
    }
    // Counted in forward_batches_unreadable when it was held, as every skipped one first is.
    tracing::error!(topic, partition, offset, cause = %batch.reason, "global.kafka: an unreadable record skipped (/health names it); its offset is committed with the next flush");
    let (Take::Merge(generation) | Take::Stored(generation)) = take(offsets, partition, offset) else { return };
    lock(offsets).note_read(partition, offset, generation);
    global.skip_logged(Receipt::Log { partition, offset, generation }, batch);
}

/// Pauses (or resumes) fetching from every partition assigned now.
/// How long the reading thread waits for the backends to take the late intervals held before
/// it pauses fetching: short beside the group's session and poll timeouts.
const LATE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Waits up to [`LATE_WAIT`] (or until `stop`) for the backends to take the late intervals
/// held; true when they did.
fn late_intervals_taken(global: &Global, stop: &AtomicBool) -> bool {
    let until = std::time::Instant::now() + LATE_WAIT;
    while global.late_intervals_held() {
        if std::time::Instant::now() >= until || stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    true
}

fn pause_fetching(consumer: &BaseConsumer<Membership>, paused: bool) {
    let Ok(assigned) = consumer.assignment() else { return };
    let done = match paused {
        true => consumer.pause(&assigned),
        false => consumer.resume(&assigned),
    };
    if let Err(error) = done {
        tracing::warn!(%error, paused, "global.kafka: pausing or resuming the partitions failed");
    }
}

/// How the reading thread's commits go: they are synchronous (librdkafka tells an
/// asynchronous commit's outcome to no one here), on the thread that also runs the
/// rebalances, so a commit and a revocation never interleave.
#[derive(Debug, Default)]
struct Commits {
    /// After a failure, no commit before this.
    retry_at: Option<std::time::Instant>,
    /// Set while commits fail: the failure and the recovery are logged once each.
    failing: bool,
}

/// How long after a failed commit the next is tried.
const COMMIT_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

impl Commits {
    /// Commits each partition whose carried offset is past the last one acknowledged; a
    /// failure is counted and tried again after [`COMMIT_RETRY`], whether or not new batches
    /// come.
    fn commit_carried(&mut self, consumer: &BaseConsumer<Membership>, offsets: &Mutex<Offsets>) {
        if self.retry_at.is_some_and(|at| std::time::Instant::now() < at) {
            return;
        }
        let due = lock(offsets).unacknowledged();
        if due.is_empty() {
            return;
        }
        let context = consumer.context();
        match consumer.commit(&commit_list(&context.topic, due.iter().copied()), CommitMode::Sync) {
            Ok(()) => {
                let mut offsets = lock(offsets);
                due.into_iter().for_each(|(partition, next)| offsets.acknowledge(partition, next));
                offsets.publish(&context.edges);
                drop(offsets);
                self.retry_at = None;
                if std::mem::take(&mut self.failing) {
                    tracing::info!("global.kafka: offsets are committed again");
                }
            }
            Err(error) => {
                context.edges.forward_commits_failed.add(1);
                self.retry_at = Some(std::time::Instant::now() + COMMIT_RETRY);
                if !std::mem::replace(&mut self.failing, true) {
                    tracing::warn!(%error, "global.kafka: committing offsets failed: tried again every second (until then, a global killed would have its batches read again by the next owner)");
                }
            }
        }
    }
}

/// What becomes of a message read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Take {
    /// Merged, under this generation.
    Merge(u64),
    /// Passed over: the store holds it already (global/rejoin.rs); its offset is committed
    /// with the next flush, read under this generation.
    Stored(u64),
    /// Not this member's: its partition was taken away after it was fetched, or this member
    /// took it before.
    Not,
}

/// Takes the message at `offset` of `partition`.
fn take(offsets: &Mutex<Offsets>, partition: i32, offset: i64) -> Take {
    let mut offsets = lock(offsets);
    if !offsets.assigned.contains(&partition) || offsets.taken.get(&partition).is_some_and(|&taken| offset <= taken) {
        return Take::Not;
    }
    offsets.taken.insert(partition, offset);
    offsets.first.entry(partition).or_insert(offset);
    match offsets.stored.holds(partition, offset) {
        true => Take::Stored(offsets.generation),
        false => Take::Merge(offsets.generation),
    }
}

/// Sleeps `duration`, or until `stop` is set.
fn pause(duration: std::time::Duration, stop: &AtomicBool) {
    let until = std::time::Instant::now() + duration;
    while !stop.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(POLL));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(partition: i32, offset: i64, generation: u64) -> Receipt {
        Receipt::Log { partition, offset, generation }
    }

    fn assigned(partitions: &[i32]) -> Offsets {
        Offsets { assigned: partitions.iter().copied().collect(), ..Offsets::default() }
    }

    #[test]
    fn a_commit_not_acknowledged_is_due_again_until_it_is() {
        let mut offsets = assigned(&[0, 1]);
        offsets.carry(&[log(0, 4, 0), log(0, 9, 0), log(1, 2, 0)]);
        assert_eq!(offsets.unacknowledged(), [(0, 10), (1, 3)]);
        // The coordinator failed the commit: nothing acknowledged, both are due at the next
        // flush though it carried nothing new.
        offsets.carry(&[]);
        assert_eq!(offsets.unacknowledged(), [(0, 10), (1, 3)]);
        offsets.acknowledge(0, 10);
        assert_eq!(offsets.unacknowledged(), [(1, 3)]);
        // An acknowledgement of an older commit arriving late changes nothing.
        offsets.acknowledge(1, 3);
        offsets.acknowledge(1, 1);
        assert_eq!(offsets.unacknowledged(), []);
        offsets.carry(&[log(1, 5, 0)]);
        assert_eq!(offsets.unacknowledged(), [(1, 6)]);
    }

    #[test]
    fn receipts_of_an_older_generation_or_a_partition_taken_away_are_not_committed() {
        // (assigned partitions, current generation, the receipt a flush carried, what is due)
        type Case = (&'static [i32], u64, Receipt, &'static [(i32, i64)]);
        let cases: [Case; 4] = [
            (&[0], 0, log(0, 7, 0), &[(0, 8)]),
            (&[0], 1, log(0, 7, 0), &[]),
            (&[1], 0, log(0, 7, 0), &[]),
            (&[0], 0, Receipt::Journal(3), &[]),
        ];
        for (partitions, generation, receipt, due) in cases {
            let mut offsets = Offsets { generation, ..assigned(partitions) };
            offsets.carry(&[receipt]);
            assert_eq!(offsets.unacknowledged(), due, "{receipt:?} under generation {generation}");
        }
    }

    #[test]
    fn a_released_partition_forgets_what_was_carried_and_acknowledged() {
        let mut offsets = assigned(&[0]);
        offsets.carry(&[log(0, 3, 0)]);
        offsets.read.insert(0, 5);
        assert_eq!(offsets.release(0), Some(5));
        offsets.acknowledge(0, 4);
        assert_eq!((offsets.unacknowledged(), offsets.acknowledged.len()), (vec![], 0));
    }
}
