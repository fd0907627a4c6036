use std::time::Duration;

use super::*;
use crate::ingest::allow::Allow;

fn parse(text: &str) -> Config {
    Config::from_text(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn error(text: &str) -> String {
    Config::from_text(text).map(|_| ()).unwrap_err().to_string()
}

#[test]
fn defaults_match_etsy() {
    let config = parse("{}");
    assert_eq!(config.listeners, [Listener::Udp("0.0.0.0:8125".parse().unwrap(), None, Allow::default())]);
    assert_eq!(config.mgmt, "127.0.0.1:8126".parse().unwrap());
    assert_eq!(names(&config), ["graphite"]);
    assert_eq!(config.agg.flush_interval, Duration::from_secs(10));
    assert_eq!(config.agg.thresholds.iter().map(|t| t.percent).collect::<Vec<_>>(), [90.0]);
    assert_eq!(config.agg.prefix_stats, "statsd");
    assert!(config.agg.key_name_sanitize);
    assert!(!config.agg.delete_counters);
    assert_eq!(config.settings::<crate::sinks::graphite::Graphite>().host, None);
    assert_eq!(config.settings::<crate::sinks::graphite::Graphite>().port, 2003);
    assert!(config.settings::<crate::sinks::graphite::Graphite>().legacy_namespace);
    assert!(config.settings::<crate::sinks::graphite::Graphite>().flush_counts);
    assert_eq!(config.settings::<crate::sinks::graphite::Graphite>().global_prefix, "stats");
    assert_eq!(config.settings::<crate::sinks::repeater::Repeater>().protocol, RepeaterProtocol::Udp4);
}

#[test]
fn reads_javascript_object_literals() {
    let config = parse(
        "// a comment\n{ port: 9125, address: '::1', address_ipv6: true, /* inline */ flushInterval: '5000', \
         percentThreshold: 95, backends: ['console', './backends/graphite',], mgmt_address: '0.0.0.0', }",
    );
    assert_eq!(config.listeners, [Listener::Udp("[::1]:9125".parse().unwrap(), None, Allow::default())]);
    assert_eq!(config.agg.flush_interval, Duration::from_secs(5));
    assert_eq!(config.agg.thresholds[0].percent, 95.0);
    assert_eq!(names(&config), ["console", "graphite"]);
    assert_eq!(config.mgmt.ip().to_string(), "0.0.0.0");
}

#[test]
fn delete_idle_stats_sets_each_default() {
    let config = parse("{ deleteIdleStats: true, deleteGauges: false }");
    assert!(config.agg.delete_counters && config.agg.delete_timers && config.agg.delete_sets);
    assert!(!config.agg.delete_gauges);
}

#[test]
fn gauges_max_ttl_follows_etsys_rule() {
    for (text, ttl) in [("3", 3), ("1", 1), ("0", 1), ("2.5", 1), ("'4'", 4), ("-2", 1), ("true", 1)] {
        assert_eq!(parse(&format!("{{ gaugesMaxTTL: {text} }}")).agg.gauges_max_ttl, ttl, "{text}");
    }
}

#[test]
fn servers_array_takes_precedence() {
    let config = parse(
        "{ port: 1, servers: [ { server: './servers/tcp', port: 2 }, { socket: '/tmp/x.sock', socket_mod: 432 }, \
           { port: 3, recvBufferSize: 1048576 } ] }",
    );
    assert_eq!(
        config.listeners,
        [
            Listener::Tcp("0.0.0.0:2".parse().unwrap(), Allow::default()),
            Listener::UnixDatagram(UnixPath { path: "/tmp/x.sock".into(), mode: Some(0o660) }),
            Listener::Udp("0.0.0.0:3".parse().unwrap(), Some(1_048_576), Allow::default()),
        ]
    );
}

#[test]
fn errors_name_the_key() {
    let many_thresholds = format!("{{ percentThreshold: [{}] }}", vec!["50"; 256].join(", "));
    let cases = [
        (many_thresholds.as_str(), "config key `percentThreshold`: 256 thresholds: at most 255"),
        ("{ flushInterval: 0 }", "config key `flushInterval`"),
        ("{ percentThreshold: 0 }", "config key `percentThreshold`"),
        ("{ percentThreshold: [90, -101] }", "config key `percentThreshold`"),
        ("{ graphite: { legacyNamespace: 'no' } }", "config key `graphite.legacyNamespace`"),
        ("{ graphiteProtocol: 'udp' }", "config key `graphiteProtocol`"),
        ("{ flushInterval: 1e300 }", "config key `flushInterval`: expected milliseconds from 1 to 86400000"),
        ("{ servers: [] }", "config key `servers`"),
        ("{ servers: [ { port: 'x' } ] }", "config key `servers[0].port`"),
        ("{ address: 'nowhere' }", "config key `address`"),
        ("{ histogram: [ { bins: [1] } ] }", "config key `histogram[0].metric`"),
        ("{ histogram: [ { metric: 'a', bins: ['lots'] } ] }", "config key `histogram[0].bins`"),
        ("{ calculatedTimerMetrics: [1] }", "config key `calculatedTimerMetrics`"),
        ("{ repeater: [ { port: 1 } ] }", "config key `repeater[0].host`"),
        ("{ repeaterProtocol: 'sctp' }", "config key `repeaterProtocol`"),
        ("{ graphite: { retryBufferBytes: -1 } }", "config key `graphite.retryBufferBytes`"),
        ("{ timerSampleLimit: 1.5 }", "config key `timerSampleLimit`"),
        ("{ maxSeries: 0 }", "config key `maxSeries`: expected a whole number from 1 to 1e9, got 0"),
        ("{ maxSeries: { timers: -5 } }", "config key `maxSeries.timers`"),
        ("{ maxSeriesPerName: 'lots' }", "config key `maxSeriesPerName`"),
        ("{ maxTagValues: 2.5 }", "config key `maxTagValues`"),
        ("{ idleTTL: 'soon' }", "config key `idleTTL`: expected a duration like 10m, 1h or 7d"),
        ("{ idleTTL: { gauges: 0 } }", "config key `idleTTL.gauges`"),
        ("{ idleTTL: true }", "config key `idleTTL`"),
        ("{ alerts: [ { expr: 'count(a)', over: '1m', above: 1 } ] }", "config key `alerts[0].name`"),
        ("{ alerts: [ { name: 'a', expr: 'count(', over: '1m', above: 1 } ] }", "config key `alerts[0].expr`"),
        ("{ alerts: [ { name: 'a', expr: 'count(a)', above: 1 } ] }", "config key `alerts[0].over`"),
        ("{ alerts: [ { name: 'a', expr: 'count(a)', over: '1s', above: 1 } ] }", "config key `alerts[0].over`: 1000 ms is not a window of 1 to 360 flushes"),
        ("{ alerts: [ { name: 'a', expr: 'count(a)', over: '1m' } ] }", "config key `alerts[0].above`"),
        ("{ alerts: [ { name: 'a', expr: 'count(a)', over: '1m', above: 1, below: 2 } ] }", "config key `alerts[0].below`"),
        ("{ alerts: [ { name: 'a', expr: 'count(a)', over: '1m', above: 1, for: 'soon' } ] }", "config key `alerts[0].for`"),
        ("{ alerts: [ { name: 'a', expr: 'count(a)', over: '1m', above: 1, labels: { '1x': 'y' } } ] }", "config key `alerts[0].labels`: '1x' is not a label name"),
        ("{ alerts: [ { name: 'a', expr: 'count(a)', over: '1m', above: 1 }, { name: 'a', expr: 'count(b)', over: '1m', above: 1 } ] }", "config key `alerts[1].name`: 'a' names two rules"),
        ("{ alerting: { alertmanagers: ['am:9093'] } }", "config key `alerting.alertmanagers[0]`"),
        ("{ alerting: { webhooks: [ { url: 'http://h/x', format: 'teams' } ] } }", "config key `alerting.webhooks[0].format`"),
        ("{ maxSetMembers: 0 }", "config key `maxSetMembers`"),
        ("{ udpReaders: 0 }", "config key `udpReaders`"),
        ("{ udpReaderMode: 'fast' }", "config key `udpReaderMode`"),
        ("{ servers: [ { recvBufferSize: -1 } ] }", "config key `servers[0].recvBufferSize`"),
        (
            "{ prometheus: { remoteWrite: [ { url: 'ftp://vm/api/v1/write' } ] } }",
            "config key `prometheus.remoteWrite[0].url`: expected a URL starting with http:// or https://",
        ),
        ("{ prometheus: { remoteWrite: [ {} ] } }", "config key `prometheus.remoteWrite[0].url`: is missing"),
        (
            "{ prometheus: { remoteWrite: [ { url: 'http://a/', histograms: 'sparse' } ] } }",
            "config key `prometheus.remoteWrite[0].histograms`",
        ),
        (
            "{ prometheus: { remoteWrite: [ { url: 'http://a/', headers: { A: 1 } } ] } }",
            "config key `prometheus.remoteWrite[0].headers`",
        ),
        (
            "{ prometheus: { scrapeHistograms: 'sparse' } }",
            "config key `prometheus.scrapeHistograms`: 'sparse' is not classic, vmrange or native",
        ),
        ("{ prometheus: { buckets: [1, 0.5] } }", "config key `prometheus.buckets`: expected increasing"),
        ("{ prometheus: { nativeSchema: 9 } }", "config key `prometheus.nativeSchema`"),
        ("{ prometheus: { externalLabels: { '1x': 'a' } } }", "config key `prometheus.externalLabels`"),
        (
            "{ prometheus: { mappingFile: '/nonexistent/m.yml' } }",
            "config key `prometheus.mappingFile`: cannot read /nonexistent/m.yml",
        ),
        ("[1, 2]", "must be an object"),
    ];
    for (text, want) in cases {
        let message = error(text);
        assert!(message.contains(want), "{text}: {message}");
    }
}

#[test]
fn unread_keys_are_reported_not_fatal() {
    let cases: &[(&str, &[&str])] = &[
        ("{ influxdb: { host: 'x' }, port: 8125 }", &["influxdb"]),
        ("{ graphite: { globalPrefx: 'x', globalPrefix: 'y' } }", &["graphite.globalPrefx"]),
        (
            "{ servers: [ { port: 1, prot: 2 }, { server: 'tcp', sockt: 'x' } ] }",
            &["servers[0].prot", "servers[1].sockt"],
        ),
        ("{ servers: [ { port: 1 } ], port: 2 }", &["port"]),
        ("{ store: { retention: { raw: '1h', rwa: '2h' } } }", &["store.retention.rwa"]),
        ("{ histogram: [ { metric: '', bins: [1], bin: [] } ] }", &["histogram[0].bin"]),
        ("{ title: 'statsd', keyFlush: { interval: 1 } }", &["title", "keyFlush"]),
        (
            "{ udpReaders: 1, udpReaderMode: 'shared', udpReceiveBufferBytes: 1024, udpBatchDatagrams: 8, \
              maxDatagramBytes: 1024, timerSampleLimit: 10 }",
            &[],
        ),
    ];
    for (text, want) in cases {
        assert_eq!(parse(text).ignored_keys, *want, "{text}");
    }
}

/// Issue 18: check-config's JSON in the user's terms, not Rust's (`Udp(…, None)`, `Below(50.0)`).
#[test]
fn the_effective_config_speaks_etsys_terms() {
    let config = parse(
        "{ servers: [ { server: './servers/udp', address: '127.0.0.1', port: 8125, recvBufferSize: 4096 }, \
                      { server: './servers/tcp', address: '::1', port: 8125 }, \
                      { server: './servers/tcp', socket: '/tmp/s.sock', socket_mod: '0660' } ], \
           histogram: [ { metric: 'a', bins: [0.5, 50, 'inf'] } ] }",
    );
    let effective = config.effective();
    assert_eq!(
        effective["servers"],
        serde_json::json!([
            { "server": "./servers/udp", "address": "127.0.0.1", "port": 8125, "recvBufferSize": 4096 },
            { "server": "./servers/tcp", "address": "::1", "port": 8125 },
            { "server": "./servers/tcp", "socket": "/tmp/s.sock", "socket_mod": "0660" },
        ])
    );
    assert_eq!(effective["histogram"][0]["bins"], serde_json::json!([0.5, 50.0, "inf"]));
    assert!(!effective.to_string().contains("Some(") && !effective.to_string().contains("Below("));
}

#[test]
fn typos_get_a_suggestion() {
    let cases = [
        ("flushIntreval", Some("flushInterval")),
        ("flushinterval", Some("flushInterval")),
        ("graphite.globalPrefx", Some("graphite.globalPrefix")),
        ("servers[3].prot", Some("servers[].port")),
        ("percentThresold", Some("percentThreshold")),
        ("influxdb", None),
        ("librato", None),
    ];
    for (path, want) in cases {
        assert_eq!(super::keys::suggestion(path), want, "{path}");
    }
    assert!(super::keys::why_unused("flushIntreval").contains("did you mean `flushInterval`?"));
    assert!(super::keys::is_unknown("flushIntreval") && !super::keys::is_unknown("title"));
}

/// Configs that set every documented key between them (`servers` and the top-level listener
/// keys are each read only when the other form is absent, an address only without a socket).
const EVERY_KEY: [&str; 8] = [
    "{ servers: [ { server: './servers/udp', address: '127.0.0.1', port: 0, recvBufferSize: 4096 }, \
                  { server: 'tcp', address_ipv6: true }, { server: 'udp', socket: '/tmp/s', socket_mod: '0660' } ], \
       mgmt_address: '127.0.0.1', mgmt_port: 0, backends: ['graphite', 'console', 'repeater', 'store'], \
       flushInterval: 1000, percentThreshold: [90, 99], calculatedTimerMetrics: ['count'], \
       histogram: [ { metric: 'a', bins: [1, 'inf'] } ], deleteIdleStats: true, deleteCounters: true, \
       deleteTimers: true, deleteSets: true, deleteGauges: true, gaugesMaxTTL: 2, prefixStats: 'statsd', \
       keyNameSanitize: true, flush_counts: true, debug: false, healthStatus: 'up', graphiteHost: 'localhost', \
       graphitePort: 2003, graphiteProtocol: 'text', \
       graphite: { legacyNamespace: false, globalPrefix: 'stats', prefixCounter: 'c', prefixTimer: 't', \
                   prefixGauge: 'g', prefixSet: 's', globalSuffix: 'x', retryBufferBytes: 1024 }, \
       console: { prettyprint: true }, repeater: [ { host: '127.0.0.1', port: 9 } ], repeaterProtocol: 'tcp', \
       store: { dataDir: '/tmp/d', retention: { raw: '1h', minute: '1d', hour: '7d' }, maxBytes: '1GiB' }, \
       http_address: '127.0.0.1', http_port: 0, udpReaders: 1, udpReaderMode: 'shared', \
       udpReceiveBufferBytes: 4096, udpBatchDatagrams: 8, maxDatagramBytes: 4096, timerSampleLimit: 10, shutdownDrainMs: 10, streamPendingBytes: 2097152, maxStreamConnections: 10, connectionIdleTimeoutMs: 0, httpMaxConnections: 8, httpHeaderTimeoutMs: 500, histdSelfMetrics: true, sinkQueueBytes: 2097152, \
       maxSeries: { counters: 10, timers: 10, gauges: 10, sets: 10 }, idleTTL: { counters: '1h', timers: '1h', gauges: '1h', sets: '1h' }, maxSeriesPerName: 5, maxTagValues: 5, maxSetMembers: 5, \
       alerts: [ { name: 'slow', expr: 'count_above(api.latency, 1500)', over: '5m', above: 100, for: '1m', labels: { severity: 'page' }, summary: '{{value}} people' }, \
                 { name: 'quiet', expr: 'rate(hits)', over: 60000, below: 1 } ], \
       alerting: { alertmanagers: ['http://127.0.0.1:9093'], webhooks: [ { url: 'http://127.0.0.1:9/hook', format: 'slack' } ], \
                   externalURL: 'http://histd.example:8127', resendEvery: '2m', timeoutMs: 2000, maxQueued: 10 }, \
       title: 'statsd', log: { backend: 'stdout' }, dumpMessages: false, automaticConfigReload: false, \
       keyFlush: { interval: 1000 }, \
       prometheus: { timerSeconds: true, buckets: [0.1, 1], scrapeHistograms: 'vmrange', ttlSeconds: 60, nativeSchema: 3, mappingFile: 'tests/data/statsd_exporter_mapping.yml', externalLabels: { instance: 'a' }, \
                     remoteWrite: [ { url: 'http://127.0.0.1:8428/api/v1/write', name: 'vm', histograms: 'vmrange', \
                                      headers: { 'X-Scope-OrgID': 'a' }, timeoutMs: 1000, retryBufferBytes: 1048576 } ] } }",
    "{ server: 'udp', address: '127.0.0.1', port: 0, address_ipv6: false, recvBufferSize: 4096 }",
    "{ server: 'tcp', socket: '/tmp/s', socket_mod: 438, graphiteProtocol: 'pickle', graphitePicklePort: 2004 }",
    "{ backends: ['otlp', 'file', 'circonus'], maxStreamLineBytes: 65536, mgmtMaxConnections: 4, mgmtMaxLineBytes: 4096, \
       queryMaxSteps: 500, queryMaxSeries: 500, \
       otlp: { endpoint: 'http://127.0.0.1:4318', histograms: 'explicit', scale: 3, temporality: 'cumulative', \
               headers: { a: 'b' }, resource: { 'service.name': 'x' }, compression: 'none', monotonicCounters: false, timeoutMs: 1000, \
               retryBufferBytes: 1048576, maxRequestBytes: 65536 }, \
       file: { name: '/tmp/f.log', format: 'jsonl', maxBytes: 0, keep: 2 }, \
       circonus: { url: 'http://127.0.0.1:8112/raw', format: 'irondb', checkUuid: '1b988fd7-d1e1-48ec-848e-55709511d43f', \
                   accountId: 2, checkBundleId: 3, target: 't', module: 'm', headers: { a: 'b' }, timeoutMs: 1000, \
                   retryBufferBytes: 1048576, maxRequestBytes: 65536 } }",
    "{ circonus: { url: 'http://127.0.0.1:43191/module/httptrap/x/y', format: 'httptrap' } }",
    "{ backends: ['influx'], influx: { url: 'http://127.0.0.1:8086/write?db=a', headers: { a: 'b' }, separator: '.', \
                tags: { host: 'h' }, timeoutMs: 1000, retryBufferBytes: 1048576, maxRequestBytes: 65536 } }",
    "{ forward: { kafka: { brokers: ['127.0.0.1:9092'], topic: 't', clientId: 'c', acks: 'all', compression: 'lz4', \
                           maxMessageBytes: 1000000, deliveryTimeoutMs: 1000, \
                           tls: { caFile: '/a', certFile: '/b', keyFile: '/c' }, \
                           sasl: { mechanism: 'PLAIN', username: 'u', passwordFile: '/p' } } }, \
       global: { kafka: { brokers: ['127.0.0.1:9092'], topic: 't', clientId: 'c', group: 'g', sessionTimeoutMs: 5000, \
                          tls: { caFile: '/a', certFile: '/b', keyFile: '/c' }, \
                          sasl: { mechanism: 'PLAIN', username: 'u', passwordFile: '/p' } } } }",
    "{ forward: { paths: [ { name: 'dc1', nodes: ['http://127.0.0.1:1'], tokenFile: '/t', checkInterval: 100, timeoutMs: 100, \
                             redirectAfterMs: 100, spoolDir: '/s1', spoolBytes: 4096, tls: { caFile: '/a', certFile: '/b', keyFile: '/c' } }, \
                           { kafka: { brokers: ['127.0.0.1:9092'], topic: 't', clientId: 'c', acks: 1, compression: 'gzip', \
                                      maxMessageBytes: 1000000, deliveryTimeoutMs: 1000, \
                                      tls: { caFile: '/a', certFile: '/b', keyFile: '/c' }, \
                                      sasl: { mechanism: 'PLAIN', username: 'u', passwordFile: '/p' } } } ] } }",
];

#[test]
fn every_documented_key_is_read_and_every_read_key_documented() {
    use std::collections::BTreeSet;
    let mut read_patterns = BTreeSet::new();
    for text in EVERY_KEY {
        let Value::Object(raw) = json5::from_str(text).unwrap() else { panic!("an object") };
        let read = KeysRead::default();
        let config = Config::read_object(raw, &read).unwrap_or_else(|e| panic!("{text}: {e}"));
        for ignored in &config.ignored_keys {
            let doc = keys::doc_of(ignored).unwrap_or_else(|| panic!("{ignored} is read by no one"));
            assert_eq!(doc.origin, keys::Origin::EtsyUnused, "{ignored} is documented as used but was not read");
        }
        read_patterns.extend(read.paths().iter().map(|path| keys::without_indices(path)));
    }
    let section = |pattern: &str| keys::all().flat_map(|doc| doc.keys).any(|k| k.starts_with(&format!("{pattern}.")));
    for pattern in &read_patterns {
        assert!(
            keys::doc_of(pattern).is_some() || section(pattern),
            "`{pattern}` is read but not documented in config/keys.rs"
        );
    }
    for doc in keys::all().filter(|doc| doc.origin != keys::Origin::EtsyUnused) {
        for key in doc.keys {
            assert!(read_patterns.contains(*key), "`{key}` is documented but never read");
        }
    }
}

#[test]
fn readmes_key_table_is_the_documented_one() {
    const START: &str = "<!-- config keys: generated from crates/histd/src/config/keys.rs -->\n";
    const END: &str = "<!-- end of config keys -->";
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let start =
        readme.find(START).expect("docs/configuration.md has the config key table's start marker") + START.len();
    let end = readme[start..].find(END).expect("docs/configuration.md has the table's end marker") + start;
    let want = keys::markdown_table();
    if readme[start..end] != want && std::env::var_os("HISTD_BLESS").is_some() {
        std::fs::write(path, format!("{}{want}{}", &readme[..start], &readme[end..])).unwrap();
        return;
    }
    assert!(
        readme[start..end] == want,
        "docs/configuration.md's config key table differs from config/keys.rs (rerun with HISTD_BLESS=1 to rewrite it):\n{want}"
    );
}

#[test]
fn the_local_default_listens_on_loopback() {
    let config = Config::local_default();
    assert_eq!(
        config.listeners,
        [
            Listener::Udp("127.0.0.1:8125".parse().unwrap(), None, Allow::default()),
            Listener::Tcp("127.0.0.1:8125".parse().unwrap(), Allow::default()),
        ]
    );
    assert_eq!(names(&config), ["store"]);
    assert_eq!(config.http_port.address, "127.0.0.1:8127".parse().unwrap());
    assert!(config.http_port.serve);
}

#[test]
fn the_http_port_is_bound_only_when_something_uses_it() {
    let cases = [
        ("{ graphiteHost: 'carbon' }", false),
        ("{ backends: ['console'] }", false),
        ("{ backends: ['graphite', 'store'] }", true),
        ("{ backends: ['prometheus'] }", true),
        ("{ backends: ['console'], global: { accept: true } }", true),
        ("{ backends: ['console'], http_port: 9000 }", true),
        ("{ backends: ['console'], http_address: '0.0.0.0', http: { openToNetwork: true } }", true),
    ];
    for (text, serves) in cases {
        assert_eq!(parse(text).http_port.serve, serves, "{text}");
    }
}

#[test]
fn a_syntax_error_points_at_its_line_and_column() {
    let message = error("{ port: 8125\n  flushInterval: 1000 }");
    assert!(message.contains("syntax error at line 1, column 9"), "{message}");
    assert!(message.contains("   1 | { port: 8125\n       |         ^"), "{message}");
    assert!(!message.contains("expected boolean"), "{message}");
}

#[test]
fn budgets_are_read_as_one_number_or_one_per_type() {
    let defaults = agg::Budgets::default();
    assert_eq!(parse("{}").agg.budgets, defaults);
    assert_eq!(parse("{ maxSeries: 5000 }").agg.budgets.max_series, [5000; 4]);
    let config = parse("{ maxSeries: { timers: 7 }, maxSeriesPerName: 3, maxTagValues: 4, maxSetMembers: 6 }");
    let budgets = config.agg.budgets;
    assert_eq!(budgets.max_series, [defaults.max_series[0], 7, defaults.max_series[2], defaults.max_series[3]]);
    assert_eq!((budgets.max_series_per_name, budgets.max_tag_values, budgets.max_set_members), (3, 4, 6));
}

#[test]
fn idle_ttls_are_one_duration_or_one_per_type() {
    use std::time::Duration;
    let minutes = |m: u64| Some(Duration::from_secs(60 * m));
    let cases: &[(&str, [Option<Duration>; 4])] = &[
        ("{}", [None; 4]),
        ("{ idleTTL: '10m' }", [minutes(10); 4]),
        ("{ idleTTL: 600000 }", [minutes(10); 4]),
        ("{ idleTTL: { counters: '1h', sets: 120000 } }", [minutes(60), None, None, minutes(2)]),
    ];
    for (text, want) in cases {
        assert_eq!(parse(text).agg.idle_ttl, *want, "{text}");
    }
    let config = parse("{ flushInterval: 10000, idleTTL: { timers: '25s' } }");
    assert_eq!(config.agg.idle_flushes(agg::MetricType::Timers), Some(3), "rounded up to whole flushes");
    assert_eq!(config.effective()["idleTTL"]["timers"], 25000);
}

/// Issue 34: an HTTP port on a network address with its admin, read (issue 48, P14: every
/// series, `/metrics`, the page) or, on a global, write role open refuses to start, naming the
/// key; tokens or `openToNetwork` let it.
#[test]
fn an_http_port_open_to_a_network_needs_tokens_or_says_so() {
    let cases: &[(&str, Option<&str>)] = &[
        ("{ backends: ['store'], http_address: '0.0.0.0' }", Some("http.openToNetwork")),
        ("{ backends: ['store'], http_address: '0.0.0.0', http: { tokens: { admin: '/a' } } }", Some("read role")),
        ("{ backends: ['store'], http_address: '0.0.0.0', http: { tokens: { admin: '/a', read: '/r' } } }", None),
        ("{ backends: ['store'], http_address: '0.0.0.0', global: { accept: true }, http: { tokens: { admin: '/a', read: '/r' } } }", Some("http.openToNetwork")),
        ("{ backends: ['store'], http_address: '0.0.0.0', global: { accept: true }, http: { tokens: { admin: '/a', write: '/w', read: '/r' } } }", None),
        ("{ backends: ['store'], http_address: '10.0.0.5', http: { openToNetwork: true } }", None),
        ("{ backends: ['store'], http_address: '127.0.0.1' }", None),
        ("{ backends: ['console'], http_address: '0.0.0.0', http: { hostnames: ['a:1'], openToNetwork: true } }", Some("http.hostnames[0]")),
    ];
    for (text, error) in cases {
        match (Config::from_text(text), error) {
            (Ok(_), None) => {}
            (Err(got), Some(key)) => assert!(got.to_string().contains(key), "{text}: {got}"),
            (got, want) => panic!("{text}: {:?}, wanted an error naming {want:?}", got.map(|_| ())),
        }
    }
}

#[test]
fn a_wrong_key_is_taken_out_by_its_path() {
    let object = |text: &str| -> Map<String, Value> { serde_json::from_str(text).unwrap() };
    let cases: &[(&str, &str, bool, &str)] = &[
        (r#"{"a": 1, "b": 2}"#, "a", true, r#"{"b": 2}"#),
        (r#"{"g": {"p": 1, "q": 2}}"#, "g.p", true, r#"{"g": {"q": 2}}"#),
        (r#"{"s": [{"port": 1}, {"port": 2}]}"#, "s[1].port", true, r#"{"s": [{"port": 1}, {}]}"#),
        (r#"{"s": [1, 2]}"#, "s[0]", true, r#"{"s": [null, 2]}"#),
        (r#"{"s": [null]}"#, "s[0]", false, r#"{"s": [null]}"#),
        (r#"{"a/b": {"c": 1}}"#, "a/b.c", true, r#"{"a/b": {}}"#),
        (r#"{"a": 1}"#, "missing.key", false, r#"{"a": 1}"#),
    ];
    for (text, path, removed, want) in cases {
        let mut raw = object(text);
        assert_eq!(super::remove_path(&mut raw, path), *removed, "{path} in {text}");
        assert_eq!(raw, object(want), "{path} in {text}");
    }
}

/// Issue 32: one run of check-config names every wrong key, not only the first.
#[test]
fn every_wrong_key_is_named_at_once() {
    let text = "{ flushInterval: 'soon', percentThreshold: ['x'], servers: [ { server: 'udp', port: 0 }, { server: 'tcp', port: 'a' } ], graphite: { globalPrefix: 5 } }";
    let error = Config::from_text(text).map(|_| ()).unwrap_err().to_string();
    for key in ["flushInterval", "percentThreshold", "servers[1].port", "graphite.globalPrefix"] {
        assert!(error.contains(&format!("`{key}`")), "{key} named in: {error}");
    }
    assert_eq!(error.matches("config key").count(), 4, "{error}");
    // A required key that is missing ends the list: it cannot be taken out and read again.
    let missing =
        Config::from_text("{ backends: ['forward'], flushInterval: 'x' }").map(|_| ()).unwrap_err().to_string();
    assert!(missing.contains("flushInterval") && missing.contains("forward.nodes"), "{missing}");
}

/// Issue 52: a misspelt backend is named with what was meant, and the file's other errors
/// after it (the list is taken out whole: its element set to null is not another error).
#[test]
fn a_misspelt_backend_gets_a_suggestion_and_hides_no_other_error() {
    // (the config, what its error says, what it must not say)
    let cases = [
        ("{ backends: ['stor'], port: 'x' }", vec!["did you mean 'store'?", "`port`"], "got null"),
        (
            "{ backends: ['graphite', 'stroe'], flushInterval: 'soon' }",
            vec!["`backends[1]`", "did you mean 'store'?", "`flushInterval`"],
            "got null",
        ),
        ("{ backends: ['librato'] }", vec!["unknown backend 'librato' (histd has"], "did you mean"),
        ("{ backends: [5], port: 'x' }", vec!["expected a backend name, got 5", "`port`"], "got null"),
    ];
    for (text, said, unsaid) in cases {
        let error = Config::from_text(text).map(|_| ()).unwrap_err().to_string();
        for words in said {
            assert!(error.contains(words), "{text}: {words} in: {error}");
        }
        assert!(!error.contains(unsaid), "{text}: not {unsaid} in: {error}");
    }
}

/// The names of the backends a config lists, in its order.
fn names(config: &Config) -> Vec<&'static str> {
    config.backends.iter().map(|backend| backend.name()).collect()
}

/// `histd check-config` reads the files the daemon reads at start: each one it cannot read is
/// named by its key (the daemon would refuse to start), and a config naming none has nothing.
#[test]
fn check_config_reads_the_files_the_daemon_reads() {
    let missing = "/nonexistent/histd-check";
    let cases: &[(String, &[&str])] = &[
        ("{ backends: ['console'] }".to_string(), &[]),
        (format!("{{ http: {{ tokens: {{ read: '{missing}' }} }} }}"), &["http.tokens.read"]),
        (
            format!("{{ backends: ['forward'], forward: {{ nodes: ['http://127.0.0.1:1'], tokenFile: '{missing}' }} }}"),
            &["forward.tokenFile"],
        ),
        (
            format!(
                "{{ backends: ['forward'], forward: {{ kafka: {{ brokers: ['127.0.0.1:9092'], topic: 't', \
                   sasl: {{ username: 'u', passwordFile: '{missing}' }} }} }}, \
                   global: {{ kafka: {{ brokers: ['127.0.0.1:9092'], topic: 't', group: 'g', \
                   sasl: {{ username: 'u', passwordFile: '{missing}' }} }} }} }}"
            ),
            &["forward.kafka: sasl.passwordFile", "global.kafka: sasl.passwordFile"],
        ),
        (
            format!("{{ backends: ['forward'], forward: {{ paths: [ {{ name: 'dc2', nodes: ['http://127.0.0.1:1'], tokenFile: '{missing}' }} ] }} }}"),
            &["forward.paths dc2: forward.tokenFile"],
        ),
        // A backend not listed reads no file.
        (format!("{{ backends: ['console'], forward: {{ nodes: ['http://127.0.0.1:1'], tokenFile: '{missing}' }} }}"), &[]),
    ];
    for (text, want) in cases {
        let problems = Config::from_text(text).unwrap_or_else(|e| panic!("{text}: {e}")).check_files();
        assert_eq!(problems.len(), want.len(), "{text}: {problems:?}");
        for (problem, key) in problems.iter().zip(*want) {
            assert!(problem.starts_with(key) && problem.contains(missing), "{text}: {problem} names {key}");
        }
    }
}

#[test]
fn a_global_whose_backends_keep_nothing_is_warned_of() {
    // (config, a warning about `global`)
    let cases = [
        ("{ global: { accept: true } }", true),
        ("{ global: { accept: true }, graphiteHost: 'carbon' }", false),
        ("{ global: { accept: true }, backends: ['store'] }", false),
        ("{ global: { accept: true }, backends: ['graphite', 'prometheus'] }", false),
        ("{ backends: ['graphite'] }", false),
        ("{ global: { kafka: { brokers: ['k:9092'] } }, mgmt_address: '127.0.0.1' }", true),
    ];
    for (text, warned) in cases {
        let warnings = parse(text).warnings();
        assert_eq!(warnings.iter().any(|w| w.starts_with("`global`")), warned, "{text}: {warnings:?}");
    }
}

/// The documents a user reads: README.md and the guides in docs/.
fn documents() -> Vec<(std::path::PathBuf, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut paths = vec![root.join("README.md")];
    let mut guides: Vec<std::path::PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "md"))
        .collect();
    guides.sort();
    paths.extend(guides);
    paths.into_iter().map(|path| (path.clone(), std::fs::read_to_string(&path).unwrap())).collect()
}

/// The configs of one ```` ```js ```` block: each top-level `{...}` in it, or the whole block
/// in braces when it is a fragment (`alerts: [...]`). Comments and strings are stepped over.
fn configs_in(block: &str) -> Vec<String> {
    let bytes = block.as_bytes();
    let (mut depth, mut start, mut index) = (0usize, None, 0usize);
    let mut configs = Vec::new();
    let mut outside = String::new();
    while index < bytes.len() {
        match bytes[index] {
            b'/' if bytes.get(index + 1) == Some(&b'/') => {
                while index < bytes.len() && bytes[index] != b'\n' {
                    index += 1;
                }
                continue;
            }
            quote @ (b'"' | b'\'' | b'`') => {
                index += 1;
                while index < bytes.len() && bytes[index] != quote {
                    index += if bytes[index] == b'\\' { 2 } else { 1 };
                }
            }
            b'{' | b'[' => {
                if depth == 0 && bytes[index] == b'{' {
                    start = Some(index);
                }
                depth += 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    if let Some(from) = start.take() {
                        configs.push(block[from..=index].to_string());
                    }
                }
            }
            other if depth == 0 && !other.is_ascii_whitespace() && other != b',' => outside.push(other as char),
            _ => {}
        }
        index += 1;
    }
    if outside.is_empty() {
        configs
    } else {
        vec![format!("{{ {block} }}")]
    }
}

/// Issue 51: every configuration example in README and docs/ is valid as it stands (each
/// ```` ```js ```` block's configs read with no unknown key), so an example can never rot.
#[test]
fn every_config_example_in_the_documents_reads() {
    let mut checked = 0;
    for (path, text) in documents() {
        for (index, block) in text.split("```js\n").skip(1).enumerate() {
            let block = &block[..block.find("\n```").unwrap_or(block.len())];
            for config in configs_in(block) {
                let read = Config::from_text(&config);
                let where_ = format!("{} js block {}:\n{config}", path.display(), index + 1);
                let config = read.unwrap_or_else(|error| panic!("{where_}\n{error:#}"));
                let unknown: Vec<&String> = config.ignored_keys.iter().filter(|key| keys::is_unknown(key)).collect();
                assert!(unknown.is_empty(), "{where_}\nunknown keys: {unknown:?}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 10, "the documents' examples were found ({checked})");
}

/// Issue 51: every relative link in README and docs/ leads to a file that is there.
#[test]
fn every_relative_link_in_the_documents_resolves() {
    for (path, text) in documents() {
        let dir = path.parent().unwrap();
        for link in text.split("](").skip(1).filter_map(|rest| rest.split(')').next()) {
            let target = link.split('#').next().unwrap_or("").split_whitespace().next().unwrap_or("");
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            assert!(dir.join(target).exists(), "{}: the link ({link}) leads nowhere", path.display());
        }
    }
}
