//! Management commands: parsing a line, and each command's reply.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use agg::jsfmt::js_number;
use agg::{Aggregator, MetricType};
use serde_json::Value;

use super::inspect::{self, Node};
use super::AdminState;
use crate::aggregation::Gathered;
use crate::clock::unix_now_s;
use crate::telemetry::budgets::BudgetState;

/// Etsy's help text, unchanged (`sets` and `delsets` also work).
const HELP: &str =
    "Commands: stats, counters, timers, gauges, delcounters, deltimers, delgauges, health, config, quit\n\n";

/// One management command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `help`.
    Help,
    /// `health`, or `health up|down` (case-insensitive) to set it.
    Health(Option<bool>),
    /// `stats`.
    Stats,
    /// `counters`, `timers`, `gauges`, `sets`: dump current values.
    Dump(MetricType),
    /// `delcounters a b.*` and the like: the arguments as given.
    Delete(MetricType, Vec<String>),
    /// `clear` (every type) or `clear counters timers ...` (histd): forget every series of
    /// those types, as `del*` each of their keys.
    Clear(Vec<MetricType>),
    /// `config`.
    Config,
    /// `quit`: close the connection.
    Quit,
    /// Anything else.
    Unknown,
}

impl Command {
    /// Parses one line as Etsy does: trimmed, split on single spaces, the first word names
    /// the command.
    pub fn parse(line: &str) -> Command {
        let mut words = line.trim().split(' ');
        let name = words.next().unwrap_or_default();
        let arguments: Vec<String> = words.map(str::to_string).collect();
        match name {
            "help" => Command::Help,
            "health" => Command::Health(match arguments.first().map(|a| a.to_lowercase()).as_deref() {
                Some("up") => Some(true),
                Some("down") => Some(false),
                _ => None,
            }),
            "stats" => Command::Stats,
            "counters" => Command::Dump(MetricType::Counters),
            "timers" => Command::Dump(MetricType::Timers),
            "gauges" => Command::Dump(MetricType::Gauges),
            "sets" => Command::Dump(MetricType::Sets),
            "delcounters" => Command::Delete(MetricType::Counters, arguments),
            "deltimers" => Command::Delete(MetricType::Timers, arguments),
            "delgauges" => Command::Delete(MetricType::Gauges, arguments),
            "delsets" => Command::Delete(MetricType::Sets, arguments),
            "clear" => match clear_types(&arguments) {
                Some(types) => Command::Clear(types),
                None => Command::Unknown,
            },
            "config" => Command::Config,
            "quit" => Command::Quit,
            _ => Command::Unknown,
        }
    }
}

/// The reply to `command`, exactly as Etsy writes it.
pub fn execute(command: &Command, state: &AdminState) -> String {
    match command {
        Command::Help => HELP.to_string(),
        Command::Health(set) => {
            if let Some(up) = set {
                state.healthy.store(*up, Ordering::Relaxed);
            }
            format!("health: {}\n", if state.healthy.load(Ordering::Relaxed) { "up" } else { "down" })
        }
        Command::Stats => stats(state),
        Command::Dump(_) | Command::Delete(..) | Command::Clear(_) => {
            on_aggregator(command, &mut current(state)).unwrap_or_default()
        }
        Command::Config => config(&state.config.raw()),
        Command::Quit => String::new(),
        Command::Unknown => "ERROR\n".to_string(),
    }
}

/// The reply of a command that reads or changes the aggregator (`None` for the others).
pub(crate) fn on_aggregator(command: &Command, aggregator: &mut Aggregator) -> Option<String> {
    match command {
        Command::Dump(metric_type) => Some(format!("{}\nEND\n\n", dump(aggregator, *metric_type))),
        Command::Delete(metric_type, arguments) => Some(delete(aggregator, *metric_type, arguments)),
        Command::Clear(types) => Some(clear(aggregator, types)),
        _ => None,
    }
}

/// The aggregator with every reader's interval so far absorbed.
fn current(state: &AdminState) -> std::sync::MutexGuard<'_, Gathered> {
    state.aggregation.current()
}

fn stats(state: &AdminState) -> String {
    let now = unix_now_s();
    let (totals, timers_over_sample_limit, budgets) = {
        let aggregator = current(state);
        (aggregator.totals().clone(), aggregator.timers_over_sample_limit(), BudgetState::of(&aggregator))
    };
    let last_seen = if totals.last_packet_unix_s == 0 { state.started_unix_s } else { totals.last_packet_unix_s };
    let mut out = String::new();
    let _ = writeln!(out, "uptime: {}", now.saturating_sub(state.started_unix_s));
    let _ = writeln!(out, "messages.last_msg_seen: {}", now.saturating_sub(last_seen));
    let _ = writeln!(out, "messages.bad_lines_seen: {}", totals.bad_lines());
    for (reason, count) in proto::ParseError::ALL.iter().zip(totals.bad_by_reason) {
        let _ = writeln!(out, "messages.bad_lines.{}: {count}", reason.as_str());
    }
    for (reason, line) in totals.bad_examples.iter() {
        let source = line.source.map_or_else(|| "a datagram".to_string(), |ip| ip.to_string());
        let ago = now.saturating_sub(line.unix_s);
        let _ =
            writeln!(out, "messages.last_bad_line.{}: {} (from {source}, {ago} s ago)", reason.as_str(), line.text());
    }
    let _ = writeln!(out, "messages.packets_received: {}", totals.packets);
    let _ = writeln!(out, "messages.metrics_received: {}", totals.lines);
    let _ = writeln!(out, "messages.kernel_drops: {}", totals.kernel_drops);
    let _ = writeln!(out, "messages.truncated_datagrams: {}", totals.truncated_datagrams);
    let _ = writeln!(out, "messages.timers_over_sample_limit: {timers_over_sample_limit}");
    for (name, count) in state.edges.entries() {
        let _ = writeln!(out, "messages.{name}: {count}");
    }
    for (name, value, _) in budgets.entries() {
        let _ = writeln!(out, "budget.{name}: {}", js_number(value));
    }
    for (rank, offender) in budgets.report.offenders.iter().enumerate() {
        let rate = js_number((offender.new_series_per_second * 1000.0).round() / 1000.0);
        let _ = writeln!(
            out,
            "budget.offender.{}: {} {rate}/s new series, {} folded",
            rank + 1,
            offender.pattern,
            offender.folded
        );
    }
    for sink in &state.sinks.telemetry() {
        for (name, value) in sink.entries(now) {
            // Etsy shows a backend's `last_*` values as seconds since.
            let shown = if name.starts_with("last_") { now as f64 - value } else { value };
            let _ = writeln!(out, "{}.{name}: {}", sink.sink, js_number(shown));
        }
    }
    out.push_str("END\n\n");
    out
}

fn dump(aggregator: &mut Aggregator, metric_type: MetricType) -> String {
    let entries: Vec<(String, Node)> = match metric_type {
        MetricType::Counters => {
            aggregator.counter_values().into_iter().map(|(k, v)| (k.to_string(), Node::Number(v))).collect()
        }
        MetricType::Gauges => {
            aggregator.gauge_values().into_iter().map(|(k, v)| (k.to_string(), Node::Number(v))).collect()
        }
        MetricType::Timers => aggregator
            .timer_values()
            .into_iter()
            .map(|(k, values)| (k.to_string(), Node::Array(values.into_iter().map(Node::Number).collect())))
            .collect(),
        MetricType::Sets => aggregator
            .set_members()
            .into_iter()
            .map(|(k, members)| (k.to_string(), Node::Array(members.into_iter().map(Node::Text).collect())))
            .collect(),
    };
    inspect::object(&entries)
}

/// The types `clear` names (all four when none); `None` for a word that is not a type.
fn clear_types(arguments: &[String]) -> Option<Vec<MetricType>> {
    let words: Vec<&str> = arguments.iter().map(String::as_str).filter(|w| !w.is_empty()).collect();
    if words.is_empty() {
        return Some(MetricType::ALL.to_vec());
    }
    words.iter().map(|word| MetricType::ALL.into_iter().find(|t| t.name() == *word)).collect()
}

/// `clear`: every key of each type deleted; `cleared <type>: <count>` per type, then `END`.
fn clear(aggregator: &mut Aggregator, types: &[MetricType]) -> String {
    let mut out = String::new();
    for &metric_type in types {
        let keys = aggregator.keys(metric_type);
        let removed = keys.iter().filter(|key| aggregator.remove(metric_type, key)).count();
        let _ = writeln!(out, "cleared {}: {removed}", metric_type.name());
    }
    out.push_str("END\n\n");
    out
}

/// Each argument deletes the key it names and, when it ends in `.*`, every key starting with
/// what precedes the `*`. Etsy's replies: `deleted: <key>` per key, `metric <arg> not found`.
/// Etsy's `del*`: each argument deletes its key, and a `prefix.*` argument every key under
/// the prefix. The keys are listed (sorted) once per command and each prefix found by binary
/// search, so thousands of patterns do not hold the aggregator's lock for long.
fn delete(aggregator: &mut Aggregator, metric_type: MetricType, arguments: &[String]) -> String {
    let mut out = String::new();
    let mut sorted = None;
    for argument in arguments {
        let mut found = false;
        if aggregator.remove(metric_type, argument) {
            let _ = writeln!(out, "deleted: {argument}");
            found = true;
        }
        if let Some(prefix) = argument.strip_suffix('*').filter(|_| argument.ends_with(".*")) {
            let keys = sorted.get_or_insert_with(|| aggregator.keys(metric_type));
            let first = keys.partition_point(|key| key.as_str() < prefix);
            for key in keys[first..].iter().take_while(|key| key.starts_with(prefix)) {
                // A key an earlier argument deleted is not reported twice.
                if aggregator.remove(metric_type, key) {
                    let _ = writeln!(out, "deleted: {key}");
                    found = true;
                }
            }
        }
        if !found {
            let _ = writeln!(out, "metric {argument} not found");
        }
    }
    out.push_str("END\n\n");
    out
}

/// `\n`, then `key: value` per top-level key; objects and arrays one level deep as
/// `parent > child: value`, values as JavaScript turns them into strings. No `END`.
fn config(raw: &serde_json::Map<String, Value>) -> String {
    let mut out = String::from("\n");
    for (key, value) in raw {
        match value {
            Value::Object(children) => {
                for (child, value) in children {
                    let _ = writeln!(out, "{key} > {child}: {}", js_string(value));
                }
            }
            Value::Array(items) => {
                for (index, value) in items.iter().enumerate() {
                    let _ = writeln!(out, "{key} > {index}: {}", js_string(value));
                }
            }
            scalar => {
                let _ = writeln!(out, "{key}: {}", js_string(scalar));
            }
        }
    }
    out
}

/// JavaScript's `'' + value`.
fn js_string(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.as_f64().map(js_number).unwrap_or_else(|| n.to_string()),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            items.iter().map(|v| if v.is_null() { String::new() } else { js_string(v) }).collect::<Vec<_>>().join(",")
        }
        Value::Object(_) => "[object Object]".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 19 B6: thousands of `prefix.*` arguments re-listed every key once per argument,
    /// holding the aggregator's lock for seconds; the keys are listed once and searched.
    #[test]
    fn deletes_by_prefix_and_exact_key_as_etsy_replies() {
        let mut aggregator = Aggregator::new(agg::AggConfig::default());
        let mut table = agg::Table::new(true, 10);
        let lines: String = (0..20_000).map(|i| format!("p{}.k{i}:1|c\n", i % 4000)).collect();
        table.insert_packet(1, lines.as_bytes());
        table.insert_packet(1, b"a.b:1|c\na.c:1|c\nab:1|c\n");
        aggregator.absorb(table);
        let reply =
            delete(&mut aggregator, MetricType::Counters, &["a.b".into(), "a.*".into(), "a.*".into(), "zz.*".into()]);
        assert_eq!(reply, "deleted: a.b\ndeleted: a.c\nmetric a.* not found\nmetric zz.* not found\nEND\n\n");
        let patterns: Vec<String> = (0..4000).map(|p| format!("p{p}.*")).collect();
        let reply = delete(&mut aggregator, MetricType::Counters, &patterns);
        assert_eq!(reply.matches("deleted: ").count(), 20_000);
        assert!(aggregator.keys(MetricType::Counters).iter().all(|k| k.starts_with("statsd.") || k == "ab"));
    }

    #[test]
    fn clear_forgets_every_series_of_its_types() {
        let mut aggregator = Aggregator::new(agg::AggConfig::default());
        let mut table = agg::Table::new(true, 10);
        table.insert_packet(1, b"a:1|c\nb:1|c\nt:5|ms\ng:3|g\ns:x|s\n");
        aggregator.absorb(table);
        let reply = clear(&mut aggregator, &[MetricType::Counters, MetricType::Timers]);
        assert_eq!(reply, "cleared counters: 5\ncleared timers: 1\nEND\n\n", "Etsy's three counters too");
        assert!(aggregator.keys(MetricType::Counters).is_empty() && aggregator.keys(MetricType::Timers).is_empty());
        assert_eq!(aggregator.keys(MetricType::Gauges).len(), 1, "gauges were not named");
        let snapshot = aggregator.flush(10_000);
        assert!(snapshot.counters.is_empty() && snapshot.timers.is_empty(), "nothing of them is flushed again");
    }

    #[test]
    fn parses_like_etsy() {
        let cases: &[(&str, Command)] = &[
            ("help\n", Command::Help),
            ("  health \r\n", Command::Health(None)),
            ("health DOWN", Command::Health(Some(false))),
            ("health up", Command::Health(Some(true))),
            ("health sideways", Command::Health(None)),
            ("counters", Command::Dump(MetricType::Counters)),
            ("sets", Command::Dump(MetricType::Sets)),
            ("delcounters a b.*", Command::Delete(MetricType::Counters, vec!["a".into(), "b.*".into()])),
            ("delsets", Command::Delete(MetricType::Sets, vec![])),
            ("quit", Command::Quit),
            ("clear", Command::Clear(MetricType::ALL.to_vec())),
            ("clear timers sets", Command::Clear(vec![MetricType::Timers, MetricType::Sets])),
            ("clear everything", Command::Unknown),
            ("", Command::Unknown),
            ("Help", Command::Unknown),
        ];
        for (line, want) in cases {
            assert_eq!(Command::parse(line), *want, "line {line:?}");
        }
    }

    #[test]
    fn prints_config_like_etsy() {
        let raw: Value = serde_json::json!({"port": 8125, "graphite": {"legacyNamespace": false}, "backends": ["./backends/graphite"], "x": [1, [2, 3], {"a": 1}]});
        let Value::Object(raw) = raw else { unreachable!() };
        assert_eq!(
            config(&raw),
            "\nport: 8125\ngraphite > legacyNamespace: false\nbackends > 0: ./backends/graphite\nx > 0: 1\nx > 1: 2,3\nx > 2: [object Object]\n"
        );
    }
}
