//! Alerts in people (issue 15) against a real Alertmanager (Debian's
//! `prometheus-alertmanager`) and a webhook receiver of the test's: a rule on the number of
//! slow requests fires and resolves in both, with the right number of people; a rule with
//! `for` does not fire on one bad flush; ingest goes on at full rate while a destination
//! hangs.

use std::io::Write;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use crate::external::own_alertmanager;
use crate::harness::{eventually, http, Daemon, HttpCapture};

/// The `text` of every JSON body a Slack-style webhook was sent.
fn texts(receiver: &HttpCapture) -> Vec<String> {
    receiver.requests().iter().filter_map(|request| request.json()["text"].as_str().map(str::to_string)).collect()
}

/// The alerts Alertmanager holds as active, by name: their `summary`.
fn active_in(alertmanager: &str) -> Vec<(String, String)> {
    let (status, body) = http(alertmanager, "GET", "/api/v2/alerts?active=true", b"", "");
    assert_eq!(status, 200, "{body}");
    let alerts: Vec<serde_json::Value> = serde_json::from_str(&body).unwrap();
    let now = std::time::SystemTime::now();
    alerts
        .iter()
        .filter(|alert| alert["status"]["state"] == "active")
        .filter(|alert| {
            let ends = alert["endsAt"].as_str().unwrap_or("");
            ends > humantime_now(now).as_str()
        })
        .map(|alert| {
            let name = alert["labels"]["alertname"].as_str().unwrap_or_default().to_string();
            (name, alert["annotations"]["summary"].as_str().unwrap_or_default().to_string())
        })
        .collect()
}

/// Now as RFC 3339 with seconds (as Alertmanager writes times, compared as text).
fn humantime_now(now: std::time::SystemTime) -> String {
    let seconds = now.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}", rest / 3600, rest / 60 % 60, rest % 60)
}

#[test]
fn alerts_fire_and_resolve_in_people_through_alertmanager_and_webhooks() {
    let alertmanager = own_alertmanager();
    let slack = HttpCapture::start();
    // A destination that takes connections and never answers.
    let hanging = TcpListener::bind("127.0.0.1:0").unwrap();
    let hanging_address = hanging.local_addr().unwrap();
    let config = format!(
        "{{ servers: [ {{ server: 'tcp', address: '127.0.0.1', port: 0 }} ], mgmt_port: 0, http_port: 0, \
           flushInterval: 200, backends: [], \
           alerts: [ \
             {{ name: 'slow logins', expr: 'count_above(api.latency{{route=/login}}, 1500)', over: '1s', above: 2, \
                labels: {{ severity: 'page' }}, \
                summary: '{{{{value}}}} people waited more than 1.5 s for /login in the last {{{{over}}}}' }}, \
             {{ name: 'errors', expr: 'count(api.errors)', over: '1s', above: 5, for: '2s' }} ], \
           alerting: {{ alertmanagers: ['http://{am}'], resendEvery: '1s', timeoutMs: 500, \
                        webhooks: [ {{ url: 'http://{hook}/hook', format: 'slack' }}, {{ url: 'http://{hanging_address}/never' }} ] }} }}",
        am = alertmanager.address,
        hook = slack.address,
    );
    let daemon = Daemon::start("alerts", &config);

    // Five of fifteen logins slower than 1.5 s: "5 people", firing at once (no `for`).
    let mut lines = String::new();
    for (i, ms) in [100, 200, 1600, 300, 2500, 400, 1800, 500, 600, 3000, 700, 800, 9000, 900, 1000].iter().enumerate()
    {
        lines.push_str(&format!("api.latency:{ms}|ms|#route:/login,n:{}\n", i % 3));
    }
    lines.push_str("api.latency:5000|ms|#route:/search\n"); // another route: not counted
    daemon.send_tcp(&lines);
    let people = "5 people waited more than 1.5 s for /login in the last 1s";
    let fired =
        eventually(|| texts(&slack).iter().any(|t| t.contains("*slow logins* is firing") && t.contains(people)));
    assert!(fired, "{:?}", texts(&slack));
    let in_alertmanager =
        eventually(|| active_in(&alertmanager.address).contains(&("slow logins".into(), people.into())));
    assert!(in_alertmanager, "{:?}", active_in(&alertmanager.address));
    let view = daemon.http_json("/api/v1/alerts");
    let rule = view["alerts"].as_array().unwrap().iter().find(|a| a["name"] == "slow logins").unwrap().clone();
    assert_eq!((rule["state"].as_str(), rule["value"].as_f64()), (Some("firing"), Some(5.0)), "{view}");
    assert!(rule["url"].as_str().unwrap().contains("slo=1500"), "{rule}");
    assert!(daemon.admin("gauges").contains("statsd.alerts.slow_logins.state"), "the state is a series");

    // Nothing slow for a window: resolved in both.
    let resolved = eventually(|| texts(&slack).iter().any(|t| t.contains("*slow logins* is resolved")));
    assert!(resolved, "{:?}", texts(&slack));
    assert!(eventually(|| active_in(&alertmanager.address).is_empty()), "{:?}", active_in(&alertmanager.address));

    // `for: 2s` over a 1 s window: one bad flush is pending while it is in the window (1 s),
    // then inactive again, never firing.
    daemon.send_tcp(&"api.errors:1|c\n".repeat(10));
    let pending = eventually(|| daemon.http_json("/api/v1/alerts")["alerts"][1]["state"] == "pending");
    assert!(pending);
    assert!(eventually(|| daemon.http_json("/api/v1/alerts")["alerts"][1]["state"] == "inactive"));
    assert!(!texts(&slack).iter().any(|t| t.contains("*errors*")), "{:?}", texts(&slack));
    // Errors flush after flush: it fires.
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(3500) {
        daemon.send_tcp(&"api.errors:1|c\n".repeat(10));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(eventually(|| texts(&slack).iter().any(|t| t.contains("*errors* is firing"))), "{:?}", texts(&slack));

    // The hanging destination holds nothing up: a burst of lines is all counted.
    let received_before = daemon.stat("messages.metrics_received");
    let burst = "burst:1|c\n".repeat(200_000);
    let mut stream = std::net::TcpStream::connect(daemon.address("tcp")).unwrap();
    stream.write_all(burst.as_bytes()).unwrap();
    drop(stream);
    let all = eventually(|| daemon.stat("messages.metrics_received") >= received_before + 200_000.0);
    assert!(all, "{} of {}", daemon.stat("messages.metrics_received") - received_before, 200_000);
    assert!(daemon.stat("alerts.webhook1.errors") > 0.0, "the hanging webhook timed out");
    assert!(daemon.stat("alerts.webhook0.delivered") >= 3.0);
    drop(hanging);
}
