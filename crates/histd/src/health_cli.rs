//! `histd health`: whether a running histd says it is up (`GET /health`), for a container's
//! or a supervisor's health check: one line, and an exit code.

use std::process::ExitCode;

use anyhow::Context;

use crate::api_client::{printable, refusal, ApiArgs, HEALTH, UNREACHABLE_HINT};

/// The arguments of `histd health`.
#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    #[command(flatten)]
    api: ApiArgs,
}

/// What a `/health` answer (HTTP `status`, `body`) says: whether histd is up (200 and
/// `"status": "up"`), and one line for a person; an error for an answer that is not histd's.
pub fn verdict(status: u16, body: &str) -> anyhow::Result<(bool, String)> {
    // What is echoed of the answer is made printable; the answer itself is read whole.
    let shown = printable(body);
    if let Some(refused) = refusal(status, body) {
        anyhow::bail!("/health answered {refused}");
    }
    let health: serde_json::Value = serde_json::from_str(body)
        .with_context(|| format!("not the answer of histd's /health (HTTP {status}): {shown}"))?;
    let said = health["status"].as_str().with_context(|| format!("no status in /health's answer: {shown}"))?;
    let said = printable(said);
    let number = |key: &str| health[key].as_u64().unwrap_or(0);
    let mut line = format!(
        "{said} ({} s running, {} packets, {} metrics, {} bad lines, {} kernel drops)",
        number("uptime_s"),
        number("packets_received"),
        number("metrics_received"),
        number("bad_lines"),
        number("kernel_drops"),
    );
    line.push_str(&kafka_summary(&health));
    Ok((status == 200 && said == "up", line))
}

/// A Kafka global's part of the line: its partitions, lag, commits and held batches.
fn kafka_summary(health: &serde_json::Value) -> String {
    let kafka = &health["kafka"];
    if !kafka.is_object() {
        return String::new();
    }
    let partitions = kafka["partitions"].as_array().map_or(0, Vec::len);
    let mut summary = format!(
        "; Kafka: {partitions} partitions of {}, lag {}, {} commits waiting",
        printable(kafka["topic"].as_str().unwrap_or("?")),
        kafka["lag"].as_i64().unwrap_or(0),
        kafka["commits_pending"].as_u64().unwrap_or(0),
    );
    if let Some(age) = kafka["last_commit_age_s"].as_u64() {
        summary.push_str(&format!(", last commit {age} s ago"));
    }
    if kafka["falling_behind"].as_bool() == Some(true) {
        summary.push_str(", falling behind (its lag grows)");
    }
    let held = health["kafka_unreadable_batches"]["held"].as_array().map_or(0, Vec::len);
    if held > 0 {
        summary.push_str(&format!(", {held} partitions held at a batch it cannot read"));
    }
    summary
}

/// Asks a running histd's `/health` and prints its answer: exit 0 when it is up; 1 when it is
/// down (the management command `health down`), refuses the credential or does not answer
/// within 10 s (whole); 2 for arguments that name no API (a `--url` that is not `http://` or
/// `https://`, a `--config` that does not read, a `--ca-file` or `--cert` that does not).
pub fn run(args: &HealthArgs) -> ExitCode {
    let endpoint = match args.api.endpoint() {
        Ok(endpoint) => endpoint,
        Err(why) => {
            eprintln!("histd health: {why}");
            return ExitCode::from(2);
        }
    };
    let answer = endpoint
        .get("/health", HEALTH)
        .with_context(|| format!("cannot reach histd at {endpoint} ({UNREACHABLE_HINT})"))
        .and_then(|(status, body)| verdict(status, &body));
    match answer {
        Ok((up, line)) => {
            println!("{line}");
            if up {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(error) => {
            eprintln!("histd health: {error:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An HTTP status and body, and what they make: up or not and the line's start, or
    /// `None` for an answer that is not histd's.
    type Case<'a> = (u16, &'a str, Option<(bool, &'a str)>);

    #[test]
    fn up_only_when_the_answer_is_200_and_says_up() {
        let up =
            r#"{"status":"up","uptime_s":12,"packets_received":3,"metrics_received":7,"bad_lines":1,"kernel_drops":0}"#;
        let cases: &[Case] = &[
            (200, up, Some((true, "up (12 s running, 3 packets, 7 metrics, 1 bad lines, 0 kernel drops)"))),
            (503, &up.replace("\"up\"", "\"down\""), Some((false, "down (12 s running, 3 packets"))),
            (503, up, Some((false, "up ("))),
            (200, "<html>a proxy's page</html>", None),
            (200, r#"{"uptime_s":1}"#, None),
            (401, r#"{"error":"a token is needed"}"#, None),
            (
                200,
                r#"{"status":"degraded","uptime_s":1,"kafka":{"topic":"fleet","partitions":[{"partition":0},{"partition":3}],"lag":120,"commits_pending":1,"last_commit_age_s":2,"falling_behind":true}}"#,
                Some((false, "degraded (1 s running, 0 packets, 0 metrics, 0 bad lines, 0 kernel drops); Kafka: 2 partitions of fleet, lag 120, 1 commits waiting, last commit 2 s ago, falling behind")),
            ),
        ];
        for (status, body, expected) in cases {
            match (verdict(*status, body), expected) {
                (Ok((up, line)), Some((want_up, starts))) => {
                    assert_eq!(up, *want_up, "{body}");
                    assert!(line.starts_with(starts), "{line}");
                }
                (Err(_), None) => {}
                (got, _) => panic!("{status} {body}: {got:?}"),
            }
        }
    }
}
