//! `histd top` against a live daemon: `--once` finds the series sent with their values and
//! quantiles; in tmux, the keys sort, filter, open a series' detail and quit.

use std::process::Command;
use std::time::Duration;

use circllhist::Histogram;

use crate::harness::{wait_until, Daemon};

/// A daemon whose interval does not roll over during a test.
fn daemon(name: &str) -> Daemon {
    Daemon::start(
        name,
        "{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, flushInterval: 600000 }",
    )
}

/// Sends 400 latencies for each of two routes (the second twice as slow) and hits at three
/// rates; returns the latencies of the first route.
fn send_traffic(daemon: &Daemon) -> Vec<f64> {
    let fast: Vec<f64> = (0..400).map(|i| f64::from((i * 37) % 1000 + 1)).collect();
    let mut lines = String::new();
    for value in &fast {
        lines.push_str(&format!("api.latency:{value}|ms|#route:/fast\napi.latency:{}|ms|#route:/slow\n", value * 2.0));
    }
    for (name, count) in [("api.hits.a", 30), ("api.hits.b", 10), ("api.hits.c", 20)] {
        lines.push_str(&format!("{name}:1|c\n").repeat(count));
    }
    daemon.send_tcp(&lines);
    daemon.wait_received(800 + 60);
    fast
}

fn histd() -> &'static str {
    env!("CARGO_BIN_EXE_histd")
}

/// The cells of the row whose name starts `name` (name, type, rate, value, p50, p99, ≥T).
fn row<'a>(output: &'a str, name: &str) -> Vec<&'a str> {
    let line = output.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name} in\n{output}"));
    line.split_whitespace().collect()
}

#[test]
fn top_once_finds_the_series_sent_with_their_values_and_quantiles() {
    let daemon = daemon("top-once");
    let fast = send_traffic(&daemon);
    // A second into the interval, so that its length as printed (0.1 s steps) is close.
    std::thread::sleep(Duration::from_secs(1));
    let output = Command::new(histd())
        .args(["top", "--once", "--interval", "0.2", "--width", "140", "--threshold", "500", "--filter", "^api"])
        .args(["--url", &format!("http://{}", daemon.address("http"))])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    let mut truth = Histogram::new();
    fast.iter().for_each(|&v| {
        truth.insert_int_scale(v as i64, 0, 1);
    });
    let cells = row(&text, "api.latency;route=-fast");
    assert_eq!((cells[1], cells[3]), ("timer", "400"), "{text}");
    let close = |printed: &str, want: f64| (printed.parse::<f64>().unwrap() - want).abs() <= want * 1e-3;
    assert!(close(cells[4], truth.quantile(0.5)) && close(cells[5], truth.quantile(0.99)), "{cells:?} {text}");
    assert_eq!(cells[6], truth.count_above(500.0, true).to_string());
    let elapsed: f64 = text.split(" (").nth(1).and_then(|t| t.split('s').next()).unwrap().parse().unwrap();
    let rate = human_number(cells[2]);
    assert!((rate * elapsed - 400.0).abs() < 400.0 * 0.1, "rate {rate} over {elapsed} s");
    assert_eq!(row(&text, "api.hits.a")[3], "30");
    assert!(!text.contains("statsd.metrics_received"), "--filter ^api");
    assert!(text.contains("series: 6 counters, 2 timers"), "{text}");
}

/// A number as `histd top` prints it (`12.5`, `1.2k`, `3.4M`).
fn human_number(text: &str) -> f64 {
    let (digits, scale) = match text.chars().last() {
        Some('k') => (&text[..text.len() - 1], 1e3),
        Some('M') => (&text[..text.len() - 1], 1e6),
        _ => (text, 1.0),
    };
    digits.parse::<f64>().unwrap_or_else(|_| panic!("not a number: {text}")) * scale
}

/// A tmux server of this test's own (its socket named after the process).
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(command: &str) -> Tmux {
        let tmux = Tmux { socket: format!("histd-top-test-{}", std::process::id()) };
        let started = tmux.run(&["new-session", "-d", "-x", "140", "-y", "40", command]);
        assert!(started.status.success(), "tmux: {}", String::from_utf8_lossy(&started.stderr));
        tmux
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux").args(["-L", &self.socket]).args(args).output().expect("tmux (scripts/test installs it)")
    }

    fn keys(&self, keys: &[&str]) {
        for key in keys {
            self.run(&["send-keys", "-t", "0", key]);
        }
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "0"]).stdout).into_owned()
    }

    /// Waits until the screen satisfies `test`; the screen.
    fn until(&self, what: &str, test: impl Fn(&str) -> bool) -> String {
        let mut screen = String::new();
        let done = crate::harness::eventually(|| {
            screen = self.screen();
            test(&screen)
        });
        assert!(done, "waited for {what}; the screen:\n{screen}");
        screen
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

/// The data rows of the series table, in order.
fn data_rows(screen: &str) -> Vec<String> {
    let mut lines = screen.lines().skip_while(|l| !l.starts_with("NAME")).skip(1);
    let rows = lines.by_ref().take_while(|l| l.starts_with("api") || l.starts_with("statsd"));
    rows.map(|l| l.split_whitespace().next().unwrap_or_default().to_string()).collect()
}

#[test]
fn top_in_tmux_sorts_filters_opens_a_detail_and_quits() {
    let daemon = daemon("top-tmux");
    send_traffic(&daemon);
    let command = format!("{} top --interval 0.2 --threshold 1500 --url http://{}", histd(), daemon.address("http"));
    let tmux = Tmux::start(&command);
    tmux.until("the series table", |s| s.contains("NAME") && s.contains("api.hits.a"));

    tmux.keys(&["5"]);
    let screen = tmux.until("sorting by p99", |s| s.contains("P99*"));
    assert_eq!(data_rows(&screen)[..2], ["api.latency;route=-slow", "api.latency;route=-fast"], "{screen}");

    tmux.keys(&["/", "hits", "Enter"]);
    tmux.until("the filter", |s| s.contains("filter /hits/") && data_rows(s).len() == 3);
    tmux.keys(&["3"]);
    let screen = tmux
        .until("sorting by value", |s| s.contains("VALUE*") && data_rows(s).first().is_some_and(|r| r == "api.hits.a"));
    assert_eq!(data_rows(&screen), ["api.hits.a", "api.hits.c", "api.hits.b"], "{screen}");
    tmux.keys(&["r"]);
    tmux.until("the reversed order", |s| data_rows(s) == ["api.hits.b", "api.hits.c", "api.hits.a"]);

    tmux.keys(&["/", "BSpace", "BSpace", "BSpace", "BSpace", "latency;route=-slow", "Enter"]);
    tmux.until("the slow route alone", |s| data_rows(s) == ["api.latency;route=-slow"]);
    tmux.keys(&["Enter"]);
    // Waited for whole: a capture can catch the terminal half drawn.
    let whole = |s: &str| s.contains("histogram of the interval so far") && s.contains("rate/s") && s.contains("p99");
    tmux.until("the detail view, drawn whole", whole);
    tmux.keys(&["Escape", "t"]);
    tmux.until("the cardinality view", |s| s.contains("HOT PREFIX") && s.contains("api.latency"));
    tmux.keys(&["q"]);
    wait_until(|| !tmux.run(&["has-session", "-t", "0"]).status.success(), "top to quit (its session ends)");
}

/// Issue 52: a reader that goes away (`histd top --once | head`, `histd query ... | head`)
/// ends the output quietly, as Unix tools do: exit 0, no `Broken pipe`. The pipe's reading
/// end is closed before either writes.
#[test]
fn once_and_query_end_quietly_when_their_reader_goes_away() {
    let dir = crate::harness::temp_dir("top-closed-pipe");
    let config = format!(
        "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, flushInterval: 200, \
           backends: ['store'], store: {{ dataDir: '{}' }} }}",
        dir.display()
    );
    let daemon = Daemon::start("top-closed-pipe", &config);
    send_traffic(&daemon);
    let url = format!("http://{}", daemon.address("http"));
    let stored = || daemon.http_get("/api/v1/query?expr=count(api.hits.a)&step=3600").1.contains("30");
    wait_until(stored, "the hits stored");
    let runs: [&[&str]; 2] = [
        &["top", "--once", "--interval", "0.5", "--url", &url],
        &["query", "--url", &url, "--from", "-1h", "--step", "1m", "count(api.hits.a)"],
    ];
    for args in runs {
        let mut child = Command::new(histd())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{args:?}: {said}");
        assert!(!said.contains("Broken pipe") && !said.contains("panicked"), "{args:?}: {said}");
    }
}
