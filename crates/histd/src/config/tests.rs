use std::time::Duration;

use super::*;

fn parse(text: &str) -> Config {
    Config::from_text(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn error(text: &str) -> String {
    Config::from_text(text).map(|_| ()).unwrap_err().to_string()
}

#[test]
fn defaults_match_etsy() {
    let config = parse("{}");
    assert_eq!(config.listeners, [Listener::Udp("0.0.0.0:8125".parse().unwrap(), None)]);
    assert_eq!(config.mgmt, "127.0.0.1:8126".parse().unwrap());
    assert_eq!(config.backends, [Backend::Graphite]);
    assert_eq!(config.agg.flush_interval, Duration::from_secs(10));
    assert_eq!(config.agg.thresholds.iter().map(|t| t.percent).collect::<Vec<_>>(), [90.0]);
    assert_eq!(config.agg.prefix_stats, "statsd");
    assert!(config.agg.key_name_sanitize);
    assert!(!config.agg.delete_counters);
    assert_eq!(config.graphite.host, None);
    assert_eq!(config.graphite.port, 2003);
    assert!(config.graphite.legacy_namespace);
    assert!(config.graphite.flush_counts);
    assert_eq!(config.graphite.global_prefix, "stats");
    assert_eq!(config.repeater.protocol, RepeaterProtocol::Udp4);
}

#[test]
fn reads_javascript_object_literals() {
    let config = parse(
        "// a comment\n{ port: 9125, address: '::1', address_ipv6: true, /* inline */ flushInterval: '5000', \
         percentThreshold: 95, backends: ['console', './backends/graphite',], mgmt_address: '0.0.0.0', }",
    );
    assert_eq!(config.listeners, [Listener::Udp("[::1]:9125".parse().unwrap(), None)]);
    assert_eq!(config.agg.flush_interval, Duration::from_secs(5));
    assert_eq!(config.agg.thresholds[0].percent, 95.0);
    assert_eq!(config.backends, [Backend::Console, Backend::Graphite]);
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
            Listener::Tcp("0.0.0.0:2".parse().unwrap()),
            Listener::UnixDatagram(UnixPath { path: "/tmp/x.sock".into(), mode: Some(0o660) }),
            Listener::Udp("0.0.0.0:3".parse().unwrap(), Some(1_048_576)),
        ]
    );
}

#[test]
fn errors_name_the_key() {
    let cases = [
        ("{ flushInterval: 0 }", "config key `flushInterval`"),
        ("{ percentThreshold: 0 }", "config key `percentThreshold`"),
        ("{ percentThreshold: [90, -101] }", "config key `percentThreshold`"),
        ("{ graphite: { legacyNamespace: 'no' } }", "config key `graphite.legacyNamespace`"),
        ("{ graphiteProtocol: 'pickle' }", "config key `graphiteProtocol`"),
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
        ("{ udpReaders: 0 }", "config key `udpReaders`"),
        ("{ udpReaderMode: 'fast' }", "config key `udpReaderMode`"),
        ("{ servers: [ { recvBufferSize: -1 } ] }", "config key `servers[0].recvBufferSize`"),
        ("[1, 2]", "must be an object"),
    ];
    for (text, want) in cases {
        let message = error(text);
        assert!(message.contains(want), "{text}: {message}");
    }
}

#[test]
fn unknown_keys_are_reported_not_fatal() {
    let config = parse("{ influxdb: { host: 'x' }, port: 8125 }");
    assert_eq!(config.ignored_keys, ["influxdb"]);
}

#[test]
fn the_local_default_listens_on_loopback() {
    let config = Config::local_default();
    assert_eq!(
        config.listeners,
        [Listener::Udp("127.0.0.1:8125".parse().unwrap(), None), Listener::Tcp("127.0.0.1:8125".parse().unwrap())]
    );
    assert_eq!(config.backends, [Backend::Store]);
    assert_eq!(config.store.http, "127.0.0.1:8127".parse().unwrap());
}
