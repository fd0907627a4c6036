//! `alerts` (the rules) and `alerting` (where their notifications go), read and checked:
//! an error names the rule's key (`alerts[2].expr`) and what is wrong with it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Map, Value};
use store::Expr;

use crate::config_reader::{ConfigError, Reader};
use crate::http_client::HttpUrl;

/// The most flushes a rule's window (`over`) may span: a timer rule keeps a histogram per
/// flush of its window.
pub const MAX_WINDOW_FLUSHES: u64 = 360;

/// The alerting settings.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertsConfig {
    /// The rules, in config order.
    pub rules: Vec<Rule>,
    /// Where notifications go.
    pub alerting: Alerting,
}

/// One rule: an expression over a window, compared with a threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// `name`: unique, the Alertmanager `alertname`.
    pub name: String,
    /// `expr`, parsed.
    pub expr: Expr,
    /// `expr` as written.
    pub expr_text: String,
    /// `over`: the window the expression is evaluated on (`5m`), whole flushes.
    pub over: Duration,
    /// `above` or `below`: when the rule is breached.
    pub comparison: Comparison,
    /// `for`: how long the breach must last before the alert fires (0: at once).
    pub hold: Duration,
    /// `labels`: sent with every notification.
    pub labels: BTreeMap<String, String>,
    /// `summary`: a template (`{{value}} people waited more than 1.5 s in the last {{over}}`).
    pub summary: String,
}

/// When a rule is breached.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Comparison {
    /// The value is above the threshold.
    Above(f64),
    /// The value is below the threshold.
    Below(f64),
}

impl Comparison {
    /// Whether `value` breaches it.
    pub fn breached_by(self, value: f64) -> bool {
        match self {
            Comparison::Above(threshold) => value > threshold,
            Comparison::Below(threshold) => value < threshold,
        }
    }

    /// The threshold.
    pub fn threshold(self) -> f64 {
        match self {
            Comparison::Above(threshold) | Comparison::Below(threshold) => threshold,
        }
    }

    /// `above` or `below`.
    pub fn word(self) -> &'static str {
        match self {
            Comparison::Above(_) => "above",
            Comparison::Below(_) => "below",
        }
    }
}

/// Where notifications go, and how they are sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Alerting {
    /// `alertmanagers`: Alertmanager base URLs (`http://127.0.0.1:9093`), each sent every
    /// firing and resolved alert through its v2 API.
    pub alertmanagers: Vec<(String, HttpUrl)>,
    /// `webhooks`: `{url, format}` (`json` or `slack`), sent each change of state.
    pub webhooks: Vec<Webhook>,
    /// `externalURL`: how histd's web page is reached from where notifications are read
    /// (default: the HTTP address); a notification's link opens the rule's series there.
    pub external_url: Option<String>,
    /// `resendEvery`: how often a firing alert is sent to Alertmanager again (it forgets an
    /// alert not sent again before its `endsAt`).
    pub resend: Duration,
    /// `timeoutMs`: how long a delivery may take.
    pub timeout: Duration,
    /// `maxQueued`: notifications waiting per destination; past it the oldest is dropped,
    /// counted.
    pub max_queued: usize,
}

impl Default for Alerting {
    fn default() -> Self {
        Alerting {
            alertmanagers: Vec::new(),
            webhooks: Vec::new(),
            external_url: None,
            resend: Duration::from_secs(60),
            timeout: Duration::from_secs(5),
            max_queued: 1000,
        }
    }
}

/// A webhook.
#[derive(Debug, Clone, PartialEq)]
pub struct Webhook {
    /// The URL as written.
    pub url: String,
    /// Where to POST.
    pub target: HttpUrl,
    /// The body's shape.
    pub format: WebhookFormat,
}

/// A webhook's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookFormat {
    /// histd's JSON object (every field of the alert).
    Json,
    /// `{"text": ...}`, as Slack's and Mattermost's incoming webhooks take it.
    Slack,
}

/// The summary when a rule gives none.
pub const DEFAULT_SUMMARY: &str = "{{name}}: {{expr}} over {{over}} is {{value}} ({{comparison}} {{threshold}})";

/// Reads `alerts` and `alerting`; `flush_interval` bounds the windows.
pub fn alerts(top: &Reader<'_>, flush_interval: Duration) -> Result<AlertsConfig, ConfigError> {
    let mut rules: Vec<Rule> = Vec::new();
    for (index, entry) in top.array("alerts")?.iter().enumerate() {
        let key = format!("alerts[{index}]");
        let Value::Object(object) = entry else {
            return Err(ConfigError { key, message: format!("expected {{name, expr, over, above}}, got {entry}") });
        };
        let rule = rule(&top.element(object, key.clone()), flush_interval)?;
        if rules.iter().any(|other| other.name == rule.name) {
            return Err(ConfigError {
                key: format!("{key}.name"),
                message: format!("'{}' names two rules", rule.name),
            });
        }
        rules.push(rule);
    }
    Ok(AlertsConfig { rules, alerting: alerting(&top.object("alerting")?)? })
}

fn rule(entry: &Reader<'_>, flush_interval: Duration) -> Result<Rule, ConfigError> {
    let name = entry.string("name")?.filter(|name| !name.trim().is_empty());
    let name = name.ok_or_else(|| entry.error("name", "every rule needs a name"))?;
    let expr_text = entry.string("expr")?.ok_or_else(|| entry.error("expr", "is missing"))?;
    let expr = store::parse(&expr_text).map_err(|error| entry.error("expr", error.to_string()))?;
    let over = duration(entry, "over")?.ok_or_else(|| entry.error("over", "is missing (the window: \"5m\")"))?;
    let flushes = over.as_millis().div_ceil(flush_interval.as_millis().max(1)) as u64;
    if over < flush_interval || flushes > MAX_WINDOW_FLUSHES {
        let message = format!(
            "{} ms is not a window of 1 to {MAX_WINDOW_FLUSHES} flushes of {} ms",
            over.as_millis(),
            flush_interval.as_millis()
        );
        return Err(entry.error("over", message));
    }
    let comparison = match (entry.number("above")?, entry.number("below")?) {
        (Some(threshold), None) if threshold.is_finite() => Comparison::Above(threshold),
        (None, Some(threshold)) if threshold.is_finite() => Comparison::Below(threshold),
        (Some(_), Some(_)) => return Err(entry.error("below", "give `above` or `below`, not both")),
        _ => return Err(entry.error("above", "give a finite threshold as `above` or `below`")),
    };
    let mut labels = BTreeMap::new();
    for (label, value) in crate::config_reader::string_object(entry, "labels")? {
        if !valid_label_name(&label) {
            let message = format!("'{label}' is not a label name: letters, digits and _, not starting with a digit");
            return Err(entry.error("labels", message));
        }
        labels.insert(label, value);
    }
    Ok(Rule {
        name,
        expr,
        expr_text,
        over,
        comparison,
        hold: duration(entry, "for")?.unwrap_or_default(),
        labels,
        summary: entry.string("summary")?.unwrap_or_else(|| DEFAULT_SUMMARY.to_string()),
    })
}

fn alerting(section: &Reader<'_>) -> Result<Alerting, ConfigError> {
    let defaults = Alerting::default();
    let url = |key: &str, text: &Value, default_path: &str| -> Result<(String, HttpUrl), ConfigError> {
        let text = text.as_str().ok_or_else(|| section.error(key, format!("expected a URL string, got {text}")))?;
        let mut url = HttpUrl::parse(text).map_err(|message| section.error(key, message))?;
        if url.path == "/" {
            url.path = default_path.to_string();
        }
        Ok((text.to_string(), url))
    };
    let mut alertmanagers = Vec::new();
    for (index, entry) in section.array("alertmanagers")?.iter().enumerate() {
        alertmanagers.push(url(&format!("alertmanagers[{index}]"), entry, "/api/v2/alerts")?);
    }
    let mut webhooks = Vec::new();
    for (index, entry) in section.array("webhooks")?.iter().enumerate() {
        let key = format!("webhooks[{index}]");
        let Value::Object(object) = entry else {
            return Err(section.error(&key, format!("expected {{url, format}}, got {entry}")));
        };
        let hook = section.element(object, format!("alerting.{key}"));
        let raw = hook.raw("url").ok_or_else(|| hook.error("url", "is missing"))?;
        let text = raw.as_str().ok_or_else(|| hook.error("url", format!("expected a URL string, got {raw}")))?;
        let target = HttpUrl::parse(text).map_err(|message| hook.error("url", message))?;
        let format = match hook.string("format")?.as_deref() {
            None | Some("json") => WebhookFormat::Json,
            Some("slack") => WebhookFormat::Slack,
            Some(other) => return Err(hook.error("format", format!("'{other}' is neither json nor slack"))),
        };
        webhooks.push(Webhook { url: text.to_string(), target, format });
    }
    let max_queued = match section.number("maxQueued")? {
        None => defaults.max_queued,
        Some(n) if (1.0..=1e6).contains(&n) && n.fract() == 0.0 => n as usize,
        Some(n) => return Err(section.error("maxQueued", format!("expected a whole number from 1 to 1e6, got {n}"))),
    };
    Ok(Alerting {
        alertmanagers,
        webhooks,
        external_url: section.string("externalURL")?.map(|url| url.trim_end_matches('/').to_string()),
        resend: duration(section, "resendEvery")?.unwrap_or(defaults.resend),
        timeout: duration(section, "timeoutMs")?.unwrap_or(defaults.timeout),
        max_queued,
    })
}

/// A duration: a string (`90s`, `5m`, `1h`, `7d`) or milliseconds.
pub fn duration(reader: &Reader<'_>, key: &str) -> Result<Option<Duration>, ConfigError> {
    let bad =
        |got: &Value| reader.error(key, format!("expected a duration like 30s, 5m or 1h (or milliseconds), got {got}"));
    match reader.raw(key) {
        None => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(ms) if ms >= 0.0 && ms.is_finite() => Ok(Some(Duration::from_millis(ms as u64))),
            _ => Err(bad(&Value::Number(n.clone()))),
        },
        Some(Value::String(text)) => match crate::config_reader::parse_duration(text) {
            Some(seconds) => Ok(Some(Duration::from_secs(seconds as u64))),
            None => Err(bad(&Value::String(text.clone()))),
        },
        Some(other) => Err(bad(other)),
    }
}

/// Prometheus' rule for label names.
fn valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl AlertsConfig {
    /// The settings as `histd check-config` prints them.
    pub fn effective(&self) -> (Value, Value) {
        let rules = self
            .rules
            .iter()
            .map(|rule| {
                let mut entry = json!({
                    "name": rule.name,
                    "expr": rule.expr_text,
                    "over": rule.over.as_millis() as u64,
                    "for": rule.hold.as_millis() as u64,
                    "labels": rule.labels,
                    "summary": rule.summary,
                });
                entry[rule.comparison.word()] = json!(rule.comparison.threshold());
                entry
            })
            .collect();
        let alerting = &self.alerting;
        let mut section = Map::new();
        section
            .insert("alertmanagers".into(), json!(alerting.alertmanagers.iter().map(|(u, _)| u).collect::<Vec<_>>()));
        let hooks: Vec<Value> = alerting
            .webhooks
            .iter()
            .map(|hook| json!({"url": hook.url, "format": if hook.format == WebhookFormat::Slack { "slack" } else { "json" }}))
            .collect();
        section.insert("webhooks".into(), Value::Array(hooks));
        section.insert("externalURL".into(), json!(alerting.external_url));
        section.insert("resendEvery".into(), json!(alerting.resend.as_millis() as u64));
        section.insert("timeoutMs".into(), json!(alerting.timeout.as_millis() as u64));
        section.insert("maxQueued".into(), json!(alerting.max_queued));
        (Value::Array(rules), Value::Object(section))
    }
}
