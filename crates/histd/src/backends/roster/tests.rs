//! What a reload does with each backend's sink: a table of every key of every backend,
//! changed one at a time, against what the key table says (`KeyDoc::on_reload`).

use serde_json::Value;

use super::*;
use crate::config::keys::OnReload;

/// What a reload decides for `backend` when `old` is in force and `new` is read.
fn decision(backend: Backend, old: &Config, new: &Config) -> &'static str {
    decision_for(backend, &backend.identity(old), new)
}

/// What a reload decides for `backend`'s sink started with `running` when `new` is read.
fn decision_for(backend: Backend, running: &SinkIdentity, new: &Config) -> &'static str {
    match decide(backend, Some((running, &Offered::default())), &backend.identity(new), new) {
        None => "kept",
        Some(Reload::Restart) => "restart",
        Some(Reload::Replace) => "replace",
        Some(Reload::InPlace(_)) => "in place",
    }
}

fn config(text: &str) -> Config {
    Config::from_text(text).unwrap_or_else(|error| panic!("{text}: {error:#}"))
}

/// What a reload compares: a changed setting acts on a backend, others do not.
#[test]
fn settings_name_what_a_sink_started_with() {
    let base = config("{ backends: ['graphite', 'forward'], forward: { nodes: ['http://127.0.0.1:1'] } }");
    let cases: &[(&str, &str, &str)] = &[
        ("{ backends: ['graphite'], graphitePort: 2004 }", "graphite", "restart"),
        ("{ backends: ['graphite'], percentThreshold: [50] }", "graphite", "kept"),
        ("{ backends: ['graphite'], histdSelfMetrics: true }", "graphite", "restart"),
        ("{ backends: ['forward'], forward: { nodes: ['http://127.0.0.1:1'] } }", "forward", "kept"),
        ("{ backends: ['forward'], forward: { nodes: ['http://127.0.0.1:2'] } }", "forward", "restart"),
        (
            "{ backends: ['forward'], forward: { nodes: ['http://127.0.0.1:1'] }, timerSampleLimit: 5 }",
            "forward",
            "restart",
        ),
        // A spool directory kept: the old sink stops before the new one opens it.
        ("{ backends: ['forward'], forward: { nodes: ['http://127.0.0.1:1'], spoolDir: '/s' } }", "forward", "restart"),
    ];
    for (text, backend, wanted) in cases {
        assert_eq!(decision(Backend::named(backend).unwrap(), &base, &config(text)), *wanted, "{text}");
    }
    let spooled =
        |nodes: &str, dir: &str| config(&format!("{{ forward: {{ nodes: ['{nodes}'], spoolDir: '{dir}' }} }}"));
    let forward = Backend::named("forward").unwrap();
    assert_eq!(decision(forward, &spooled("http://a:1", "/s"), &spooled("http://b:1", "/s")), "replace");
    assert_eq!(decision(forward, &spooled("http://a:1", "/s"), &spooled("http://a:1", "/t")), "restart");
}

/// A file a sink reads at start rotated in place (same path, new bytes): the sink restarts.
#[test]
fn a_file_rotated_in_place_restarts_the_sink_that_read_it() {
    let dir = std::env::temp_dir().join(format!("histd-rotated-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, "first").unwrap();
    let cases = [
        ("otlp", format!("{{ backends: ['otlp'], otlp: {{ tls: {{ caFile: '{}' }} }} }}", ca.display())),
        ("forward", format!("{{ forward: {{ nodes: ['https://a:1'], tls: {{ caFile: '{}' }} }} }}", ca.display())),
        (
            "prometheus",
            format!(
                "{{ prometheus: {{ remoteWrite: [{{ url: 'https://a:1/w', tls: {{ caFile: '{}' }} }}] }} }}",
                ca.display()
            ),
        ),
    ];
    for (name, text) in &cases {
        let backend = Backend::named(name).unwrap();
        std::fs::write(&ca, "first").unwrap();
        let running = backend.identity(&config(text));
        assert_eq!(decision_for(backend, &running, &config(text)), "kept", "{name}: the same bytes");
        std::fs::write(&ca, "second").unwrap();
        assert_eq!(decision_for(backend, &running, &config(text)), "restart", "{name}: new bytes");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Each backend's config before its keys change, and each key's new value (the first
/// spelling the table gives; one key of a row of several spellings stands for the row).
const BASES: &[(&str, &str)] = &[
    ("graphite", "{ backends: ['graphite'], graphiteHost: '127.0.0.1' }"),
    ("console", "{ backends: ['console'] }"),
    ("repeater", "{ backends: ['repeater'], repeater: [{ host: '127.0.0.1', port: 9 }] }"),
    ("store", "{ backends: ['store'], store: { dataDir: '/histd-a' } }"),
    ("prometheus", "{ backends: ['prometheus'], prometheus: { remoteWrite: [{ url: 'http://127.0.0.1:9/w' }] } }"),
    ("forward", "{ backends: ['forward'], forward: { nodes: ['http://127.0.0.1:1'] } }"),
    ("otlp", "{ backends: ['otlp'] }"),
    ("file", "{ backends: ['file'], file: { name: '/histd-f' } }"),
    ("circonus", "{ backends: ['circonus'], circonus: { url: 'http://127.0.0.1:9/' } }"),
    ("influx", "{ backends: ['influx'], influx: { url: 'http://127.0.0.1:9/write' } }"),
];

/// A key's new value, and the config it changes when not its backend's base: (key, base or
/// "", value).
const CHANGES: &[(&str, &str, &str)] = &[
    ("flush_counts", "", "false"),
    ("graphiteHost", "", "'127.0.0.2'"),
    ("graphitePort", "", "2013"),
    ("graphiteProtocol", "", "'pickle'"),
    ("graphitePicklePort", "{ backends: ['graphite'], graphiteHost: '127.0.0.1', graphiteProtocol: 'pickle' }", "2014"),
    ("graphite.legacyNamespace", "", "false"),
    ("graphite.globalPrefix", "", "'s'"),
    ("graphite.prefixCounter", "", "'c'"),
    ("graphite.prefixTimer", "", "'t'"),
    ("graphite.prefixGauge", "", "'g'"),
    ("graphite.prefixSet", "", "'s'"),
    ("graphite.globalSuffix", "", "'x'"),
    ("graphite.retryBufferBytes", "", "2000000"),
    ("console.prettyprint", "", "true"),
    ("repeater", "", "[{ host: '127.0.0.2', port: 9 }]"),
    ("repeater[].host", "", "'127.0.0.2'"),
    ("repeater[].port", "", "10"),
    ("repeaterProtocol", "", "'udp6'"),
    ("store.dataDir", "", "'/histd-b'"),
    ("store.retention.raw", "", "'2h'"),
    ("store.scrubInterval", "", "'2d'"),
    ("store.snapshots.interval", "", "'1h'"),
    ("store.maxBytes", "", "'1GiB'"),
    ("prometheus.remoteWrite", "", "[{ url: 'http://127.0.0.2:9/w' }]"),
    ("prometheus.remoteWrite[].url", "", "'http://127.0.0.2:9/w'"),
    ("prometheus.remoteWrite[].name", "", "'w'"),
    ("prometheus.remoteWrite[].histograms", "", "'native'"),
    ("prometheus.timerSeconds", "", "false"),
    ("prometheus.buckets", "", "[1, 2]"),
    ("prometheus.scrapeHistograms", "", "'native'"),
    ("prometheus.ttlSeconds", "", "60"),
    ("prometheus.nativeSchema", "", "3"),
    ("prometheus.mappingFile", "", "MAPPING"),
    ("prometheus.externalLabels", "", "{ instance: 'a' }"),
    ("prometheus.remoteWrite[].headers", "", "{ Authorization: 'Bearer rotated' }"),
    ("prometheus.remoteWrite[].timeoutMs", "", "5000"),
    ("prometheus.remoteWrite[].retryBufferBytes", "", "2000000"),
    ("prometheus.remoteWrite[].tls.caFile", "", "'/histd-ca.pem'"),
    ("forward.nodes", "", "['http://127.0.0.1:2']"),
    ("forward.tokenFile", "", "'/histd-token'"),
    ("forward.tls.caFile", "", "'/histd-ca.pem'"),
    ("forward.tls.certFile", "", "{ certFile: '/c.pem', keyFile: '/k.pem' }"),
    (
        "forward.paths",
        "{ backends: ['forward'], forward: { paths: [{ nodes: ['http://127.0.0.1:1'] }] } }",
        "[{ nodes: ['http://127.0.0.1:2'] }]",
    ),
    (
        "forward.paths[].name",
        "{ backends: ['forward'], forward: { paths: [{ nodes: ['http://127.0.0.1:1'] }] } }",
        "'b'",
    ),
    ("forward.source", "", "'other'"),
    ("forward.checkInterval", "", "5000"),
    ("forward.timeoutMs", "", "5000"),
    ("forward.redirectAfterMs", "", "5000"),
    ("forward.spoolDir", "", "'/histd-spool'"),
    ("forward.spoolBytes", "", "2000000"),
    ("forward.setMembersLimit", "", "10"),
    ("forward.rawValuesLimit", "", "10"),
    ("forward.maxBatchBytes", "", "2000000"),
    ("forward.kafka.brokers", KAFKA, "['k:9093']"),
    ("forward.kafka.topic", KAFKA, "'t'"),
    ("forward.kafka.clientId", KAFKA, "'c'"),
    ("forward.kafka.tls", KAFKA, "true"),
    ("forward.kafka.tls.caFile", KAFKA, "{ caFile: '/histd-ca.pem' }"),
    ("forward.kafka.tls.certFile", KAFKA, "{ certFile: '/c.pem', keyFile: '/k.pem' }"),
    ("forward.kafka.sasl", KAFKA, "{ username: 'u', passwordFile: '/p' }"),
    ("forward.kafka.sasl.mechanism", KAFKA_SASL, "'PLAIN'"),
    ("forward.kafka.sasl.username", KAFKA_SASL, "'v'"),
    ("forward.kafka.acks", KAFKA_NO_TRANSACTIONS, "1"),
    ("forward.kafka.compression", KAFKA, "'lz4'"),
    ("forward.kafka.maxMessageBytes", KAFKA, "2000000"),
    ("forward.kafka.deliveryTimeoutMs", KAFKA, "5000"),
    ("forward.kafka.transactions", KAFKA, "false"),
    ("forward.kafka.transactionalId", KAFKA, "'x'"),
    ("forward.kafka.signingKeyFile", KAFKA, "'/histd-key'"),
    ("otlp.endpoint", "", "'http://127.0.0.2:4318/v1/metrics'"),
    ("otlp.histograms", "", "'explicit'"),
    ("otlp.scale", "", "3"),
    ("otlp.temporality", "", "'cumulative'"),
    ("otlp.monotonicCounters", "", "false"),
    ("otlp.resource", "", "{ 'service.name': 'x' }"),
    ("otlp.compression", "", "'none'"),
    ("otlp.maxRequestBytes", "", "1000000"),
    ("otlp.headers", "", "{ 'x-key': 'rotated' }"),
    ("otlp.timeoutMs", "", "5000"),
    ("otlp.retryBufferBytes", "", "2000000"),
    ("otlp.tls.caFile", "", "'/histd-ca.pem'"),
    ("file.name", "", "'/histd-g'"),
    ("file.format", "", "'jsonl'"),
    ("file.maxBytes", "", "2000000"),
    ("file.keep", "", "5"),
    ("circonus.url", "", "'http://127.0.0.2:9/'"),
    ("circonus.format", IRONDB, "'httptrap'"),
    ("circonus.checkUuid", IRONDB, "'00000000-0000-0000-0000-000000000002'"),
    ("circonus.accountId", IRONDB, "2"),
    ("circonus.target", IRONDB, "'t'"),
    ("circonus.maxRequestBytes", "", "1000000"),
    ("circonus.headers", "", "{ 'x-key': 'rotated' }"),
    ("circonus.timeoutMs", "", "5000"),
    ("circonus.retryBufferBytes", "", "2000000"),
    ("circonus.tls.caFile", "", "'/histd-ca.pem'"),
    ("influx.url", "", "'http://127.0.0.2:9/write'"),
    ("influx.separator", "", "'.'"),
    ("influx.tags", "", "{ dc: 'a' }"),
    ("influx.maxRequestBytes", "", "2000000"),
    ("influx.headers", "", "{ Authorization: 'Token rotated' }"),
    ("influx.timeoutMs", "", "5000"),
    ("influx.retryBufferBytes", "", "2000000"),
    ("influx.tls.caFile", "", "'/histd-ca.pem'"),
];

const KAFKA: &str = "{ backends: ['forward'], forward: { kafka: { brokers: ['k:9092'] } } }";
const KAFKA_SASL: &str =
    "{ backends: ['forward'], forward: { kafka: { brokers: ['k:9092'], sasl: { username: 'u', passwordFile: '/p' } } } }";
const KAFKA_NO_TRANSACTIONS: &str =
    "{ backends: ['forward'], forward: { kafka: { brokers: ['k:9092'], transactions: false } } }";
const IRONDB: &str = "{ backends: ['circonus'], circonus: { url: 'http://127.0.0.1:9/', format: 'irondb', \
                      checkUuid: '00000000-0000-0000-0000-000000000001' } }";

/// Sets `path` (`a.b`, `a[].b`: the first element) of `root` to `value`; a key whose value is
/// an object of several keys (`tls.certFile` given as `{ certFile, keyFile }`) sets its parent.
fn set(root: &mut Value, path: &str, value: Value) {
    let mut parts: Vec<&str> = path.split('.').collect();
    if value.is_object() && parts.len() > 1 && value.get(*parts.last().unwrap()).is_some() {
        parts.pop();
    }
    let mut at = root;
    for (index, part) in parts.iter().enumerate() {
        let last = index + 1 == parts.len();
        let (name, element) = match part.strip_suffix("[]") {
            Some(name) => (name, true),
            None => (*part, false),
        };
        let object = at.as_object_mut().unwrap();
        if last && !element {
            object.insert(name.to_string(), value);
            return;
        }
        let child = object.entry(name).or_insert_with(|| {
            if element {
                Value::Array(vec![])
            } else {
                Value::Object(Default::default())
            }
        });
        at = if element {
            let array = child.as_array_mut().unwrap();
            if array.is_empty() {
                array.push(Value::Object(Default::default()));
            }
            if last {
                array[0] = value;
                return;
            }
            &mut array[0]
        } else {
            child
        };
    }
}

/// Every key of every backend, changed by a reload, does what the key table says: a key
/// applied in place changes the running sink in place, every other restarts (or replaces) it;
/// none is left as it was (as a rotated remote-write header once was).
#[test]
fn every_backend_key_does_on_reload_what_the_key_table_says() {
    let literal = |text: &str| -> Value {
        let object = crate::config_reader::object_literal(&format!("{{ v: {text} }}")).unwrap();
        object["v"].clone()
    };
    let mapping = std::env::temp_dir().join(format!("histd-mapping-{}.yml", std::process::id()));
    std::fs::write(&mapping, "mappings: []\n").unwrap();
    let mut unchanged = Vec::new();
    for backend in crate::config::BackendSettings::names().map(|name| Backend::named(name).unwrap()) {
        let base_text = BASES.iter().find(|(name, _)| *name == backend.name()).map(|(_, base)| *base).unwrap();
        let cluster = crate::kafka_config::CLUSTER_KEYS.iter().filter(|_| backend.name() == "forward");
        for doc in backend.keys().iter().chain(cluster) {
            let Some((key, base, value)) = CHANGES.iter().find(|(key, _, _)| doc.keys.contains(key)) else {
                unchanged.push(format!("{}: {:?}", backend.name(), doc.keys));
                continue;
            };
            let base = if base.is_empty() { base_text } else { base };
            let mut changed = Value::Object(crate::config_reader::object_literal(base).unwrap());
            let value = value.replace("MAPPING", &format!("'{}'", mapping.display()));
            set(&mut changed, key, literal(&value));
            let (before, after) = (config(base), config(&changed.to_string()));
            let wanted = match doc.on_reload {
                OnReload::InPlace => "in place",
                OnReload::RestartsItsSink => "restart",
            };
            assert_eq!(decision(backend, &before, &after), wanted, "{}: {key}: {value}", backend.name());
        }
    }
    std::fs::remove_file(&mapping).unwrap();
    assert!(unchanged.is_empty(), "keys this table does not change yet: {unchanged:#?}");
}
