//! Cardinality budgets through the real daemon (issue 20): a million new names stay within
//! `maxSeries`, folded into an overflow series whose totals are exact, the offender named,
//! and the memory of a million series never kept.

use std::io::Write;

use crate::harness::{eventually, rss_kib, Carbon, Daemon};

const NAMES: usize = 1_000_000;
const TAGGED: usize = 5_000;

#[test]
fn a_cardinality_explosion_stays_within_its_budget() {
    let carbon = Carbon::start();
    let daemon = Daemon::start_process(
        "budget-explosion",
        &format!(
            "{{ servers: [ {{ server: 'tcp', address: '127.0.0.1', port: 0 }} ], mgmt_port: 0, http_port: 0, \
               graphiteHost: '127.0.0.1', graphitePort: {}, flushInterval: 1000, \
               maxSeries: {{ counters: 10000 }}, maxTagValues: 1000 }}",
            carbon.port
        ),
    );
    let before = rss_kib(&daemon);
    let mut stream = std::net::TcpStream::connect(daemon.address("tcp")).unwrap();
    // First a tag that takes 5,000 values (1,000 allowed), then a million new names.
    let tagged: String = (0..TAGGED).map(|i| format!("api.req:1|c|#user:u{i}\n")).collect();
    stream.write_all(tagged.as_bytes()).unwrap();
    daemon.wait_received(TAGGED as u64);
    let mut batch = String::new();
    for i in 0..NAMES {
        batch.push_str(&format!("explode.user.{i}.logins:1|c\n"));
        if batch.len() > 60_000 {
            stream.write_all(batch.as_bytes()).unwrap();
            batch.clear();
        }
    }
    stream.write_all(batch.as_bytes()).unwrap();
    drop(stream);
    daemon.wait_received((TAGGED + NAMES) as u64);
    let folded = |reason: &str| daemon.stat(&format!("budget.folded_series.{reason}"));
    assert!(eventually(|| folded("max_series") == (NAMES - 9_000) as f64), "{}", daemon.admin("stats"));
    assert_eq!(daemon.stat("budget.series.counters"), 10_000.0);
    assert_eq!(folded("tag_values"), (TAGGED - 1_000) as f64);
    assert_eq!(folded("series_per_name"), 0.0);
    let stats = daemon.admin("stats");
    assert!(stats.contains("budget.offender.1: explode.user.*.logins "), "{stats}");
    // Every line is counted: in its own series or in an overflow series.
    let sum = |name: &str| carbon.total(name);
    assert!(
        eventually(|| sum("stats_counts.__overflow__") == (NAMES - 9_000) as f64),
        "{} in __overflow__",
        sum("stats_counts.__overflow__")
    );
    assert_eq!(sum("stats_counts.api.req.__overflow__"), (TAGGED - 1_000) as f64);
    // A million series are not kept: once the readers' tables are given back, the daemon holds
    // the budget's 10,000 (1M counters take about 100 MB).
    let settled = eventually(|| rss_kib(&daemon) < before + 40 * 1024);
    assert!(settled, "{before} KiB before, {} KiB after the explosion", rss_kib(&daemon));
    let health = daemon.http_json("/api/v1/budgets");
    assert_eq!(health["series"]["counters"], 10_000);
    assert_eq!(health["offenders"][0]["pattern"], "explode.user.*.logins");
    assert!(daemon.terminate());
}

/// `idleTTL`: idle series are flushed as zero for their TTL, then no more, counted per type.
#[test]
fn idle_series_expire_after_their_ttl() {
    let carbon = Carbon::start();
    let daemon = Daemon::start(
        "idle-ttl",
        &format!(
            "{{ servers: [ {{ server: 'tcp', address: '127.0.0.1', port: 0 }} ], mgmt_port: 0, http_port: 0, \
               graphiteHost: '127.0.0.1', graphitePort: {}, flushInterval: 200, \
               idleTTL: {{ counters: 400, timers: 400, sets: 400 }} }}",
            carbon.port
        ),
    );
    daemon.send_tcp("idle.c:1|c\nidle.t:5|ms\nidle.s:a|s\nidle.g:3|g\n");
    let expired = |kind: &str| daemon.stat(&format!("budget.idle_expired.{kind}"));
    assert!(eventually(|| expired("counters") == 1.0 && expired("timers") == 1.0 && expired("sets") == 1.0));
    assert_eq!(expired("gauges"), 0.0, "gauges have no TTL here: kept");
    let flushes =
        carbon.wait_flush(|f| f.get("stats.gauges.idle.g").is_some() && f.get("stats_counts.idle.c").is_none());
    assert_eq!(flushes.get("stats.timers.idle.t.count"), None, "the timer went too");
    let reported: Vec<_> =
        carbon.flushes().into_iter().filter_map(|f| f.get("stats_counts.idle.c").map(str::to_string)).collect();
    assert_eq!(reported, ["1", "0", "0"], "its value, then two idle flushes (400 ms)");
    let budgets = daemon.http_json("/api/v1/budgets");
    assert_eq!(budgets["idle_expired"]["counters"], 1, "{budgets}");
}
