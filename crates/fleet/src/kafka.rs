//! Forwarding through Kafka (`forward.kafka`, `global.kafka`): the settings both sides share
//! and the client configuration librdkafka is given.
//!
//! A local produces each flush's batches (the forward format, unchanged) to one topic: the
//! series are cut into one part per partition by rendezvous hashing of their keys over the
//! partitions' numbers (`score(p, key) = fmix64(fnv1a64(key) XOR fnv1a64(decimal p))`, the
//! highest score owns the key, as ring.rs does for HTTP nodes), so every local puts a series
//! in the same partition and the global that owns the partition merges all of it. Globals
//! consume the topic as one consumer group (global/kafka.rs); another group (another
//! datacenter) receives every batch again.

use std::path::PathBuf;
use std::time::Duration;

use rdkafka::ClientConfig;
use serde_json::{json, Value};

/// The default `forward.kafka.maxMessageBytes`: the brokers' own default `message.max.bytes`.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1_000_000;

/// The default `global.kafka.sessionTimeoutMs`: Kafka's own (45 s), above a broker's failover
/// (`broker.session.timeout.ms` 9 s, then the election): a group whose coordinator moves keeps
/// its members, whose commits then go through once it has moved. Shorter, the members lose
/// their sessions in the move, their last commits are refused, and the batches they flushed
/// since are read again by the next owners.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(45);

/// How often a global tells the group it is alive: a quarter of the session, at most 3 s
/// (Kafka's default), so that it learns of a rebalance soon.
fn heartbeat_interval(session: Duration) -> Duration {
    (session / 4).clamp(Duration::from_millis(100), Duration::from_secs(3))
}

/// The shortest time a transaction may stay open before the brokers abort it
/// (`transaction.timeout.ms`; the delivery timeout when that is longer).
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// How a producer waits for the brokers' acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// Every in-sync replica (`all`, the default): with `min.insync.replicas` 2, a batch
    /// survives the loss of a broker. The producer is idempotent.
    All,
    /// The partition's leader alone (`1`).
    Leader,
}

/// SASL: how a client authenticates to the brokers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sasl {
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: String,
    /// The user name.
    pub username: String,
    /// A file holding the password (its first line).
    pub password_file: PathBuf,
}

/// TLS to the brokers: a CA of its own (else the system's) and a client certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KafkaTls {
    /// `caFile`: PEM CA certificates the brokers are checked against.
    pub ca: Option<PathBuf>,
    /// `certFile`: this client's certificate (PEM), for brokers that ask for one.
    pub cert: Option<PathBuf>,
    /// `keyFile`: its private key (PEM).
    pub key: Option<PathBuf>,
}

/// What both a producing local and a consuming global are told about the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaSettings {
    /// `brokers` (required): `host:port` of at least one broker; the rest are learnt from it.
    pub brokers: Vec<String>,
    /// `topic` (`histd-forward`): where batches go.
    pub topic: String,
    /// `clientId` (`histd`): this client's name in the brokers' logs and quotas.
    pub client_id: String,
    /// `tls` (none: plaintext): TLS to the brokers.
    pub tls: Option<KafkaTls>,
    /// `sasl` (none): SASL authentication.
    pub sasl: Option<Sasl>,
}

/// The producer's own settings (`forward.kafka`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerSettings {
    /// The cluster.
    pub cluster: KafkaSettings,
    /// `acks` (`all`).
    pub acks: Acks,
    /// `compression` (`none`: batches are snappy-compressed already): `none`, `gzip`,
    /// `snappy`, `lz4` or `zstd`, of the brokers' record batches.
    pub compression: String,
    /// `maxMessageBytes` (1000000): the largest message the topic takes (the brokers'
    /// `message.max.bytes`, the topic's `max.message.bytes`); parts are cut to fit.
    pub max_message_bytes: usize,
    /// `deliveryTimeoutMs` (30000): how long librdkafka tries one batch before handing it
    /// back; it then waits in the spool and is produced again.
    pub delivery_timeout: Duration,
    /// `transactions` (`true` with `acks: 'all'`) and `transactionalId`: the batches of each
    /// send are produced in one Kafka transaction under this id, so that a copy the brokers
    /// took without the local hearing of it (a dying leader, a local killed mid-send) is
    /// aborted, never read by a global (they read committed records only). `None`: off. The
    /// id is unique in the fleet and the same across restarts: `histd-<forward.source>` (and
    /// `-<path name>` in `forward.paths`) unless given; a local's start fences the run before.
    pub transactional_id: Option<String>,
    /// `signingKeyFile` (none): a key each batch is signed with (an HMAC-SHA256 in the
    /// message's `histd-signature` header), so that the globals (`global.kafka.signingKeys`)
    /// know it came from this local (signing.rs).
    pub signing_key_file: Option<std::path::PathBuf>,
}

/// What `transactionalId` becomes when not given: the local's source, and the path's name.
pub fn default_transactional_id(source: &str, path: Option<&str>) -> String {
    match path {
        Some(name) => format!("histd-{source}-{name}"),
        None => format!("histd-{source}"),
    }
}

/// The consumer's own settings (`global.kafka`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerSettings {
    /// The cluster.
    pub cluster: KafkaSettings,
    /// `group` (`histd-global`): the consumer group; the globals of one datacenter share one,
    /// each group receives every batch.
    pub group: String,
    /// `sessionTimeoutMs` ([`DEFAULT_SESSION_TIMEOUT`]): how long a global may be silent before
    /// the group gives its partitions to the others.
    pub session_timeout: Duration,
    /// `skipUnreadableAfterMs` ([`DEFAULT_SKIP_UNREADABLE_AFTER`]; 0: never): how long a
    /// partition stays stopped at a record batch the client cannot read before that record is
    /// read past (counted, logged, named in `/health`). A batch in a codec this histd lacks is
    /// never skipped.
    pub skip_unreadable_after: Option<Duration>,
    /// `signingKeys` (none): a file of `SOURCE KEY` lines; when given, a batch is merged only
    /// when signed with the key of the source it names (signing.rs), and identities are
    /// remembered per source.
    pub signing_keys: Option<std::path::PathBuf>,
    /// `instanceId` (none: the one kept in the data directory, see `global/rejoin.rs`): this
    /// global's static membership of the group (Kafka's `group.instance.id`, KIP-345), so that
    /// restarted within `sessionTimeoutMs` it is given its own partitions back at once and the
    /// rest of the group never stops. Unique in the group.
    pub instance_id: Option<String>,
}

/// The default `global.kafka.skipUnreadableAfterMs`: well past a broker's failover, so a
/// partition whose leader is moving is never taken for one stopped at a damaged batch.
pub const DEFAULT_SKIP_UNREADABLE_AFTER: Duration = Duration::from_secs(120);

/// How long a partition must stall before a global takes it for stopped at a batch it cannot
/// read (global/unreadable.rs), and so the shortest `skipUnreadableAfterMs`.
pub const UNREADABLE_AFTER: Duration = Duration::from_secs(20);

impl KafkaSettings {
    /// librdkafka's settings for this cluster; reads the SASL password file.
    pub fn client_config(&self) -> Result<ClientConfig, String> {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", self.brokers.join(",")).set("client.id", &self.client_id);
        let protocol = match (&self.tls, &self.sasl) {
            (None, None) => "plaintext",
            (Some(_), None) => "ssl",
            (None, Some(_)) => "sasl_plaintext",
            (Some(_), Some(_)) => "sasl_ssl",
        };
        config.set("security.protocol", protocol);
        if let Some(tls) = &self.tls {
            let files =
                [("ssl.ca.location", &tls.ca), ("ssl.certificate.location", &tls.cert), ("ssl.key.location", &tls.key)];
            for (name, file) in files {
                if let Some(file) = file {
                    config.set(name, file.display().to_string());
                }
            }
        }
        if let Some(sasl) = &self.sasl {
            let text = crate::secret_file::read(&sasl.password_file, "sasl.passwordFile")?;
            let password = text.lines().next().unwrap_or_default().trim_end();
            config
                .set("sasl.mechanisms", &sasl.mechanism)
                .set("sasl.username", &sasl.username)
                .set("sasl.password", password);
        }
        Ok(config)
    }

    fn effective(&self) -> Value {
        json!({
            "brokers": self.brokers, "topic": self.topic, "clientId": self.client_id,
            "tls": self.tls.as_ref().map(|tls| json!({ "caFile": tls.ca, "certFile": tls.cert, "keyFile": tls.key })),
            "sasl": self.sasl.as_ref().map(|sasl| json!({ "mechanism": sasl.mechanism, "username": sasl.username, "passwordFile": sasl.password_file })),
        })
    }
}

impl ProducerSettings {
    /// The producer's librdkafka settings.
    pub fn client_config(&self) -> Result<ClientConfig, String> {
        let mut config = self.cluster.client_config()?;
        let (acks, idempotent) = match self.acks {
            Acks::All => ("all", "true"),
            Acks::Leader => ("1", "false"),
        };
        config
            .set("acks", acks)
            .set("enable.idempotence", idempotent)
            .set("compression.type", &self.compression)
            .set("message.max.bytes", (self.max_message_bytes + 1024).to_string())
            .set("delivery.timeout.ms", self.delivery_timeout.as_millis().to_string())
            .set("linger.ms", "5");
        if let Some(id) = &self.transactional_id {
            // librdkafka refuses a delivery timeout longer than the transaction's.
            let transaction_timeout = self.delivery_timeout.max(TRANSACTION_TIMEOUT);
            config
                .set("transactional.id", id)
                .set("transaction.timeout.ms", transaction_timeout.as_millis().to_string());
        }
        Ok(config)
    }

    /// The largest part cut before compression so that it fits in one message (snappy's
    /// worst case is 1/6 larger, plus the format's frame).
    pub fn max_part_bytes(&self) -> usize {
        (self.max_message_bytes.saturating_sub(256) * 6 / 7).max(16 * 1024)
    }

    /// The settings as `histd check-config` prints them.
    pub fn effective(&self) -> Value {
        let mut value = self.cluster.effective();
        value["acks"] = json!(if self.acks == Acks::All { "all" } else { "1" });
        value["compression"] = json!(self.compression);
        value["maxMessageBytes"] = json!(self.max_message_bytes);
        value["deliveryTimeoutMs"] = json!(self.delivery_timeout.as_millis() as u64);
        value["transactions"] = json!(self.transactional_id.is_some());
        value["transactionalId"] = json!(self.transactional_id);
        value["signingKeyFile"] = json!(self.signing_key_file);
        value
    }
}

impl ConsumerSettings {
    /// The consumer's librdkafka settings: offsets committed by histd alone, after the flush
    /// that carried their batches; a new group starts at the oldest batch kept.
    pub fn client_config(&self) -> Result<ClientConfig, String> {
        let mut config = self.cluster.client_config()?;
        config
            .set("group.id", &self.group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("session.timeout.ms", self.session_timeout.as_millis().to_string())
            .set("heartbeat.interval.ms", heartbeat_interval(self.session_timeout).as_millis().to_string())
            .set("enable.partition.eof", "false")
            // Batches a local's aborted transaction holds are never merged.
            .set("isolation.level", "read_committed");
        Ok(config)
    }

    /// The settings as `histd check-config` prints them.
    pub fn effective(&self) -> Value {
        let mut value = self.cluster.effective();
        value["group"] = json!(self.group);
        value["sessionTimeoutMs"] = json!(self.session_timeout.as_millis() as u64);
        value["skipUnreadableAfterMs"] = json!(self.skip_unreadable_after.map_or(0, |after| after.as_millis() as u64));
        value["signingKeys"] = json!(self.signing_keys);
        value["instanceId"] = json!(self.instance_id);
        value
    }
}

/// librdkafka's own log and errors, at debug level: histd logs a run of failures once itself.
/// What only a person can mend (the brokers refused the credentials, or TLS failed: a wrong
/// password, CA or certificate) is logged once as an error, naming the key to check.
#[derive(Debug, Default)]
pub struct Quiet {
    told: BrokerErrors,
}

impl rdkafka::ClientContext for Quiet {
    fn log(&self, _level: rdkafka::config::RDKafkaLogLevel, facility: &str, message: &str) {
        tracing::debug!(facility, message, "librdkafka");
    }

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        self.told.note(&error, reason, "forward.kafka");
    }
}

/// The broker errors a person must mend, each logged once per client.
#[derive(Debug, Default)]
pub struct BrokerErrors {
    authentication: std::sync::atomic::AtomicBool,
    tls: std::sync::atomic::AtomicBool,
}

impl BrokerErrors {
    /// Logs `error` once as an error when the brokers refused the credentials or TLS failed
    /// (`section`: the config section to check); at debug level otherwise.
    pub fn note(&self, error: &rdkafka::error::KafkaError, reason: &str, section: &str) {
        use std::sync::atomic::Ordering;
        let code = error.rdkafka_error_code();
        let (told, key) = if code == Some(rdkafka::types::RDKafkaErrorCode::Authentication) {
            (&self.authentication, "sasl (username, passwordFile, mechanism)")
        } else if reason.contains("SSL") || reason.contains("certificate") {
            (&self.tls, "tls (caFile, certFile, keyFile)")
        } else {
            tracing::debug!(%error, reason, "librdkafka");
            return;
        };
        if told.swap(true, Ordering::Relaxed) {
            tracing::debug!(%error, reason, "librdkafka");
        } else {
            tracing::error!(reason, "{section}: the brokers refused this client: check {section}.{key}");
        }
    }
}

/// Why the brokers did not take a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// For good (too large for the topic, malformed): dropped and counted.
    ForGood(String),
    /// For now: it waits in the spool and is produced again.
    Retry(String),
}

/// Why a transaction's step failed, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransactionFailed {
    /// Try the step again (no answer in time: a commit may have gone through, and asking
    /// again tells).
    Retry(String),
    /// The transaction must be aborted; its batches go again in the next.
    Abort(String),
    /// This producer cannot be used any more (another run with the same `transactionalId`
    /// fenced it): a new one is made, whose start aborts what this one left open.
    Fatal(String),
}

impl TransactionFailed {
    /// What an error of a transactional call means.
    fn of(error: &rdkafka::error::KafkaError) -> TransactionFailed {
        let reason = error.to_string();
        match error {
            rdkafka::error::KafkaError::Transaction(error) if error.is_fatal() => TransactionFailed::Fatal(reason),
            rdkafka::error::KafkaError::Transaction(error) if error.txn_requires_abort() => {
                TransactionFailed::Abort(reason)
            }
            _ => TransactionFailed::Retry(reason),
        }
    }

    /// Its reason.
    pub fn reason(&self) -> &str {
        match self {
            TransactionFailed::Retry(reason) | TransactionFailed::Abort(reason) | TransactionFailed::Fatal(reason) => {
                reason
            }
        }
    }
}

/// A producer to `forward.kafka.topic`.
#[derive(Clone)]
pub struct Producer {
    inner: rdkafka::producer::FutureProducer<Quiet>,
    topic: String,
    /// Whether its batches go in transactions (`transactionalId` set).
    transactional: bool,
    /// What its batches are signed with (`signingKeyFile`).
    signing: Option<crate::signing::SigningKey>,
}

impl Producer {
    /// A producer with `settings` (it connects in the background).
    pub fn new(settings: &ProducerSettings) -> Result<Producer, String> {
        let inner =
            settings.client_config()?.create_with_context(Quiet::default()).map_err(|error| error.to_string())?;
        let transactional = settings.transactional_id.is_some();
        let signing = settings.signing_key_file.as_deref().map(crate::signing::SigningKey::read).transpose()?;
        Ok(Producer { inner, topic: settings.cluster.topic.clone(), transactional, signing })
    }

    /// Whether its batches go in transactions.
    pub fn transactional(&self) -> bool {
        self.transactional
    }

    /// Readies transactions (once, before the first): the brokers fence an earlier producer
    /// with this `transactionalId` and abort what it left open.
    pub async fn init_transactions(&self, timeout: Duration) -> Result<(), TransactionFailed> {
        self.blocking(move |producer| rdkafka::producer::Producer::init_transactions(producer, timeout)).await
    }

    /// Opens a transaction (a local step: it asks the brokers nothing).
    pub fn begin(&self) -> Result<(), TransactionFailed> {
        use rdkafka::producer::Producer as _;
        self.inner.begin_transaction().map_err(|error| TransactionFailed::of(&error))
    }

    /// Commits the open transaction: its batches become readable to the globals.
    pub async fn commit(&self, timeout: Duration) -> Result<(), TransactionFailed> {
        self.blocking(move |producer| rdkafka::producer::Producer::commit_transaction(producer, timeout)).await
    }

    /// Aborts the open transaction: its batches are never read.
    pub async fn abort(&self, timeout: Duration) -> Result<(), TransactionFailed> {
        self.blocking(move |producer| rdkafka::producer::Producer::abort_transaction(producer, timeout)).await
    }

    /// Runs a transactional call, which blocks, on a blocking thread.
    async fn blocking<F>(&self, call: F) -> Result<(), TransactionFailed>
    where
        F: FnOnce(&rdkafka::producer::FutureProducer<Quiet>) -> rdkafka::error::KafkaResult<()> + Send + 'static,
    {
        let producer = self.inner.clone();
        match tokio::task::spawn_blocking(move || call(&producer)).await {
            Ok(result) => result.map_err(|error| TransactionFailed::of(&error)),
            Err(error) => Err(TransactionFailed::Retry(error.to_string())),
        }
    }

    /// The topic's partition count, as the brokers tell it.
    pub async fn partitions(&self) -> Result<usize, String> {
        let producer = self.clone();
        let asked = tokio::task::spawn_blocking(move || {
            use rdkafka::producer::Producer as _;
            let metadata = producer
                .inner
                .client()
                .fetch_metadata(Some(&producer.topic), Duration::from_secs(5))
                .map_err(|error| error.to_string())?;
            let topic = metadata.topics().first().ok_or("the brokers know no such topic")?;
            if let Some(error) = topic.error() {
                return Err(format!("topic {}: {}", producer.topic, rdkafka::types::RDKafkaErrorCode::from(error)));
            }
            match topic.partitions().len() {
                0 => Err(format!("topic {} has no partitions", producer.topic)),
                count => Ok(count),
            }
        });
        asked.await.map_err(|error| error.to_string())?
    }

    /// Queues `body` for `partition` (its record key `key`); the future answers once the
    /// brokers acknowledged it (with `acks`) or librdkafka gave up.
    pub fn produce(
        &self,
        partition: usize,
        key: &str,
        body: &[u8],
    ) -> Result<impl std::future::Future<Output = Result<(), Refused>> + use<>, String> {
        let signature = self.signing.as_ref().map(|key| key.sign(body));
        let mut record =
            rdkafka::producer::FutureRecord::to(&self.topic).partition(partition as i32).key(key).payload(body);
        if let Some(signature) = &signature {
            let header = rdkafka::message::Header { key: crate::signing::HEADER, value: Some(signature) };
            record = record.headers(rdkafka::message::OwnedHeaders::new().insert(header));
        }
        let delivery = self.inner.send_result(record).map_err(|(error, _)| error.to_string())?;
        Ok(async move {
            match delivery.await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err((error, _))) => Err(judge(&error)),
                Err(_) => Err(Refused::Retry("the producer stopped".to_string())),
            }
        })
    }
}

/// What a producer's error means for the batch.
fn judge(error: &rdkafka::error::KafkaError) -> Refused {
    use rdkafka::types::RDKafkaErrorCode as Code;
    match error.rdkafka_error_code() {
        Some(Code::MessageSizeTooLarge | Code::InvalidMessageSize | Code::InvalidMessage | Code::InvalidRecord) => {
            Refused::ForGood(error.to_string())
        }
        _ => Refused::Retry(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_global_beats_a_quarter_of_its_session_and_at_most_every_3_s() {
        let cases = [(45_000, 3_000), (10_000, 2_500), (1_000, 250), (200, 100)];
        for (session, beat) in cases {
            assert_eq!(heartbeat_interval(Duration::from_millis(session)), Duration::from_millis(beat), "{session} ms");
        }
    }
}
