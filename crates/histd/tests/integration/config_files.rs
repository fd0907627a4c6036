//! Config files as users have them, and `histd check-config`.

use std::process::Command;

use crate::harness::{temp_dir, Carbon, Daemon};

/// Etsy's own exampleConfig.js shape: a comment, leading commas, unquoted keys.
const ETSY_EXAMPLE: &str = r#"/*
Required Variables:
  port:             StatsD listening port [default: 8125]
*/
{
  graphitePort: 2003
, graphiteHost: "graphite.example.com"
, port: 8125
, backends: [ "./backends/graphite" ]
, graphite: { legacyNamespace: false }
}
"#;

fn check_config(text: &str) -> std::process::Output {
    let dir = temp_dir("check");
    let path = dir.join("config.js");
    std::fs::write(&path, text).unwrap();
    Command::new(env!("CARGO_BIN_EXE_histd")).args(["check-config", path.to_str().unwrap()]).output().unwrap()
}

#[test]
fn etsys_example_config_is_accepted_as_is() {
    let output = check_config(ETSY_EXAMPLE);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let effective: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(effective["graphite"]["host"], "graphite.example.com");
    assert_eq!(effective["graphite"]["legacyNamespace"], false);
    assert_eq!(
        effective["servers"][0],
        serde_json::json!({ "server": "./servers/udp", "address": "0.0.0.0", "port": 8125 }),
        "in Etsy's terms, not Rust's (issue 18)"
    );
    assert_eq!(effective["ingest"]["udpReaderMode"], "reuseport");
    assert_eq!(effective["mgmt"], "127.0.0.1:8126");
}

#[test]
fn an_etsy_config_runs_unmodified_but_for_its_ports() {
    let carbon = Carbon::start();
    let text = ETSY_EXAMPLE
        .replace("graphite.example.com", "127.0.0.1")
        .replace("graphitePort: 2003", &format!("graphitePort: {}", carbon.port))
        .replace("port: 8125", "port: 0, address: '127.0.0.1', mgmt_port: 0, http_port: 0, flushInterval: 200");
    let daemon = Daemon::start("etsy-example", &text);
    daemon.send_udp("example:1|c");
    carbon.wait_flush(|f| f.get("stats.counters.example.count") == Some("1"));
}

#[test]
fn bad_configs_name_the_key_and_exit_two() {
    let cases = [
        ("{ flushInterval: 'soon' }", "flushInterval"),
        ("{ percentThreshold: [90, 150] }", "percentThreshold"),
        ("{ graphite: { globalPrefix: 5 } }", "graphite.globalPrefix"),
        ("{ servers: [ { server: './servers/http' } ] }", "servers[0].server"),
        ("{ backends: ['./backends/influxdb'] }", "backends[0]"),
        ("{ histogram: [ { metric: 'x', bins: [5, 2] } ] }", "histogram[0].bins"),
        ("{ mgmt_port: 99999 }", "mgmt_port"),
        ("{ port: 8125 ", "syntax error at line 1"),
        // Issue 52: a file the daemon would read at start and cannot (a certificate).
        ("{ http: { tls: { certFile: '/nonexistent/c.pem', keyFile: '/nonexistent/k.pem' } } }", "http.tls"),
        ("{ backends: ['stroe'], port: 'x' }", "did you mean 'store'?"),
    ];
    for (text, key) in cases {
        let output = check_config(text);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{text}: {stderr}");
        assert!(stderr.contains(key), "{text}: the error names {key}: {stderr}");
        // Nothing on standard output, where a script would take it for the effective config.
        assert!(output.stdout.is_empty(), "{text}: {}", String::from_utf8_lossy(&output.stdout));
    }
}

/// Issue 18: a typo used to pass `check-config` with exit 0 (only listed inside its JSON).
#[test]
fn check_config_exits_one_on_unknown_keys_and_suggests_the_key_meant() {
    let typo = check_config("{ flushIntreval: 1000, port: 8125 }");
    let stderr = String::from_utf8_lossy(&typo.stderr);
    assert_eq!(typo.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("`flushIntreval`") && stderr.contains("did you mean `flushInterval`?"), "{stderr}");
    let etsy_only = check_config("{ title: 'statsd', port: 8125 }");
    let stderr = String::from_utf8_lossy(&etsy_only.stderr);
    assert!(etsy_only.status.success(), "Etsy's own unused keys are accepted: {stderr}");
    assert!(stderr.contains("`title`: Etsy's key, not used by histd"), "{stderr}");
}

#[test]
fn run_without_a_config_prints_help() {
    let output = Command::new(env!("CARGO_BIN_EXE_histd")).args(["run", "--help"]).output().unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("--config"));
}

#[test]
fn histd_query_and_health_exit_one_when_they_cannot_ask_and_two_for_bad_input() {
    let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", unused.local_addr().unwrap());
    drop(unused); // nothing listens there now
    let cases = [
        (vec!["count(x)", "--url", url.as_str()], 1, "cannot reach histd"),
        (vec!["p99(x)", "--url", url.as_str()], 2, "unknown function"),
        (vec!["count(x)", "--from", "yesterday", "--url", url.as_str()], 2, "parameter `from`"),
        (vec!["count(x)", "--data-dir", "/nonexistent/histd"], 2, "no store at"),
    ];
    for (args, code, message) in cases {
        let output = Command::new(env!("CARGO_BIN_EXE_histd")).arg("query").args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    // `histd health` alike: nothing answering is unhealthy (1), a URL it cannot use is 2.
    for (url, code, message) in [(url.as_str(), 1, "cannot reach histd"), ("ftp://x", 2, "http:// or https://")] {
        let output = Command::new(env!("CARGO_BIN_EXE_histd")).args(["health", "--url", url]).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "health {url}: {stderr}");
        assert!(stderr.contains(message), "health {url}: {stderr}");
    }
}

/// Issue 32: the command line helps a new user: a misspelled subcommand or flag gets a "did
/// you mean", `--help` lists every subcommand (the manual pages and completions too) and
/// check-config's exit codes.
#[test]
fn the_command_line_suggests_and_lists_everything() {
    let histd = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_histd")).args(args).output().unwrap();
    let cases: &[(&[&str], &str)] =
        &[(&["runn"], "'run'"), (&["run", "--prot", "1"], "--port"), (&["chek-config", "x"], "'check-config'")];
    for (args, suggestion) in cases {
        let output = histd(args);
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.code() == Some(2) && said.contains("similar") && said.contains(suggestion),
            "{args:?}: {said}"
        );
    }
    let help = String::from_utf8_lossy(&histd(&["--help"]).stdout).to_string();
    for subcommand in
        ["run", "proxy", "check-config", "config-keys", "query", "health", "top", "bench", "man", "completions"]
    {
        assert!(help.contains(&format!("  {subcommand}")), "--help lists {subcommand}: {help}");
    }
    let check = String::from_utf8_lossy(&histd(&["check-config", "--help"]).stdout).to_string();
    assert!(check.contains("exit 0") && check.contains("1:") && check.contains("2:"), "{check}");
}
