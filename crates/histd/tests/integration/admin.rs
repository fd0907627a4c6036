//! The management interface: each command's exact bytes (etsy-statsd.md §6).

use crate::harness::{assert_text_eq, config, Carbon, Daemon};

fn daemon(name: &str) -> (Carbon, Daemon) {
    let carbon = Carbon::start();
    let daemon = Daemon::start(name, &config(&carbon, 60_000, "backends: ['./backends/graphite'],"));
    (carbon, daemon)
}

#[test]
fn help_health_and_errors() {
    let (_carbon, daemon) = daemon("admin-basic");
    let line = |command: &str| daemon.admin_until(command, |reply| reply.ends_with('\n'));
    assert_eq!(
        line("help\n"),
        "Commands: stats, counters, timers, gauges, delcounters, deltimers, delgauges, health, config, quit\n\n"
    );
    // `histd health` (the container's check) says what the management command set.
    let url = format!("http://{}", daemon.address("http"));
    let histd_health = || {
        let output =
            std::process::Command::new(env!("CARGO_BIN_EXE_histd")).args(["health", "--url", &url]).output().unwrap();
        (output.status.code(), String::from_utf8_lossy(&output.stdout).to_string())
    };
    let (code, said) = histd_health();
    assert!(code == Some(0) && said.starts_with("up (") && said.contains(" s running"), "{code:?} {said}");
    assert_eq!(line("health\n"), "health: up\n");
    assert_eq!(line("health DOWN\n"), "health: down\n");
    let (code, said) = histd_health();
    assert!(code == Some(1) && said.starts_with("down ("), "{code:?} {said}");
    assert_eq!(line("health\n"), "health: down\n");
    assert_eq!(line("health sideways\n"), "health: down\n");
    assert_eq!(line("health up\r\n"), "health: up\n");
    assert_eq!(histd_health().0, Some(0));
    assert_eq!(line("bogus\n"), "ERROR\n");
    assert_eq!(line("\n"), "ERROR\n");
    // Line framed: two commands in one segment both run.
    assert_eq!(daemon.admin_until("health\nbogus\n", |r| r.ends_with("ERROR\n")), "health: up\nERROR\n");
    assert_eq!(daemon.admin_until("quit\n", |_| false), "");
}

#[test]
fn dumps_and_deletes() {
    let (_carbon, daemon) = daemon("admin-dumps");
    daemon.send_udp("c.x:1|c\nc.y:2|c\nother:3|c\ng.a:3|g\nt:1|ms\nt:2|ms\nu:a|s\n");
    daemon.wait_received(7);
    assert_text_eq(
        &daemon.admin("counters"),
        "{\n  'c.x': 1,\n  'c.y': 2,\n  other: 3,\n  'statsd.bad_lines_seen': 0,\n  'statsd.metrics_received': 7,\n  'statsd.packets_received': 1\n}\nEND\n\n",
    );
    assert_eq!(daemon.admin("gauges"), "{ 'g.a': 3 }\nEND\n\n");
    assert_eq!(daemon.admin("timers"), "{ t: [ 1, 2 ] }\nEND\n\n");
    assert_eq!(daemon.admin("sets"), "{ u: [ 'a' ] }\nEND\n\n");
    assert_text_eq(
        &daemon.admin("delcounters c.x c.* nothing"),
        "deleted: c.x\ndeleted: c.y\nmetric nothing not found\nEND\n\n",
    );
    assert_eq!(daemon.admin("delgauges g.a"), "deleted: g.a\nEND\n\n");
    assert_eq!(daemon.admin("deltimers t"), "deleted: t\nEND\n\n");
    assert_eq!(daemon.admin("delsets u"), "deleted: u\nEND\n\n");
    assert_eq!(daemon.admin("gauges"), "{}\nEND\n\n");
}

#[test]
fn stats_and_config() {
    let (carbon, daemon) = daemon("admin-stats");
    daemon.send_udp("ok:1|c\nfoo\n");
    daemon.wait_received(2);
    let stats = daemon.admin("stats");
    let names: Vec<&str> = stats.lines().map(|l| l.split(':').next().unwrap()).collect();
    assert_eq!(&names[..3], ["uptime", "messages.last_msg_seen", "messages.bad_lines_seen"]);
    assert!(stats.contains("messages.bad_lines_seen: 1\n"), "{stats}");
    assert!(stats.contains("messages.bad_lines.no_value: 1\n"), "{stats}");
    assert!(stats.contains("graphite.last_flush: "), "{stats}");
    assert!(stats.contains("graphite.last_exception: "), "{stats}");
    assert!(stats.ends_with("END\n\n"));
    let config = daemon.admin_until("config\n", |r| r.contains("graphitePort"));
    assert!(config.starts_with("\naddress: 127.0.0.1\nport: 0\n"), "{config}");
    assert!(config.contains(&format!("graphitePort: {}\n", carbon.port)), "{config}");
    assert!(config.contains("backends > 0: ./backends/graphite\n"), "{config}");
}

/// Issue 32, item 5: the bad line, shown: the last rejected line of each reason, with its
/// sender, in `stats` and `/health`, and one log line an interval with the latest.
#[test]
fn the_last_bad_line_of_each_reason_is_shown_with_its_sender() {
    let daemon = crate::harness::Daemon::start_process(
        "bad-line-examples",
        "{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, flushInterval: 200, backends: [] }",
    );
    daemon.send_tcp("good:1|c\nbad.value:abc|c\nno.type:1\n\u{1b}]0;title\u{7}:x|c\n");
    daemon.wait_received(4);
    let stats = daemon.admin("stats");
    assert!(stats.contains("messages.last_bad_line.no_type: no.type:1 (from 127.0.0.1, "), "{stats}");
    assert!(
        stats.contains("messages.last_bad_line.bad_value: \\u{1b}]0;title\\u{7}:x|c (from 127.0.0.1, "),
        "the latest of its reason, escaped: {stats}"
    );
    let health = daemon.http_json("/health");
    let example = &health["bad_line_examples"]["no_type"];
    assert_eq!(
        (example["line"].as_str(), example["source"].as_str()),
        (Some("no.type:1"), Some("127.0.0.1")),
        "{health}"
    );
    assert!(crate::harness::eventually(|| daemon.stderr().contains("bad lines this interval; the latest")), "logged");
    let logged = daemon.stderr().matches("bad lines this interval").count();
    assert_eq!(logged, 1, "one log line for the one interval that had bad lines");
    assert!(daemon.terminate());
}

/// Over UDP, with no allow list on the listener, a bad line's example names its sender too
/// (every datagram's source is read).
#[test]
fn a_bad_udp_line_names_its_sender_without_an_allow_list() {
    let daemon = crate::harness::Daemon::start(
        "bad-udp-line",
        "{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 200, backends: [] }",
    );
    daemon.send_udp("good:1|c\nno.type.udp:1");
    daemon.wait_received(2);
    let health = daemon.http_json("/health");
    let example = &health["bad_line_examples"]["no_type"];
    assert_eq!(
        (example["line"].as_str(), example["source"].as_str()),
        (Some("no.type.udp:1"), Some("127.0.0.1")),
        "{health}"
    );
}
