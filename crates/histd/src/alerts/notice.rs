//! What a notification says, and its bodies: Alertmanager's v2 API, histd's JSON, Slack's
//! `{"text": ...}`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::config::{Rule, WebhookFormat};
use crate::timefmt::utc_rfc3339;

/// Whether an alert fires or stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// It fires (or still does).
    Firing,
    /// It stopped.
    Resolved,
}

/// One alert's news.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// The rule's name.
    pub rule: String,
    /// Firing or resolved.
    pub status: Status,
    /// A firing alert sent again (Alertmanager only; webhooks hear each change once).
    pub repeat: bool,
    /// The value at the evaluation (`None`: no data).
    pub value: Option<f64>,
    /// `above` or `below`.
    pub comparison: &'static str,
    /// The threshold.
    pub threshold: f64,
    /// The rule's summary, filled in.
    pub summary: String,
    /// The expression.
    pub expr: String,
    /// The window, as the summary says it (`5m`).
    pub over: String,
    /// The rule's labels.
    pub labels: BTreeMap<String, String>,
    /// When it fired (unix seconds).
    pub starts_at: u64,
    /// When Alertmanager may consider it over: the resolution time, or (firing) a few resend
    /// intervals ahead.
    pub ends_at: u64,
    /// The rule's series and threshold on histd's web page.
    pub generator_url: String,
}

impl Notice {
    /// Alertmanager's `POST /api/v2/alerts` body: one alert.
    pub fn alertmanager_body(&self) -> Value {
        let mut labels = self.labels.clone();
        labels.insert("alertname".into(), self.rule.clone());
        let mut annotations = BTreeMap::new();
        annotations.insert("summary", self.summary.clone());
        annotations.insert("expr", self.expr.clone());
        annotations.insert("value", self.value.map_or_else(|| "none".into(), number));
        annotations.insert("threshold", format!("{} {}", self.comparison, number(self.threshold)));
        json!([{
            "labels": labels,
            "annotations": annotations,
            "startsAt": utc_rfc3339(self.starts_at),
            "endsAt": utc_rfc3339(self.ends_at),
            "generatorURL": self.generator_url,
        }])
    }

    /// A webhook's body in `format`.
    pub fn webhook_body(&self, format: WebhookFormat) -> Value {
        let status = match self.status {
            Status::Firing => "firing",
            Status::Resolved => "resolved",
        };
        match format {
            WebhookFormat::Json => json!({
                "status": status,
                "alert": self.rule,
                "summary": self.summary,
                "value": self.value,
                "comparison": self.comparison,
                "threshold": self.threshold,
                "expr": self.expr,
                "over": self.over,
                "labels": self.labels,
                "startsAt": utc_rfc3339(self.starts_at),
                "endsAt": (self.status == Status::Resolved).then(|| utc_rfc3339(self.ends_at)),
                "generatorURL": self.generator_url,
            }),
            WebhookFormat::Slack => {
                let text = match self.status {
                    Status::Firing => format!(":rotating_light: *{}* is firing: {}", self.rule, self.summary),
                    Status::Resolved => format!(":white_check_mark: *{}* is resolved: {}", self.rule, self.summary),
                };
                json!({ "text": format!("{text} <{}|open in histd>", self.generator_url) })
            }
        }
    }
}

/// A rule's summary with its placeholders filled: `{{value}}`, `{{threshold}}`,
/// `{{comparison}}`, `{{over}}`, `{{name}}`, `{{expr}}`, `{{labels.NAME}}`.
pub fn summary(rule: &Rule, value: Option<f64>) -> String {
    let mut text = rule.summary.clone();
    let fills = [
        ("{{value}}", value.map_or_else(|| "no data".into(), number)),
        ("{{threshold}}", number(rule.comparison.threshold())),
        ("{{comparison}}", rule.comparison.word().to_string()),
        ("{{over}}", duration_text(rule.over.as_secs())),
        ("{{name}}", rule.name.clone()),
        ("{{expr}}", rule.expr_text.clone()),
    ];
    for (placeholder, fill) in fills {
        text = text.replace(placeholder, &fill);
    }
    for (label, value) in &rule.labels {
        text = text.replace(&format!("{{{{labels.{label}}}}}"), value);
    }
    text
}

/// A number for people: whole numbers without decimals (`312`), others to three decimals
/// (`1234.568`), or below 1 to three significant digits (`0.0123`).
pub fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        return format!("{value:.0}");
    }
    let digits = match value.abs() {
        small if small < 1.0 => (2 - small.log10().floor() as i32).clamp(3, 12) as usize,
        _ => 3,
    };
    let text = format!("{value:.digits$}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Seconds as the largest whole unit: `5m`, `90s`, `2h`, `1d`.
pub fn duration_text(seconds: u64) -> String {
    match seconds {
        0 => "0s".into(),
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_durations_read_as_people_write_them() {
        let numbers = [
            (312.0, "312"),
            (1.5, "1.5"),
            (0.012345, "0.0123"),
            (99.95, "99.95"),
            (-2.0, "-2"),
            (1234.5678, "1234.568"),
        ];
        for (value, text) in numbers {
            assert_eq!(number(value), text, "{value}");
        }
        let durations = [(300, "5m"), (90, "90s"), (7200, "2h"), (86_400, "1d"), (0, "0s")];
        for (seconds, text) in durations {
            assert_eq!(duration_text(seconds), text);
        }
    }

    #[test]
    fn a_summary_says_it_in_people() {
        let rule = Rule {
            name: "slow logins".into(),
            expr: store::parse("count_above(api.latency{route=/login}, 1500)").unwrap(),
            expr_text: "count_above(api.latency{route=/login}, 1500)".into(),
            over: std::time::Duration::from_secs(300),
            comparison: super::super::config::Comparison::Above(100.0),
            hold: std::time::Duration::ZERO,
            labels: [("team".to_string(), "auth".to_string())].into(),
            summary: "{{value}} people waited more than 1.5 s for /login in the last {{over}} ({{labels.team}}, over {{threshold}})"
                .into(),
        };
        assert_eq!(
            summary(&rule, Some(312.0)),
            "312 people waited more than 1.5 s for /login in the last 5m (auth, over 100)"
        );
        let notice = Notice {
            rule: rule.name.clone(),
            status: Status::Firing,
            repeat: false,
            value: Some(312.0),
            comparison: "above",
            threshold: 100.0,
            summary: summary(&rule, Some(312.0)),
            expr: rule.expr_text.clone(),
            over: "5m".into(),
            labels: rule.labels.clone(),
            starts_at: 0,
            ends_at: 240,
            generator_url: "http://h/".into(),
        };
        let body = notice.alertmanager_body();
        assert_eq!(body[0]["labels"]["alertname"], "slow logins");
        assert_eq!(body[0]["labels"]["team"], "auth");
        assert_eq!(body[0]["annotations"]["value"], "312");
        assert_eq!(body[0]["endsAt"], "1970-01-01T00:04:00Z");
        let slack = notice.webhook_body(WebhookFormat::Slack)["text"].as_str().unwrap().to_string();
        assert!(slack.contains("*slow logins* is firing: 312 people waited"), "{slack}");
        assert_eq!(notice.webhook_body(WebhookFormat::Json)["endsAt"], Value::Null);
    }
}
