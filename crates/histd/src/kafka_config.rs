//! Reading the Kafka sections (`forward.kafka`, `global.kafka`) of a config into the fleet's
//! settings ([`fleet::kafka`]): every key checked, each error naming it.

use std::path::PathBuf;
use std::time::Duration;

use fleet::kafka::{
    Acks, ConsumerSettings, KafkaSettings, KafkaTls, ProducerSettings, Sasl, DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_SESSION_TIMEOUT, DEFAULT_SKIP_UNREADABLE_AFTER, UNREADABLE_AFTER,
};
use serde_json::{json, Value};

use crate::config_reader::keys::{histd, KeyDoc};
use crate::config_reader::{ConfigError, Reader};

/// Reads the cluster's keys of `section` (`forward.kafka` or `global.kafka`).
fn cluster(section: &Reader<'_>) -> Result<KafkaSettings, ConfigError> {
    let mut brokers = Vec::new();
    for (index, broker) in section.array("brokers")?.iter().enumerate() {
        let key = format!("brokers[{index}]");
        let text =
            broker.as_str().ok_or_else(|| section.error(&key, format!("expected \"host:port\", got {broker}")))?;
        let port = text
            .rsplit_once(':')
            .and_then(|(host, port)| (!host.is_empty()).then(|| port.parse::<u16>().ok()).flatten());
        if port.is_none_or(|port| port == 0) {
            return Err(section.error(&key, format!("'{text}' is not host:port")));
        }
        brokers.push(text.to_string());
    }
    if brokers.is_empty() {
        return Err(section.error("brokers", "at least one broker is needed: [\"kafka1:9092\"]"));
    }
    let topic = section.string("topic")?.unwrap_or_else(|| "histd-forward".to_string());
    let legal = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    if topic.is_empty() || topic.len() > 249 || !topic.bytes().all(legal) {
        return Err(section.error("topic", format!("'{topic}' is not a Kafka topic name ([A-Za-z0-9._-], 1 to 249)")));
    }
    let tls = match section.raw("tls") {
        None | Some(Value::Bool(false)) => None,
        Some(Value::Bool(true)) => Some(KafkaTls::default()),
        Some(_) => {
            let tls = section.object("tls")?;
            let file = |key: &str| tls.string(key).map(|file| file.map(PathBuf::from));
            let (ca, cert, key) = (file("caFile")?, file("certFile")?, file("keyFile")?);
            if cert.is_some() != key.is_some() {
                return Err(tls.error("certFile", "a client certificate needs both certFile and keyFile (PEM)"));
            }
            Some(KafkaTls { ca, cert, key })
        }
    };
    let sasl = match section.raw("sasl") {
        None => None,
        Some(_) => {
            let sasl = section.object("sasl")?;
            let mechanism = sasl.string("mechanism")?.unwrap_or_else(|| "SCRAM-SHA-512".to_string());
            if !["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"].contains(&mechanism.as_str()) {
                return Err(
                    sasl.error("mechanism", format!("'{mechanism}': expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"))
                );
            }
            let username = sasl.string("username")?.ok_or_else(|| sasl.error("username", "SASL needs a user name"))?;
            let password_file = sasl
                .string("passwordFile")?
                .map(PathBuf::from)
                .ok_or_else(|| sasl.error("passwordFile", "SASL needs a file holding the password"))?;
            Some(Sasl { mechanism, username, password_file })
        }
    };
    let client_id = section.string("clientId")?.unwrap_or_else(|| "histd".to_string());
    Ok(KafkaSettings { brokers, topic, client_id, tls, sasl })
}

/// Reads `forward.kafka`.
pub fn producer(section: &Reader<'_>) -> Result<ProducerSettings, ConfigError> {
    let acks = match section.raw("acks") {
        None => Acks::All,
        Some(Value::String(all)) if all == "all" => Acks::All,
        Some(value) if value == &json!(-1) || value == &json!("-1") => Acks::All,
        Some(value) if value == &json!(1) || value == &json!("1") => Acks::Leader,
        Some(value) => return Err(section.error("acks", format!("expected \"all\" or 1, got {value}"))),
    };
    let compression = section.string("compression")?.unwrap_or_else(|| "none".to_string());
    if !["none", "gzip", "snappy", "lz4", "zstd"].contains(&compression.as_str()) {
        return Err(section.error("compression", format!("'{compression}': expected none, gzip, snappy, lz4 or zstd")));
    }
    let transactions = section.bool("transactions", acks == Acks::All)?;
    if transactions && acks != Acks::All {
        return Err(section.error("transactions", "Kafka transactions need acks: 'all' (or transactions: false)"));
    }
    let transactional_id = section.string("transactionalId")?;
    if transactional_id.as_ref().is_some_and(|id| id.is_empty() || id.len() > 249) {
        return Err(section.error("transactionalId", "expected a name of 1 to 249 bytes"));
    }
    Ok(ProducerSettings {
        cluster: cluster(section)?,
        acks,
        compression,
        max_message_bytes: section.whole("maxMessageBytes", DEFAULT_MAX_MESSAGE_BYTES as u64, 65_536)? as usize,
        delivery_timeout: section.milliseconds("deliveryTimeoutMs", Duration::from_secs(30))?,
        // An empty id is filled in by `forward` once the source and the path are known.
        transactional_id: transactions.then(|| transactional_id.unwrap_or_default()),
        signing_key_file: section.string("signingKeyFile")?.map(std::path::PathBuf::from),
    })
}

/// Why `id` cannot be a `group.instance.id` (Kafka's rule for names), if it cannot.
pub fn not_an_instance_id(id: &str) -> Option<String> {
    let legal = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    (id.is_empty() || id.len() > 249 || !id.bytes().all(legal))
        .then(|| format!("'{}' is not an instance id ([A-Za-z0-9._-], 1 to 249)", crate::printable::escaped(id)))
}

/// Reads `global.kafka`.
pub fn consumer(section: &Reader<'_>) -> Result<ConsumerSettings, ConfigError> {
    let group = section.string("group")?.unwrap_or_else(|| "histd-global".to_string());
    if group.is_empty() {
        return Err(section.error("group", "a consumer group's name is not empty"));
    }
    let session_timeout = section.milliseconds("sessionTimeoutMs", DEFAULT_SESSION_TIMEOUT)?;
    if session_timeout < Duration::from_secs(1) {
        return Err(section.error("sessionTimeoutMs", "at least 1000"));
    }
    let skip_unreadable_after = section.milliseconds("skipUnreadableAfterMs", DEFAULT_SKIP_UNREADABLE_AFTER)?;
    if !skip_unreadable_after.is_zero() && skip_unreadable_after < UNREADABLE_AFTER {
        return Err(section.error("skipUnreadableAfterMs", "0 (never) or at least 20000"));
    }
    let skip_unreadable_after = (!skip_unreadable_after.is_zero()).then_some(skip_unreadable_after);
    let signing_keys = section.string("signingKeys")?.map(std::path::PathBuf::from);
    let instance_id = section.string("instanceId")?;
    if let Some(why) = instance_id.as_deref().and_then(not_an_instance_id) {
        return Err(section.error("instanceId", why));
    }
    Ok(ConsumerSettings {
        cluster: cluster(section)?,
        group,
        session_timeout,
        skip_unreadable_after,
        signing_keys,
        instance_id,
    })
}

/// The cluster's keys, the same for a local (`forward.kafka`, `forward.paths[].kafka`) and a
/// global (`global.kafka`), for README's table (`config/keys.rs`).
pub const CLUSTER_KEYS: &[KeyDoc] = &[
    histd(&["forward.kafka.brokers", "global.kafka.brokers", "forward.paths[].kafka.brokers"], "none (required to use Kafka)", "`[\"host:port\", ...]`: some of the Kafka cluster's brokers. With `forward.kafka` a local produces its batches to the topic instead of posting them to `forward.nodes`; with `global.kafka` a global consumes them"),
    histd(&["forward.kafka.topic", "global.kafka.topic", "forward.paths[].kafka.topic"], "`histd-forward`", "the topic. Each series goes to one partition: rendezvous hashing of its key over the partitions' numbers (docs/forward-format.md); give the topic replication factor 3 and `min.insync.replicas` 2. Partitions added later are used by a local from its next start"),
    histd(&["forward.kafka.clientId", "global.kafka.clientId", "forward.paths[].kafka.clientId"], "`histd`", "the client's name in the brokers' logs and quotas"),
    histd(&["forward.kafka.tls", "global.kafka.tls", "forward.paths[].kafka.tls"], "none (plaintext)", "`true`: TLS to the brokers, checked against the system's CAs; an object: with the files below"),
    histd(&["forward.kafka.tls.caFile", "global.kafka.tls.caFile", "forward.paths[].kafka.tls.caFile"], "the system's CAs", "PEM CA certificates the brokers are checked against"),
    histd(&["forward.kafka.tls.certFile", "forward.kafka.tls.keyFile", "global.kafka.tls.certFile", "global.kafka.tls.keyFile", "forward.paths[].kafka.tls.certFile", "forward.paths[].kafka.tls.keyFile"], "none", "a client certificate and its key (PEM), for brokers that ask for one (both or neither)"),
    histd(&["forward.kafka.sasl", "global.kafka.sasl", "forward.paths[].kafka.sasl"], "none", "SASL authentication to the brokers (over TLS when `tls` is set)"),
    histd(&["forward.kafka.sasl.mechanism", "global.kafka.sasl.mechanism", "forward.paths[].kafka.sasl.mechanism"], "`SCRAM-SHA-512`", "`PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`"),
    histd(&["forward.kafka.sasl.username", "global.kafka.sasl.username", "forward.kafka.sasl.passwordFile", "global.kafka.sasl.passwordFile", "forward.paths[].kafka.sasl.username", "forward.paths[].kafka.sasl.passwordFile"], "none (required with `sasl`)", "the user, and a file whose first line is the password"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config_reader::object_literal;

    fn read(text: &str) -> Result<ProducerSettings, String> {
        let object = object_literal(text).map_err(|e| e.to_string())?;
        let keys = Default::default();
        let root = Reader::root(&object, &keys);
        producer(&root).map_err(|e| e.to_string())
    }

    #[test]
    fn settings_and_their_errors() {
        let settings = read("{ brokers: ['127.0.0.1:9092'] }").unwrap();
        assert_eq!((settings.acks, settings.cluster.topic.as_str()), (Acks::All, "histd-forward"));
        assert_eq!(settings.cluster.client_config().unwrap().get("security.protocol"), Some("plaintext"));
        let cases = [
            ("{ }", "brokers"),
            ("{ brokers: ['kafka'] }", "host:port"),
            ("{ brokers: ['k:9092'], topic: 'a b' }", "topic name"),
            ("{ brokers: ['k:9092'], acks: 0 }", "acks"),
            ("{ brokers: ['k:9092'], compression: 'brotli' }", "compression"),
            ("{ brokers: ['k:9092'], tls: { certFile: 'c.pem' } }", "keyFile"),
            ("{ brokers: ['k:9092'], sasl: { username: 'u' } }", "passwordFile"),
            ("{ brokers: ['k:9092'], sasl: { mechanism: 'GSSAPI', username: 'u', passwordFile: 'p' } }", "SCRAM"),
            ("{ brokers: ['k:9092'], acks: 1, transactions: true }", "acks: 'all'"),
            ("{ brokers: ['k:9092'], transactionalId: '' }", "transactionalId"),
            ("{ brokers: ['k:9092'], transactions: 'yes' }", "transactions"),
        ];
        for (text, expected) in cases {
            let error = read(text).expect_err(text);
            assert!(error.contains(expected), "{text}: {error}");
        }
        let tls = read("{ brokers: ['k:9092'], tls: true, acks: 1 }").unwrap();
        let config = tls.client_config().unwrap();
        assert_eq!((config.get("security.protocol"), config.get("enable.idempotence")), (Some("ssl"), Some("false")));
        assert_eq!((tls.transactional_id, config.get("transactional.id")), (None, None), "acks 1: no transactions");
        // (settings, transactional.id, transaction.timeout.ms)
        let cases = [
            ("{ brokers: ['k:9092'], transactionalId: 't' }", Some("t"), Some("60000")),
            ("{ brokers: ['k:9092'], transactionalId: 't', deliveryTimeoutMs: 90000 }", Some("t"), Some("90000")),
            ("{ brokers: ['k:9092'], transactions: false }", None, None),
        ];
        for (text, id, timeout) in cases {
            let config = read(text).unwrap().client_config().unwrap();
            assert_eq!((config.get("transactional.id"), config.get("transaction.timeout.ms")), (id, timeout), "{text}");
        }
    }

    #[test]
    fn a_part_fits_a_message_after_compression() {
        let settings = read("{ brokers: ['k:9092'] }").unwrap();
        let part = settings.max_part_bytes();
        assert!(part + part / 6 + 64 <= settings.max_message_bytes, "{part}");
    }
}
