//! Issue 49's "done when": the fleet docs/fleet.md sets up, run by the script a reader runs
//! (`scripts/fleet-on-one-machine`, here on this test binary's three brokers): two globals of
//! one group over HTTPS with read tokens, each the other's peer, and two locals. Every answer
//! of either global is the group's (bin for bin the histogram of one histd fed every sample,
//! `"partial": false`); `histd query`, `health` and `top` reach the globals over HTTPS with
//! `--ca-file` and `HISTD_TOKEN`; a browser signs in with the token typed into the page; with a
//! global SIGKILLed the other's answers say `"partial": true` and name it; restarted, data sent
//! after its restart is seen group-wide within 25 s.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use circllhist::Histogram;

use crate::harness::{temp_dir, within, Daemon};
use crate::kafka::{cluster, serial};

/// What the script wrote in `fleet.env`.
struct Fleet {
    dir: PathBuf,
    env: HashMap<String, String>,
}

impl Fleet {
    fn get(&self, key: &str) -> &str {
        self.env.get(key).unwrap_or_else(|| panic!("fleet.env has no {key}: {:?}", self.env))
    }

    /// The global's config file (`global-1.js`).
    fn config(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.js"))
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("--stop").arg(&self.dir).output();
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/fleet-on-one-machine")
}

fn histd() -> &'static str {
    env!("CARGO_BIN_EXE_histd")
}

/// Runs the script on this binary's brokers; its output, and the fleet it left running.
fn start_fleet() -> (String, Fleet) {
    let dir = temp_dir("fleet-on-one-machine");
    let output = Command::new(script())
        .arg(&dir)
        .env("HISTD", histd())
        .env("HISTD_FLEET_BROKERS", &cluster().bootstrap)
        .env("HISTD_FLEET_TOPIC", "histd-fleet-script")
        .output()
        .expect("bash runs the script");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let env_text = std::fs::read_to_string(dir.join("fleet.env")).unwrap_or_default();
    let env = env_text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect();
    let fleet = Fleet { dir, env };
    assert!(output.status.success(), "the script failed:\n{text}\n{}", String::from_utf8_lossy(&output.stderr));
    (text, fleet)
}

/// A histd tool (`query`, `health`, `top`) run against `url` with the fleet's CA and token:
/// its exit code and standard output and error.
fn tool(fleet: &Fleet, token: Option<&str>, args: &[&str]) -> (Option<i32>, String) {
    let mut command = Command::new(histd());
    command.args(args).arg("--ca-file").arg(fleet.get("FLEET_CA")).env_remove("HISTD_TOKEN");
    if let Some(token) = token {
        command.env("HISTD_TOKEN", token);
    }
    let output = command.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.code(), text)
}

/// A query's JSON answer from the global at `url`.
fn query(fleet: &Fleet, url: &str, expr: &str) -> serde_json::Value {
    let args = ["query", "--url", url, "--from", "-15m", "--step", "1h", "--format", "json", expr];
    let (code, text) = tool(fleet, Some(fleet.get("HISTD_TOKEN")), &args);
    match code {
        Some(0) => serde_json::from_str(text.lines().find(|line| line.starts_with('{')).unwrap_or("{}")).unwrap(),
        _ => serde_json::json!({ "failed": text }),
    }
}

/// The one value of a query over the last 15 minutes (one step), if any.
fn value(answer: &serde_json::Value) -> Option<f64> {
    answer["points"].as_array()?.iter().filter_map(|point| point[1].as_f64()).next()
}

/// A global's `/api/v1/histogram` of `name`, asked over HTTPS as a tool asks (its config's read
/// token, the fleet's CA).
fn histogram(fleet: &Fleet, global: &str, name: &str) -> (Histogram, serde_json::Value) {
    let args = histd::api_client::ApiArgs {
        config: Some(fleet.config(global)),
        ca_file: Some(PathBuf::from(fleet.get("FLEET_CA"))),
        ..Default::default()
    };
    let endpoint = args.endpoint().unwrap();
    let path = format!("/api/v1/histogram?name={name}&from=-15m");
    let (status, body) = endpoint.get(&path, histd::api_client::ANSWERS).unwrap();
    assert_eq!(status, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    let histogram = answer["circllhist"].as_str().map_or_else(Histogram::new, |h| Histogram::from_base64(h).unwrap());
    (histogram, answer)
}

/// tests/e2e/sign-in.mjs in Chromium against the global at `url` (its certificate pinned):
/// the sign-in form, the token typed, `series` shown, the session cookie, signing out.
fn sign_in_with_a_browser(fleet: &Fleet, url: &str, series: &str) {
    let e2e = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/e2e");
    assert!(
        e2e.join("node_modules/playwright-core").is_dir(),
        "playwright-core is not installed: `npm ci` in tests/e2e (bash scripts/test does it first)"
    );
    let output = Command::new("node")
        .arg(e2e.join("sign-in.mjs"))
        .arg(format!("{url}/"))
        .arg(fleet.dir.join("reader.token"))
        .arg(series)
        .arg(fleet.dir.join("tls/global-1.pem"))
        .output()
        .expect("node (bash scripts/test installs it)");
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success() && !said.contains("FAIL"), "the browser's sign-in:\n{said}");
}

fn send(address: &str, lines: &str) {
    use std::io::Write;
    let mut connection = std::net::TcpStream::connect(address).unwrap();
    connection.write_all(lines.as_bytes()).unwrap();
}

fn timers(name: &str, values: std::ops::RangeInclusive<u32>) -> String {
    values.map(|value| format!("{name}:{value}.25|ms\n{name}.hits:1|c\n")).collect()
}

#[test]
fn the_fleet_on_one_machine_answers_as_one_system_through_a_global_killed_and_restarted() {
    let _serial = serial();
    let (output, fleet) = start_fleet();
    let (g1, g2) = (fleet.get("FLEET_GLOBAL_1").to_string(), fleet.get("FLEET_GLOBAL_2").to_string());
    let p99_lines: Vec<&str> = output.lines().filter(|line| line.starts_with("20")).collect();
    assert!(p99_lines.len() == 2 && p99_lines[0] == p99_lines[1], "each global's p99 is the group's:\n{output}");
    assert!(output.contains("group: 2 of 2 members answered"), "top shows the group:\n{output}");

    // Samples split over both locals, and one histd fed them all.
    let reference = Daemon::start(
        "fleet-one-machine-reference",
        "{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, \
           flushInterval: 500, backends: ['store'], store: { dataDir: '$DIR/store' } }",
    );
    let (to_1, to_2) = (timers("e2e.latency", 1..=700), timers("e2e.latency", 701..=2000));
    send(fleet.get("FLEET_LOCAL_1"), &to_1);
    send(fleet.get("FLEET_LOCAL_2"), &to_2);
    reference.send_tcp(&format!("{to_1}{to_2}"));
    let counted = |url: &str| value(&query(&fleet, url, "sum(e2e.latency.hits)"));
    assert!(within(Duration::from_secs(60), || counted(&g1) == Some(2000.0) && counted(&g2) == Some(2000.0)));
    assert!(within(Duration::from_secs(30), || crate::store_api::stored_count(&reference, "e2e.latency") == 2000.0));
    let single = reference.http_json("/api/v1/histogram?name=e2e.latency&from=-15m");
    let single_histogram = Histogram::from_base64(single["circllhist"].as_str().unwrap()).unwrap();
    for global in ["global-1", "global-2"] {
        let (group, answer) = histogram(&fleet, global, "e2e.latency");
        assert_eq!(group, single_histogram, "{global}: bin for bin the single histd's");
        assert_eq!(answer["partial"], false, "{global}: {answer}");
        assert_eq!((answer["count"].clone(), answer["sum"].clone()), (single["count"].clone(), single["sum"].clone()));
    }
    for expr in ["quantile(e2e.latency, 0.99)", "inverse_quantile(e2e.latency, 1500)", "count(e2e.latency)"] {
        let single =
            reference.http_json(&format!("/api/v1/query?expr={}&from=-15m&step=1h", crate::harness::url_encode(expr)));
        for url in [&g1, &g2] {
            let group = query(&fleet, url, expr);
            assert_eq!(group["points"], single["points"], "{expr} at {url}: {group}");
            assert_eq!(group["partial"], false, "{expr} at {url}: {group}");
        }
    }

    // The tools over HTTPS: with the token, without it (401, named), health and top.
    let (code, text) = tool(&fleet, Some(fleet.get("HISTD_TOKEN")), &["health", "--url", &g1]);
    assert!(code == Some(0) && text.starts_with("up") && text.contains("Kafka:"), "{text}");
    let (code, text) = tool(&fleet, None, &["query", "--url", &g1, "count(e2e.latency)"]);
    assert!(code == Some(1) && text.contains("401"), "no token: {text}");
    let top_args = ["top", "--once", "--interval", "0.2", "--url", &g2, "--filter", "^e2e"];
    let (code, text) = tool(&fleet, Some(fleet.get("HISTD_TOKEN")), &top_args);
    assert!(code == Some(0) && text.contains("group: 2 of 2 members answered"), "{text}");
    assert!(text.contains("kafka histd-fleet-script (group fleet): lag "), "where it stands in its topic: {text}");

    // A person signs in to global-1's page in a browser with the token typed into it.
    sign_in_with_a_browser(&fleet, &g1, "e2e.latency");

    // global-1 SIGKILLed: global-2's answers are partial and name it.
    let pid: i32 = fleet.get("FLEET_GLOBAL_1_PID").parse().unwrap();
    // SAFETY: a process the script started for this test.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let alone = query(&fleet, &g2, "count(e2e.latency)");
    assert_eq!(alone["partial"], true, "{alone}");
    let missing = &alone["members"][1];
    assert!(missing["url"] == g1.as_str() && missing["answered"] == false, "{alone}");
    let (code, text) = tool(&fleet, Some(fleet.get("HISTD_TOKEN")), &["query", "--url", &g2, "count(e2e.latency)"]);
    assert!(code == Some(0) && text.contains("a partial answer") && text.contains(&g1), "{text}");

    // Restarted (as itself: its data directory keeps its instance id): what is sent after its
    // restart is seen group-wide within 25 s.
    let config = std::fs::read_to_string(fleet.config("global-1")).unwrap();
    let restarted = Daemon::start_process("fleet-one-machine-global-1-again", &config);
    let restarted_at = Instant::now();
    send(fleet.get("FLEET_LOCAL_1"), &timers("e2e.after", 1..=50));
    send(fleet.get("FLEET_LOCAL_2"), &timers("e2e.after", 51..=100));
    let whole = |url: &str| {
        let answer = query(&fleet, url, "sum(e2e.after.hits)");
        value(&answer) == Some(100.0) && answer["partial"] == false
    };
    assert!(
        within(Duration::from_secs(25), || whole(&g1) && whole(&g2)),
        "after the restart: {} and {}\n{}",
        query(&fleet, &g1, "sum(e2e.after.hits)"),
        query(&fleet, &g2, "sum(e2e.after.hits)"),
        restarted.stderr()
    );
    println!("fleet: data sent after the restart seen group-wide in {:?}", restarted_at.elapsed());
    for global in ["global-1", "global-2"] {
        let (group, answer) = histogram(&fleet, global, "e2e.latency");
        assert!(group == single_histogram && answer["partial"] == false, "{global} after the restart: {answer}");
    }
}
