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

use std::sync::Arc;
use std::time::Duration;

use agg::Snapshot;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::config::ForwardConfig;
use super::encode::{cut, CutSettings, Part};
use super::format::CONTENT_TYPE;
use super::ring::{Node, Ring};
use super::spool::{Dropped, Spool, Waiting};
use crate::clock::unix_now_s;
use crate::http_client::{Client, HttpUrl, Outcome};
use crate::sinks::backoff::{Backoff, FINAL_DEADLINE, SENDER_STEPS};
use crate::sinks::delivery::{plain_judge, Sender, Verdict};
use crate::sinks::{DropReason, Flushes, SinkTelemetry};
use tokio::task::JoinHandle;

/// Batches produced to Kafka at once before their acknowledgements are awaited.
const KAFKA_IN_FLIGHT: usize = 64;

/// Starts one destination's tasks (the backend's one, or one of `forward.paths`), reading
/// `flushes` and counting into `telemetry`; fails when its `spoolDir` cannot be opened.
pub fn spawn(
    config: &ForwardConfig,
    settings: CutSettings,
    telemetry: Arc<SinkTelemetry>,
    flushes: Flushes,
) -> anyhow::Result<JoinHandle<()>> {
    let authorization = config.authorization().map_err(|why| anyhow::anyhow!(why))?;
    let tls = config.client_tls().map_err(|why| anyhow::anyhow!(why))?;
    let (spool, dropped) = Spool::open(config.spool_dir.clone(), config.spool_bytes)
        .map_err(|error| anyhow::anyhow!("forward.spoolDir: {error}"))?;
    // Files found damaged at start: never sent, their series (as their headers say) lost.
    telemetry.errors.add(dropped.batches);
    telemetry.drop_points(DropReason::Corrupt, dropped.series);
    if !spool.is_empty() {
        tracing::info!(
            batches = spool.len(),
            bytes = spool.bytes(),
            "forward: sending the batches an earlier run left in the spool"
        );
    }
    let settings = Arc::new(settings);
    match &config.kafka {
        Some(kafka) => {
            let producer = super::kafka::Producer::new(kafka).map_err(|why| anyhow::anyhow!("forward.kafka: {why}"))?;
            let way = (producer, kafka.delivery_timeout);
            Ok(tokio::spawn(run_on_kafka(spool, settings, telemetry, way, flushes)))
        }
        None => Ok(spawn_on_nodes(config, DeliveryParts { spool, settings, telemetry }, (authorization, tls), flushes)),
    }
}

/// Posts batches to `forward.nodes`, with a health task that asks each node's `/health`.
fn spawn_on_nodes(
    config: &ForwardConfig,
    parts: DeliveryParts,
    (authorization, tls): (Option<(String, String)>, Option<Arc<tokio_rustls::rustls::ClientConfig>>),
    flushes: Flushes,
) -> JoinHandle<()> {
    let ring = Arc::new(Ring::new(config.nodes.iter().map(|(name, _)| Node::new(name.clone())).collect()));
    let urls: Vec<HttpUrl> = config.nodes.iter().map(|(_, url)| url.clone()).collect();
    let node_came_back = Arc::new(Notify::new());
    let checks = check_health(
        ring.clone(),
        urls.clone(),
        (authorization.clone(), tls.clone()),
        config.check_interval,
        config.timeout,
        node_came_back.clone(),
    );
    let health = tokio::spawn(checks);
    let mut headers = vec![
        ("content-type".to_string(), CONTENT_TYPE.to_string()),
        ("content-encoding".to_string(), "snappy".to_string()),
    ];
    headers.extend(authorization);
    let clients = urls
        .into_iter()
        .map(|url| Some(Client::new(url, headers.clone(), config.timeout).with_tls(tls.clone())))
        .collect();
    let delivery = parts.deliver(ring, Way::Nodes { clients, redirect_after: config.redirect_after });
    tokio::spawn(async move {
        delivery.run(flushes, node_came_back).await;
        health.abort();
    })
}

/// How a global's answer is taken: as any HTTP receiver's ([`plain_judge`]), except that a
/// refusal of the request rather than the batch (401 or 403: credentials; 408: the body too
/// slow; 415: the headers) keeps the batch for a retry: fixing a token must not have lost data
/// meanwhile.
fn judge(answered: Result<crate::http_client::Answer, String>) -> Verdict {
    match answered {
        Err(reason) => Verdict::Retry { reason, after: None },
        Ok(answer) if matches!(answer.status, 401 | 403 | 408 | 415) => Verdict::Retry {
            reason: format!("{} (the batch is kept: check forward.tokenFile and forward.tls)", answer.summary()),
            after: None,
        },
        Ok(answer) => plain_judge(&answer),
    }
}

/// Asks each node's `/health` every `interval`; wakes the delivery when one comes back.
async fn check_health(
    ring: Arc<Ring>,
    urls: Vec<HttpUrl>,
    (authorization, tls): (Option<(String, String)>, Option<Arc<tokio_rustls::rustls::ClientConfig>>),
    interval: Duration,
    timeout: Duration,
    came_back: Arc<Notify>,
) {
    let headers: Vec<(String, String)> = authorization.into_iter().collect();
    let mut clients: Vec<Client> = urls
        .into_iter()
        .map(|url| Client::new(url, headers.clone(), timeout.min(interval)).with_tls(tls.clone()))
        .collect();
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        for (node, client) in ring.nodes().iter().zip(&mut clients) {
            let outcome = client.get("/health").await;
            let up = outcome == Outcome::Delivered;
            if node.set_up(up) {
                match up {
                    true => tracing::info!(node = %node.name, "forward: node is back"),
                    false => tracing::warn!(node = %node.name, ?outcome, "forward: node failed its health check"),
                }
            }
            if up {
                came_back.notify_one();
            }
        }
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
    Kafka { producer: super::kafka::Producer, timeout: Duration },
}

/// The spool and the way that empties it.
struct Delivery {
    /// The nodes, or the topic's partitions (named by their numbers, all always up).
    ring: Arc<Ring>,
    way: Way,
    /// Always `Some` but while a blocking thread writes to it.
    spool: Option<Spool>,
    settings: Arc<CutSettings>,
    telemetry: Arc<SinkTelemetry>,
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
        let telemetry = self.telemetry.clone();
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
        self.last_start_ms = start_ms.unwrap_or(self.last_start_ms);
        match result {
            Ok(dropped) => self.count_dropped(dropped),
            Err(error) => {
                self.telemetry.failed(unix_now_s());
                tracing::error!(%error, "forward: cannot queue this flush: lost (forward.errors)");
            }
        }
        self.note_write_failure();
        let bytes = self.spool().bytes();
        self.telemetry.buffered_bytes.set(bytes);
    }

    /// A batch `forward.spoolDir` could not take is held in memory and sent as the others:
    /// counted in `errors`, logged once per run of failures.
    fn note_write_failure(&mut self) {
        match self.spool().take_write_failure() {
            Some(error) => {
                self.telemetry.errors.add(1);
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
            self.telemetry.drop_points(DropReason::BufferFull, dropped.series);
            tracing::warn!(batches = dropped.batches, series = dropped.series, "forward: spool full (forward.spoolBytes): the oldest batches were dropped (dropped_points.buffer_full)");
        }
    }

    /// Sends what waits, oldest first, the way the backend is set up; `flushes` (when given)
    /// are taken into the spool while an answer or the brokers' acknowledgements are awaited,
    /// so a flush that comes meanwhile is on disk, not in the queue, should the process die.
    async fn deliver(&mut self, flushes: Option<&mut Flushes>) {
        let pass = match &self.way {
            Way::Nodes { .. } => self.deliver_to_nodes(flushes).await,
            Way::Kafka { .. } => self.deliver_to_kafka(flushes).await,
        };
        match pass {
            Pass::Done => self.sender.caught_up(),
            Pass::Left { asked } => self.sender.wait(asked),
        }
    }

    /// Each batch to its node (or, once that node has been down for `redirectAfterMs`, the
    /// next one); batches whose node is down stay, in order.
    async fn deliver_to_nodes(&mut self, mut flushes: Option<&mut Flushes>) -> Pass {
        let mut pass = Pass::Done;
        for batch in self.spool().waiting() {
            let Way::Nodes { redirect_after, .. } = &self.way else { unreachable!("posting to nodes") };
            let owner = self.node_of(&batch.part);
            let Some(destination) = self.ring.destination(owner, *redirect_after) else {
                pass.left(None);
                continue;
            };
            let Some(body) = self.body(&batch) else { continue };
            let answered = self.post(destination, body, &mut flushes).await;
            let node = &self.ring.nodes()[destination];
            let verdict = match judge(answered) {
                Verdict::Rejected(reason) => Verdict::Rejected(format!("node {}: {reason}", node.name)),
                Verdict::Retry { reason, after } => {
                    if node.set_up(false) {
                        tracing::warn!(node = %node.name, %reason, "forward: node is down: new flushes go to the other nodes, its batches wait in the spool");
                    }
                    pass.left(after);
                    Verdict::Retry { reason: format!("node {}: {reason}", node.name), after }
                }
                delivered => delivered,
            };
            self.settle(&batch, &verdict);
        }
        pass
    }

    /// Posts `body` to node `destination`, taking the flushes that come meanwhile into the
    /// spool (the client is out of the way while its request is in flight).
    async fn post(
        &mut self,
        destination: usize,
        body: bytes::Bytes,
        flushes: &mut Option<&mut Flushes>,
    ) -> Result<crate::http_client::Answer, String> {
        let Way::Nodes { clients, .. } = &mut self.way else { unreachable!("posting to nodes") };
        let mut client = clients[destination].take().unwrap_or_else(|| unreachable!("one request at a time"));
        let request = async move {
            let answered = client.send(hyper::Method::POST, body).await;
            (client, answered)
        };
        let (client, answered) = self.taking_flushes_while(request, flushes).await;
        let Way::Nodes { clients, .. } = &mut self.way else { unreachable!("posting to nodes") };
        clients[destination] = Some(client);
        answered
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

    /// Produces what waits, oldest first, each batch to the partition it was cut for, up to
    /// [`KAFKA_IN_FLIGHT`] at once, then waits for the brokers' acknowledgements; a batch they
    /// did not take stays, in order. True when some are left.
    async fn deliver_to_kafka(&mut self, mut flushes: Option<&mut Flushes>) -> Pass {
        let Way::Kafka { timeout, .. } = &self.way else { unreachable!("producing to Kafka") };
        let wait_until = self.stop_deadline.unwrap_or_else(|| Instant::now() + *timeout + Duration::from_secs(5));
        let mut produced = Vec::new();
        let mut pass = Pass::Done;
        for batch in self.spool().waiting().into_iter().take(KAFKA_IN_FLIGHT) {
            let partition = self.node_of(&batch.part);
            let Some(body) = self.body(&batch) else { continue };
            let Way::Kafka { producer, .. } = &self.way else { unreachable!("producing to Kafka") };
            match producer.produce(partition, &batch.part, &body) {
                Ok(acknowledged) => produced.push((batch, acknowledged)),
                Err(reason) => {
                    self.settle(&batch, &kafka_retry(reason));
                    pass.left(None);
                    break;
                }
            }
        }
        for (batch, acknowledged) in produced {
            let acknowledged = tokio::time::timeout_at(wait_until, acknowledged);
            let verdict = match self.taking_flushes_while(acknowledged, &mut flushes).await {
                Ok(Ok(())) => Verdict::Delivered { rejected: 0, reason: None },
                Ok(Err(super::kafka::Refused::ForGood(reason))) => Verdict::Rejected(reason),
                Ok(Err(super::kafka::Refused::Retry(reason))) => kafka_retry(reason),
                Err(_) => kafka_retry("no acknowledgement from the brokers in time".into()),
            };
            if !self.settle(&batch, &verdict) {
                pass.left(None);
            }
        }
        pass
    }

    /// A spooled batch's body; `None` (counted, logged) when it cannot be read or is damaged.
    fn body(&mut self, batch: &Waiting) -> Option<bytes::Bytes> {
        match self.spool().body(batch) {
            Ok(body) => Some(body),
            Err(error) if error.kind() == std::io::ErrorKind::InvalidData => {
                tracing::error!(%error, sequence = batch.sequence, series = batch.series, "forward: a spooled batch was damaged on disk: set aside as .corrupt, not sent (dropped_points.corrupt)");
                self.telemetry.errors.add(1);
                self.telemetry.drop_points(DropReason::Corrupt, batch.series);
                self.spool().set_aside(batch.sequence);
                None
            }
            Err(error) => {
                tracing::error!(%error, "forward: a spooled batch cannot be read: dropped (dropped_points.rejected)");
                self.telemetry.drop_points(DropReason::Rejected, batch.series);
                self.remove(batch.sequence);
                None
            }
        }
    }

    /// Counts what became of `batch` (its series as points) and removes it from the spool
    /// unless it waits for a retry; true when it is gone.
    fn settle(&mut self, batch: &Waiting, verdict: &Verdict) -> bool {
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
        self.telemetry.buffered_bytes.set(bytes);
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

/// Asks the brokers for the topic's partition count (flushes meanwhile wait, bounded by
/// `forward.spoolBytes`), then runs a delivery that cuts by the partitions.
async fn run_on_kafka(
    mut spool: Spool,
    settings: Arc<CutSettings>,
    telemetry: Arc<SinkTelemetry>,
    (producer, timeout): (super::kafka::Producer, Duration),
    mut flushes: Flushes,
) {
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
    let mut delivery = DeliveryParts { spool, settings, telemetry }.deliver(ring, Way::Kafka { producer, timeout });
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
async fn check_partitions(producer: super::kafka::Producer, remembered: usize, dir: Option<std::path::PathBuf>) {
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
    producer: &super::kafka::Producer,
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
            Way::Kafka { .. } => format!("{} (kafka)", self.telemetry.sink),
        };
        Delivery {
            ring,
            way,
            spool: Some(self.spool),
            settings: self.settings,
            sender: Sender::new(name, SENDER_STEPS, self.telemetry.clone()),
            telemetry: self.telemetry,
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

/// A batch the brokers did not take, to be produced again.
fn kafka_retry(reason: String) -> Verdict {
    Verdict::Retry { reason, after: None }
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
mod judge_tests {
    use super::*;
    use crate::http_client::Answer;

    #[test]
    fn refusals_of_the_request_keep_the_batch() {
        let answer = |status| Ok(Answer { status, body: bytes::Bytes::new(), retry_after: None });
        let cases = [
            (200, "delivered"),
            (400, "rejected"),
            (413, "rejected"),
            (401, "retry"),
            (403, "retry"),
            (408, "retry"),
            (415, "retry"),
            (503, "retry"),
            (429, "retry"),
        ];
        for (status, want) in cases {
            let got = match judge(answer(status)) {
                Verdict::Delivered { .. } => "delivered",
                Verdict::Rejected(_) => "rejected",
                Verdict::Retry { .. } => "retry",
            };
            assert_eq!(got, want, "{status}");
        }
        assert!(matches!(judge(Err("refused".into())), Verdict::Retry { .. }));
        let busy = Answer { status: 503, body: bytes::Bytes::new(), retry_after: Some(Duration::from_secs(1)) };
        assert!(
            matches!(judge(Ok(busy)), Verdict::Retry { after: Some(after), .. } if after == Duration::from_secs(1)),
            "a global past global.maxBytesInFlight says when to come back"
        );
    }

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

/// Flushes that came before the topic's partitions were known, bounded in bytes.
#[derive(Default)]
struct HeldFlushes {
    snapshots: std::collections::VecDeque<Arc<Snapshot>>,
    bytes: u64,
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

/// The series a flush holds (what forward counts its points in).
fn series_in(snapshot: &Snapshot) -> u64 {
    (snapshot.counters.len() + snapshot.timers.len() + snapshot.gauges.len() + snapshot.sets.len()) as u64
}
