//! Exact Graphite lines, in both namespaces (etsy-statsd.md §4, §5).

use crate::harness::{config, Carbon, Daemon, Flush};

/// Sends `packet` in one datagram, waits until it is counted, stops the daemon (final flush)
/// and returns the flush that carries it.
fn final_flush(name: &str, extra: &str, packet: &str) -> Flush {
    let carbon = Carbon::start();
    let daemon = Daemon::start(name, &config(&carbon, 60_000, extra));
    daemon.send_udp(packet);
    daemon.wait_received(packet.lines().filter(|l| !l.is_empty()).count() as u64);
    assert!(daemon.terminate());
    carbon.wait_flush(|_| true);
    let flushes = carbon.flushes();
    assert_eq!(flushes.len(), 1, "one flush, at shutdown: {flushes:#?}");
    flushes.into_iter().next().unwrap()
}

fn assert_lines(flush: &Flush, want: &[(&str, &str)]) {
    for (name, value) in want {
        assert_eq!(flush.get(name), Some(*value), "{name} in\n{}", flush.lines.join("\n"));
    }
}

fn one_to_ten() -> String {
    (1..=10).map(|v| format!("t:{v}|ms\n")).collect()
}

#[test]
fn worked_example_in_the_legacy_namespace() {
    let flush = final_flush("legacy", "percentThreshold: [90, 50, 99.9, -10],", &one_to_ten());
    assert_lines(
        &flush,
        &[
            ("stats.timers.t.count_90", "9"),
            ("stats.timers.t.mean_90", "5"),
            ("stats.timers.t.upper_90", "9"),
            ("stats.timers.t.sum_90", "45"),
            ("stats.timers.t.sum_squares_90", "285"),
            ("stats.timers.t.count_50", "5"),
            ("stats.timers.t.mean_50", "3"),
            ("stats.timers.t.upper_50", "5"),
            ("stats.timers.t.count_99_9", "10"),
            ("stats.timers.t.upper_99_9", "10"),
            ("stats.timers.t.count_top10", "1"),
            ("stats.timers.t.lower_top10", "10"),
            ("stats.timers.t.mean_top10", "10"),
            ("stats.timers.t.std", "2.8722813232690143"),
            ("stats.timers.t.upper", "10"),
            ("stats.timers.t.lower", "1"),
            ("stats.timers.t.count", "10"),
            ("stats.timers.t.count_ps", "0.16666666666666666"),
            ("stats.timers.t.sum", "55"),
            ("stats.timers.t.sum_squares", "385"),
            ("stats.timers.t.mean", "5.5"),
            ("stats.timers.t.median", "5.5"),
            ("stats.statsd.packets_received", "0.016666666666666666"),
            ("stats_counts.statsd.packets_received", "1"),
            ("stats_counts.statsd.metrics_received", "10"),
            ("stats_counts.statsd.bad_lines_seen", "0"),
            ("statsd.numStats", "4"),
        ],
    );
    let timer_lines: Vec<&str> =
        flush.lines.iter().filter(|l| l.starts_with("stats.timers.t.")).map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(
        &timer_lines[..6],
        [
            "stats.timers.t.count_90",
            "stats.timers.t.mean_90",
            "stats.timers.t.upper_90",
            "stats.timers.t.sum_90",
            "stats.timers.t.sum_squares_90",
            "stats.timers.t.count_50"
        ],
        "Etsy's order"
    );
    for internal in [
        "stats.statsd.graphiteStats.calculationtime",
        "stats.statsd.processing_time",
        "stats.statsd.graphiteStats.last_flush",
        "stats.statsd.graphiteStats.flush_length",
    ] {
        assert!(flush.get(internal).is_some(), "{internal}");
    }
}

#[test]
fn worked_example_in_the_new_namespace() {
    let flush = final_flush(
        "namespaced",
        "percentThreshold: [90, 50, 99.9, -10], graphite: { legacyNamespace: false },",
        &(one_to_ten() + "c:5|c\ng:3|g\nu:a|s\nu:b|s\n"),
    );
    assert_lines(
        &flush,
        &[
            ("stats.timers.t.mean_90", "5"),
            ("stats.timers.t.lower_top10", "10"),
            ("stats.timers.t.median", "5.5"),
            ("stats.counters.c.rate", "0.08333333333333333"),
            ("stats.counters.c.count", "5"),
            ("stats.gauges.g", "3"),
            ("stats.sets.u.count", "2"),
            ("stats.counters.statsd.metrics_received.count", "14"),
            ("stats.statsd.numStats", "7"),
        ],
    );
}

#[test]
fn every_prefix_and_suffix_option() {
    let flush = final_flush(
        "prefixes",
        "prefixStats: 'mystatsd', graphite: { legacyNamespace: false, globalPrefix: 'gp', prefixCounter: '', \
         prefixTimer: 'tim', prefixGauge: 'gg', prefixSet: 'st', globalSuffix: 'sfx' },",
        "c:1|c\nt:1|ms\ng:1|g\nu:1|s\ntg:1|c|#env:prod\n",
    );
    assert_lines(
        &flush,
        &[
            ("gp.c.rate.sfx", "0.016666666666666666"),
            ("gp.c.count.sfx", "1"),
            ("gp.tim.t.mean_90.sfx", "1"),
            ("gp.gg.g.sfx", "1"),
            ("gp.st.u.count.sfx", "1"),
            ("gp.tg.count.sfx;env=prod", "1"),
            ("gp.mystatsd.numStats.sfx", "8"),
            ("gp.mystatsd.bad_lines_seen.count.sfx", "0"),
            ("gp.mystatsd.processing_time.sfx", flush.get("gp.mystatsd.processing_time.sfx").unwrap_or("missing")),
        ],
    );
    let legacy = final_flush("legacy-suffix", "graphite: { globalSuffix: 'sfx', globalPrefix: 'ignored' },", "c:2|c\n");
    assert_lines(
        &legacy,
        &[("stats.c.sfx", "0.03333333333333333"), ("stats_counts.c.sfx", "2"), ("statsd.numStats.sfx", "4")],
    );
}

#[test]
fn counters_sample_rates_tags_and_sanitising() {
    let flush = final_flush(
        "counters",
        "flush_counts: true,",
        "k:1|c:2|c:3|c|@0.5\nr:1|c|@0.1\nr:1|c|@2e-1\ntg:1|c|#env:prod,role;x\ntg2:1|c|@0.5|#a:b\n\
         a b/c!d:1|c\nk=v;z:4|c\ncrlf:2|c\r\ngt;dc=east:7|c\n",
    );
    assert_lines(
        &flush,
        &[
            ("stats_counts.k", "9"),
            ("stats_counts.r", "15"),
            ("stats_counts.tg;env=prod;role_x", "1"),
            ("stats_counts.tg2;a=b", "2"),
            ("stats_counts.a_b-cd", "1"),
            ("stats_counts.k=v;z", "4"),
            ("stats_counts.crlf", "2"),
            ("stats_counts.gt;dc=east", "7"),
            ("stats.gt;dc=east", "0.11666666666666667"),
        ],
    );
    let no_counts = final_flush("no-counts", "flush_counts: false,", "k:3|c\n");
    assert_eq!(no_counts.get("stats_counts.k"), None);
    assert_eq!(no_counts.get("stats.k"), Some("0.05"));
}

#[test]
fn gauges_follow_delta_rules() {
    let flush = final_flush(
        "gauges",
        "",
        "g:10|g\ng:+5|g\ng:-3|g\nneg:-5|g\nzero:0|g\nzero:-7|g\nplus:+2|g\ndog:1|g|#env:dev|c:ci-83c0\n",
    );
    assert_lines(
        &flush,
        &[
            ("stats.gauges.g", "12"),
            ("stats.gauges.neg", "-5"),
            ("stats.gauges.zero", "-7"),
            ("stats.gauges.plus", "2"),
            ("stats.gauges.dog;env=dev", "1"),
        ],
    );
}

#[test]
fn histograms_sets_and_dogstatsd_types() {
    let flush = final_flush(
        "histograms",
        "histogram: [ { metric: 'nobins', bins: [] }, { metric: 'lat', bins: [2, 5, 'inf'] }, { metric: '', bins: [0.5, 100] } ],",
        "lat:1|ms\nlat:2|ms\nlat:3|ms\nlat:5|ms\nlat:6|ms\nx.nobins:1|ms\nother:0.1|ms\nother:200|ms\n\
         h:1:2:3|h\nd:4|d|@0.5\nu:1|s\nu:01|s\nu:1|s\n",
    );
    assert_lines(
        &flush,
        &[
            ("stats.timers.lat.histogram.bin_2", "1"),
            ("stats.timers.lat.histogram.bin_5", "2"),
            ("stats.timers.lat.histogram.bin_inf", "2"),
            ("stats.timers.other.histogram.bin_0_5", "1"),
            ("stats.timers.other.histogram.bin_100", "0"),
            ("stats.timers.h.count", "3"),
            ("stats.timers.h.mean", "2"),
            ("stats.timers.d.count", "2"),
            ("stats.sets.u.count", "2"),
        ],
    );
    assert!(!flush.values.keys().any(|k| k.contains("nobins.histogram")), "an empty bins list turns histograms off");
}

#[test]
fn calculated_timer_metrics_filter_keeps_fractional_thresholds() {
    let flush = final_flush(
        "calculated",
        "percentThreshold: [90, 99.9], calculatedTimerMetrics: ['mean_percent', 'count_ps'],",
        "t:1|ms\nt:2|ms\n",
    );
    let timer: Vec<&String> = flush.values.keys().filter(|k| k.starts_with("stats.timers.t.")).collect();
    assert_eq!(timer, ["stats.timers.t.count_ps", "stats.timers.t.mean_90", "stats.timers.t.mean_99_9"]);
}

#[test]
fn bad_lines_are_counted_by_reason_and_never_crash() {
    let packet = "k:1|c|@+0.5\nfoo\nfoo:abc|c\nfoo:-5|ms\nfoo:1|zz\nok:1|c\n\u{0}\u{1}\u{ff}:1|c\n:1|c\n";
    let flush = final_flush("bad", "histdSelfMetrics: true,", packet);
    assert_lines(
        &flush,
        &[
            ("stats_counts.k", "2"),
            ("stats_counts.ok", "1"),
            ("stats_counts.statsd.bad_lines_seen", "6"),
            ("stats_counts.statsd.bad_lines.no_value", "1"),
            ("stats_counts.statsd.bad_lines.bad_value", "1"),
            ("stats_counts.statsd.bad_lines.negative_timer", "1"),
            ("stats_counts.statsd.bad_lines.unknown_type", "1"),
            ("stats_counts.statsd.bad_lines.empty_name", "2"),
            ("stats_counts.statsd.metrics_received", "8"),
        ],
    );
}

/// Issue 22 C10 (a): Etsy's numStats after one malformed line is 4 (three `statsd.*` counters
/// and the lag gauge), and no name Etsy would not send appears.
#[test]
fn c10_one_bad_line_leaves_etsys_names_and_num_stats() {
    let carbon = Carbon::start();
    let daemon = Daemon::start("c10-numstats", &config(&carbon, 200, "graphite: { legacyNamespace: false },"));
    carbon.wait_flush(|_| true); // the lag gauge exists from the second flush on, in Etsy too
    daemon.send_udp("a_bad_test_value|z");
    let flush = carbon.wait_flush(|f| f.get("stats.counters.statsd.bad_lines_seen.count") == Some("1"));
    assert_eq!(flush.get("stats.statsd.numStats"), Some("4"));
    let extra: Vec<&String> = flush
        .values
        .keys()
        .filter(|name| name.contains("bad_lines.") || name.contains("graphiteStats.errors"))
        .collect();
    assert!(extra.is_empty(), "histd's own names without histdSelfMetrics: {extra:?}");
    drop(daemon);
}

/// Issue 22 C10 (b): `graphiteProtocol: "pickle"` sends what carbon's pickle receiver reads:
/// decoded here by Python's own unpickler, as carbon decodes it.
#[test]
fn c10_pickle_messages_decode_with_pythons_unpickler() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let collector = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut stream, &mut bytes).unwrap();
        bytes
    });
    let daemon = Daemon::start(
        "pickle",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 60000, \
               graphiteHost: '127.0.0.1', graphiteProtocol: 'pickle', graphitePicklePort: {port} }}"
        ),
    );
    daemon.send_udp("c:3|c\nt:5|ms\nt:7|ms");
    daemon.wait_received(3);
    assert!(daemon.terminate());
    let bytes = collector.join().unwrap();
    let decoded = unpickle_with_python(&bytes);
    let line = |name: &str| decoded.lines().find(|l| l.starts_with(&format!("{name} "))).map(str::to_string);
    assert!(line("stats_counts.c").is_some_and(|l| l.starts_with("stats_counts.c '3' ")), "{decoded}");
    assert!(line("stats.timers.t.upper").is_some_and(|l| l.starts_with("stats.timers.t.upper '7' ")), "{decoded}");
    assert!(line("stats.statsd.graphiteStats.flush_length").is_some(), "{decoded}");
}

/// Every `(path, (timestamp, value))` of length-prefixed pickle messages, as `path 'value' ts`
/// lines, by `pickle.loads`.
fn unpickle_with_python(bytes: &[u8]) -> String {
    let script = "import pickle, struct, sys\n\
                  data = sys.stdin.buffer.read()\n\
                  at = 0\n\
                  while at < len(data):\n\
                  \x20   (length,) = struct.unpack('>I', data[at:at + 4])\n\
                  \x20   for path, (ts, value) in pickle.loads(data[at + 4:at + 4 + length]):\n\
                  \x20       print(path, repr(value), ts)\n\
                  \x20   at += 4 + length\n";
    let mut python = std::process::Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 (scripts/test installs it)");
    std::io::Write::write_all(python.stdin.as_mut().unwrap(), bytes).unwrap();
    drop(python.stdin.take());
    let output = python.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// Issue 19 B11: `Infinity`, `1e309` and rates like `@1e-300` became Infinity counters and NaN
/// statistics in Graphite (Etsy emits them). They are bad lines now, counted by reason.
#[test]
fn b11_non_finite_values_and_rates_are_rejected() {
    let packet = "inf:Infinity|c\nbig:1e309|g\nrate:1e300|c|@1e-300\nslow:5|ms|@1e-320\nok:1|c\n";
    let flush = final_flush("non-finite", "histdSelfMetrics: true,", packet);
    assert_lines(
        &flush,
        &[
            ("stats_counts.ok", "1"),
            ("stats_counts.statsd.bad_lines.bad_value", "2"),
            ("stats_counts.statsd.bad_lines.bad_sample_rate", "2"),
        ],
    );
    let odd: Vec<&String> = flush.lines.iter().filter(|l| l.contains("Infinity") || l.contains("NaN")).collect();
    assert!(odd.is_empty(), "{odd:?}");
}
