//! Alerts in people: rules (`alerts` in the config) evaluated after every flush on the flush
//! itself, a window of flushes per rule kept in memory (no read per line, none from the
//! store), so `count_above(api.latency{route=/login}, 1500)` over five minutes is the exact
//! number of requests slower than 1.5 s. Each rule moves inactive → pending → firing →
//! resolved ([`rule_state`]); a change is sent to Alertmanager and webhooks ([`notify`]).
//!
//! Every rule's value and state are also set as gauges of the next interval,
//! `<prefixStats>.alerts.<rule>.value` and `.state` (0 inactive, 1 pending, 2 firing), so
//! their history is kept where every series is: the store, Graphite, Prometheus.

pub mod config;
mod notice;
mod notify;
mod rule_state;

use std::sync::{Arc, Mutex};

use agg::Snapshot;
use store::{FlushRows, Kind, Row, Selector, SeriesKey};

pub use config::{Alerting, AlertsConfig, Comparison, Rule};
use notice::{Notice, Status};
use notify::Notifier;
pub use rule_state::{Change, RuleState, State};

use crate::aggregation::Aggregation;
use crate::clock::lock;
use crate::flush::Outlet;
use crate::sinks::Flushes;
use crate::telemetry::{EtsyStatus, SinkTelemetry};

/// The rules at work and where their news goes.
#[derive(Debug)]
pub struct Alerts {
    rules: Mutex<Vec<RuleState>>,
    alerting: Alerting,
    notifier: Notifier,
    aggregation: Arc<Aggregation>,
    /// `prefixStats`: the alerts' own gauges are named under it.
    prefix: String,
    /// Where notifications link to (`alerting.externalURL`, or the HTTP address).
    base_url: String,
    /// What reading flushes counts (the evaluator's queue).
    telemetry: Arc<SinkTelemetry>,
}

impl Alerts {
    /// Starts the notifier's destinations; returns the alerts and the queue the flusher sends
    /// each flush to (evaluated on a task of their own).
    pub fn start(
        config: &AlertsConfig,
        aggregation: Arc<Aggregation>,
        prefix: &str,
        base_url: String,
        startup_s: u64,
    ) -> (Arc<Alerts>, Outlet) {
        let telemetry = Arc::new(SinkTelemetry::new("alerts", EtsyStatus::None, startup_s));
        let alerts = Arc::new(Alerts {
            rules: Mutex::new(config.rules.iter().cloned().map(RuleState::new).collect()),
            alerting: config.alerting.clone(),
            notifier: Notifier::start(&config.alerting, startup_s),
            aggregation,
            prefix: prefix.to_string(),
            base_url: config.alerting.external_url.clone().unwrap_or(base_url),
            telemetry: telemetry.clone(),
        });
        let (sender, mut flushes) = Flushes::queue(telemetry.clone());
        let evaluator = alerts.clone();
        tokio::spawn(async move {
            while let Some(snapshot) = flushes.next().await {
                evaluator.on_flush(&snapshot);
            }
        });
        (alerts, (telemetry, sender))
    }

    /// Evaluates every rule on one more flush: the window moves, the state too, changes are
    /// sent, and each rule's value and state set as gauges of the next interval.
    pub fn on_flush(&self, snapshot: &Snapshot) {
        if snapshot.late {
            // Rules judge intervals as they are flushed; a late one (forwarded batches that
            // came after their flush) is placed at its time by the store, not judged again.
            return;
        }
        let now = snapshot.timestamp;
        let mut gauges = Vec::new();
        {
            let mut rules = lock(&self.rules);
            for state in rules.iter_mut() {
                let (selector, kinds) = state.reads();
                let row = rows_of(snapshot, selector, kinds);
                state.observe(now, row);
                let change = state.evaluate(now, self.alerting.resend);
                if change != Change::None {
                    self.notifier.send(&self.notice(state, change, now));
                }
                let name = format!("{}.alerts.{}", self.prefix, gauge_name(&state.rule.name));
                gauges.extend(state.value.map(|value| (format!("{name}.value"), value)));
                gauges.push((format!("{name}.state"), state.state.number()));
            }
        }
        self.telemetry.succeeded(now);
        self.aggregation.set_gauges(&gauges, now);
    }

    /// Puts new rules in force (a reload): a rule keeps its window and state while its
    /// expression and condition stay the same.
    pub fn set_rules(&self, rules: &[Rule]) {
        let mut held = lock(&self.rules);
        let mut old = std::mem::take(&mut *held);
        for rule in rules {
            let state = match old.iter().position(|state| state.rule.name == rule.name) {
                Some(at) => old.remove(at).renewed(rule.clone()),
                None => RuleState::new(rule.clone()),
            };
            held.push(state);
        }
    }

    /// The evaluator's and every destination's telemetry, for `stats`, `/health`, `/metrics`.
    pub fn telemetry(&self) -> Vec<Arc<SinkTelemetry>> {
        std::iter::once(self.telemetry.clone()).chain(self.notifier.telemetry()).collect()
    }

    /// `GET /api/v1/alerts`: every rule, its state and value.
    pub fn view(&self) -> crate::contract::Alerts {
        let rules = lock(&self.rules);
        let alerts = rules
            .iter()
            .map(|state| {
                let rule = &state.rule;
                let (since, fired) = match state.state {
                    State::Pending { since } => (Some(since), None),
                    State::Firing { since } => (Some(since), Some(since)),
                    State::Inactive => (None, None),
                };
                crate::contract::AlertRule {
                    name: rule.name.clone(),
                    expr: rule.expr_text.clone(),
                    over_s: rule.over.as_secs(),
                    for_s: rule.hold.as_secs(),
                    comparison: rule.comparison.word().to_string(),
                    threshold: rule.comparison.threshold(),
                    state: state.state.name().to_string(),
                    value: state.value,
                    since,
                    firing_since: fired,
                    resolved_at: state.resolved_at,
                    evaluated_at: state.evaluated_at,
                    summary: notice::summary(rule, state.value),
                    labels: rule.labels.clone(),
                    url: self.generator_url(rule),
                }
            })
            .collect();
        let firing = rules.iter().filter(|state| matches!(state.state, State::Firing { .. })).count() as u64;
        crate::contract::Alerts { alerts, firing }
    }

    fn notice(&self, state: &RuleState, change: Change, now: u64) -> Notice {
        let rule = &state.rule;
        let (status, starts_at, ends_at) = match (change, state.state) {
            (Change::Resolved, _) => (Status::Resolved, state.fired_at.unwrap_or(now), now),
            (_, State::Firing { since }) => (Status::Firing, since, now + 4 * self.alerting.resend.as_secs().max(1)),
            _ => (Status::Firing, now, now + 4 * self.alerting.resend.as_secs().max(1)),
        };
        Notice {
            rule: rule.name.clone(),
            status,
            repeat: change == Change::StillFiring,
            value: state.value,
            comparison: rule.comparison.word(),
            threshold: rule.comparison.threshold(),
            summary: notice::summary(rule, state.value),
            expr: rule.expr_text.clone(),
            over: notice::duration_text(rule.over.as_secs()),
            labels: rule.labels.clone(),
            starts_at,
            ends_at,
            generator_url: self.generator_url(rule),
        }
    }

    /// The rule's series on histd's web page, with the function's threshold as the SLO line.
    fn generator_url(&self, rule: &Rule) -> String {
        let (function, selector, number) = rule_state::call_of(&rule.expr);
        let kind = function.kinds()[0];
        let mut url = format!(
            "{}/?series={}&type={}&range=1h",
            self.base_url,
            crate::http_client::percent_encode(&selector.to_string()),
            kind.as_str()
        );
        if matches!(
            function,
            store::Function::CountAbove | store::Function::CountBelow | store::Function::InverseQuantile
        ) {
            url.push_str(&format!("&slo={}", notice::number(number)));
        }
        url
    }
}

/// A rule's name as a part of a metric name: letters, digits, `_` and `-`; the rest `_`.
fn gauge_name(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// The merge of the rows `selector` picks in a flush among series of `kinds`: each type's
/// series are sorted by key, so the ones of a name are found by a binary search.
fn rows_of(snapshot: &Snapshot, selector: &Selector, kinds: &[Kind]) -> Option<Row> {
    let lengths = [
        (Kind::Counter, snapshot.counters.len()),
        (Kind::Timer, snapshot.timers.len()),
        (Kind::Gauge, snapshot.gauges.len()),
        (Kind::Set, snapshot.sets.len()),
    ];
    let name = selector.name.as_str();
    let mut merged: Option<Row> = None;
    let mut start = 0;
    for (kind, length) in lengths {
        let end = start + length;
        if kinds.contains(&kind) {
            let first = start + partition_point(length, |i| snapshot.key(start + i).1 < name);
            for index in first..end {
                let key = snapshot.key(index).1;
                if !key.starts_with(name) {
                    break;
                }
                if selector.matches(&SeriesKey::from_key(key, kind)) {
                    let row = snapshot.row(index);
                    match &mut merged {
                        Some(total) => total.merge(&row, kind),
                        None => merged = Some(row),
                    }
                }
            }
        }
        start = end;
    }
    merged
}

/// The first of `0..length` for which `before` is false (`before` is true, then false).
fn partition_point(length: usize, before: impl Fn(usize) -> bool) -> usize {
    let (mut low, mut high) = (0, length);
    while low < high {
        let middle = low + (high - low) / 2;
        if before(middle) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    low
}

impl Alerts {
    /// At shutdown, after the last flush was evaluated: the destinations deliver what they
    /// hold within `grace`.
    pub async fn finish(&self, grace: std::time::Duration) {
        self.notifier.finish(grace).await;
    }
}
