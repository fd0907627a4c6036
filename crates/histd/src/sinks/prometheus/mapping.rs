//! statsd_exporter's mapping file, read unchanged (`prometheus.mappingFile`): each statsd name
//! is matched against the mappings, globs first then regexes, each kind in file order; the
//! first that matches names the series, adds labels (`$1`, `${1}` and `$name` are captures,
//! as Go's `Regexp.Expand` reads them), or drops it (`action: drop`).
//!
//! Read and used: `match`, `match_type` (`glob`: `*` matches within one dot-separated field;
//! `regex`), `name`, `labels`, `action`, `match_metric_type` (`counter`, `gauge`,
//! `observer`), `help`, `ttl`, `scale` (observers), `honor_labels`, `histogram_options.buckets`
//! (and the older top-level `buckets`), `observer_type: summary` with `summary_options`
//! (`quantiles`, `max_age`, `age_buckets`; the older top-level `quantiles`), and the same
//! under `defaults`. Read and not needed: `glob_disable_ordering` (file order always),
//! `native_histogram_*` (see `prometheus.nativeSchema`), a quantile's `error` (histd's
//! quantiles come from the window's circllhist bins).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use regex::{Regex, RegexSet};
use serde::Deserialize;

use super::names::{escape, Labels};
use crate::exposition::Kind;

/// What a mapping says of one statsd name.
#[derive(Debug, Clone, PartialEq)]
pub enum Mapped {
    /// No mapping matched: the default name and labels.
    Unmatched,
    /// `action: drop`.
    Drop,
    /// The series' name and what the mapping sets.
    Series(Mapping),
}

/// A matched mapping, its templates expanded.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    /// The metric name (escaped).
    pub name: String,
    /// Labels the mapping sets.
    pub labels: Labels,
    /// Tags win over the mapping's labels of the same name.
    pub honor_labels: bool,
    /// `help`.
    pub help: Option<String>,
    /// `ttl` (0: none of its own).
    pub ttl: Option<Duration>,
    /// `scale`: observers' values are multiplied by it.
    pub scale: Option<f64>,
    /// Classic bucket boundaries.
    pub buckets: Option<Vec<f64>>,
    /// `observer_type: summary`: quantiles instead of buckets.
    pub summary: Option<Arc<Summary>>,
}

/// A summary's quantiles and the sliding window they are computed over, as client_golang's
/// summaries have them (defaults: 0.5, 0.9, 0.99 over 10 minutes in 5 age buckets).
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The quantiles, each in [0, 1].
    pub quantiles: Vec<f64>,
    /// How far back observations count.
    pub max_age: Duration,
    /// How many pieces the window moves by.
    pub age_buckets: u32,
}

/// The compiled mappings.
#[derive(Debug)]
pub struct Mapper {
    rules: Vec<Rule>,
    set: RegexSet,
}

#[derive(Debug)]
struct Rule {
    regex: Regex,
    name: String,
    labels: Vec<(String, String)>,
    drop: bool,
    metric_type: Option<MetricType>,
    template: Mapping,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum MetricType {
    Counter,
    Gauge,
    Observer,
    Timer,
}

#[derive(Debug, Default, Deserialize)]
struct File {
    #[serde(default)]
    defaults: Options,
    #[serde(default)]
    mappings: Vec<RawMapping>,
}

#[derive(Debug, Default, Clone, Deserialize)]
struct HistogramOptions {
    #[serde(default)]
    buckets: Option<Vec<f64>>,
}

/// What `defaults` and a mapping share.
#[derive(Debug, Default, Clone, Deserialize)]
struct Options {
    #[serde(default)]
    match_type: Option<String>,
    #[serde(default)]
    ttl: Option<serde_yaml_ng::Value>,
    #[serde(default)]
    histogram_options: Option<HistogramOptions>,
    #[serde(default)]
    buckets: Option<Vec<f64>>,
    #[serde(default)]
    observer_type: Option<String>,
    #[serde(default)]
    summary_options: Option<SummaryOptions>,
    #[serde(default)]
    quantiles: Option<Vec<Objective>>,
}

#[derive(Debug, Default, Clone, Deserialize)]
struct SummaryOptions {
    #[serde(default)]
    quantiles: Option<Vec<Objective>>,
    #[serde(default)]
    max_age: Option<serde_yaml_ng::Value>,
    #[serde(default)]
    age_buckets: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
struct Objective {
    quantile: f64,
}

#[derive(Debug, Deserialize)]
struct RawMapping {
    #[serde(rename = "match")]
    pattern: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    match_metric_type: Option<MetricType>,
    #[serde(default)]
    help: Option<String>,
    #[serde(default)]
    scale: Option<f64>,
    #[serde(default)]
    honor_labels: bool,
    #[serde(flatten)]
    options: Options,
}

impl Mapper {
    /// Compiles a mapping file's text; errors name the mapping (by index and `match`).
    pub fn from_yaml(text: &str) -> Result<Mapper, String> {
        let file: File =
            serde_yaml_ng::from_str(text).map_err(|e| format!("not a statsd_exporter mapping file: {e}"))?;
        let mut globs = Vec::new();
        let mut regexes = Vec::new();
        for (index, raw) in file.mappings.into_iter().enumerate() {
            let pattern = raw.pattern.clone();
            let context = |message: String| format!("mappings[{index}] (match '{pattern}'): {message}");
            let glob = match raw.options.match_type.as_deref().or(file.defaults.match_type.as_deref()) {
                None | Some("glob") | Some("") => true,
                Some("regex") => false,
                Some(other) => return Err(context(format!("match_type '{other}' is neither glob nor regex"))),
            };
            let rule = Rule::new(raw, &file.defaults, glob).map_err(context)?;
            if glob {
                globs.push(rule);
            } else {
                regexes.push(rule);
            }
        }
        let rules: Vec<Rule> = globs.into_iter().chain(regexes).collect();
        let set = RegexSet::new(rules.iter().map(|rule| rule.regex.as_str())).map_err(|e| e.to_string())?;
        Ok(Mapper { rules, set })
    }

    /// What the first matching mapping says of `name`, a statsd metric of `kind`.
    pub fn map(&self, name: &str, kind: Kind) -> Mapped {
        let matches = self.set.matches(name);
        for index in matches.iter() {
            let rule = &self.rules[index];
            if rule.metric_type.is_some_and(|wanted| !wanted.covers(kind)) {
                continue;
            }
            if rule.drop {
                return Mapped::Drop;
            }
            let Some(captures) = rule.regex.captures(name) else { continue };
            let expand = |template: &str| {
                let mut out = String::new();
                captures.expand(template, &mut out);
                out
            };
            let mut mapping = rule.template.clone();
            mapping.name = escape(&expand(&rule.name));
            mapping.labels = rule.labels.iter().map(|(label, value)| (label.clone(), expand(value))).collect();
            return Mapped::Series(mapping);
        }
        Mapped::Unmatched
    }
}

impl MetricType {
    fn covers(self, kind: Kind) -> bool {
        matches!(
            (self, kind),
            (MetricType::Counter, Kind::Counter)
                | (MetricType::Gauge, Kind::Gauge)
                | (MetricType::Observer | MetricType::Timer, Kind::Histogram)
        )
    }
}

impl Rule {
    fn new(raw: RawMapping, defaults: &Options, glob: bool) -> Result<Rule, String> {
        let drop = match raw.action.as_deref() {
            None | Some("map") | Some("") => false,
            Some("drop") => true,
            Some(other) => return Err(format!("action '{other}' is neither map nor drop")),
        };
        if raw.name.is_empty() && !drop {
            return Err("the mapping sets no name".into());
        }
        let valid_name = |c: char| c.is_ascii_alphanumeric() || "_:${}".contains(c);
        if !raw.name.chars().all(valid_name) {
            return Err(format!("the name '{}' has characters a metric name cannot", raw.name));
        }
        for label in raw.labels.keys() {
            if label.is_empty() || *label != escape(label) {
                return Err(format!("'{label}' is not a label name"));
            }
        }
        let summary = match raw.options.observer_type.as_deref().or(defaults.observer_type.as_deref()) {
            None | Some("") | Some("histogram") => None,
            Some("summary") => Some(Arc::new(summary(&raw.options, defaults)?)),
            Some(other) => return Err(format!("observer_type '{other}' is neither histogram nor summary")),
        };
        let pattern = if glob { glob_regex(&raw.pattern)? } else { raw.pattern.clone() };
        let regex = Regex::new(&pattern).map_err(|e| format!("not a regular expression: {e}"))?;
        let buckets = bucket_option(&raw.options).or_else(|| bucket_option(defaults));
        if let Some(buckets) = &buckets {
            if buckets.windows(2).any(|pair| pair[0] >= pair[1]) {
                return Err("histogram_options.buckets are not increasing".into());
            }
        }
        let ttl = match raw.options.ttl.as_ref().or(defaults.ttl.as_ref()) {
            None => None,
            Some(value) => Some(duration(value)?).filter(|ttl| !ttl.is_zero()),
        };
        if raw.scale.is_some_and(|scale| !scale.is_finite() || scale <= 0.0) {
            return Err("scale must be a positive number".into());
        }
        let template = Mapping {
            name: String::new(),
            labels: Vec::new(),
            honor_labels: raw.honor_labels,
            help: raw.help,
            ttl,
            scale: raw.scale,
            buckets,
            summary,
        };
        Ok(Rule {
            regex,
            name: raw.name,
            labels: raw.labels.into_iter().collect(),
            drop,
            metric_type: raw.match_metric_type,
            template,
        })
    }
}

/// A summary's settings: the mapping's, else `defaults`', else client_golang's.
fn summary(options: &Options, defaults: &Options) -> Result<Summary, String> {
    let pick = |options: &Options| {
        let summary = options.summary_options.clone().unwrap_or_default();
        (summary.quantiles.or_else(|| options.quantiles.clone()), summary.max_age, summary.age_buckets)
    };
    let (quantiles, max_age, age_buckets) = pick(options);
    let (default_quantiles, default_max_age, default_age_buckets) = pick(defaults);
    let quantiles: Vec<f64> = match quantiles.or(default_quantiles) {
        Some(objectives) if !objectives.is_empty() => objectives.iter().map(|o| o.quantile).collect(),
        _ => vec![0.5, 0.9, 0.99],
    };
    if quantiles.iter().any(|q| !(0.0..=1.0).contains(q)) {
        return Err("summary quantiles must be between 0 and 1".into());
    }
    let max_age = match max_age.or(default_max_age) {
        Some(value) => duration(&value)?,
        None => Duration::ZERO,
    };
    let max_age = if max_age.is_zero() { Duration::from_secs(600) } else { max_age };
    let age_buckets = age_buckets.or(default_age_buckets).filter(|&n| n > 0).unwrap_or(5);
    Ok(Summary { quantiles, max_age, age_buckets })
}

fn bucket_option(options: &Options) -> Option<Vec<f64>> {
    options.histogram_options.as_ref().and_then(|h| h.buckets.clone()).or_else(|| options.buckets.clone())
}

/// A glob as an anchored regex: `*` matches within one field (no `.`), every other character
/// stands for itself.
fn glob_regex(glob: &str) -> Result<String, String> {
    if glob.is_empty() {
        return Err("an empty match".into());
    }
    let mut out = String::from("^");
    for c in glob.chars() {
        match c {
            '*' => out.push_str("([^.]*)"),
            c => out.push_str(&regex::escape(&c.to_string())),
        }
    }
    out.push('$');
    Ok(out)
}

/// A YAML duration as Go's yaml.v2 reads one into `time.Duration`: a string Go's
/// `time.ParseDuration` takes (`90s`, `1h30m`, `500ms`), or an integer of nanoseconds.
fn duration(value: &serde_yaml_ng::Value) -> Result<Duration, String> {
    match value {
        serde_yaml_ng::Value::Number(n) => {
            n.as_u64().map(Duration::from_nanos).ok_or(format!("ttl {n} is not a duration"))
        }
        serde_yaml_ng::Value::String(text) => {
            go_duration(text).ok_or(format!("ttl '{text}' is not a duration (90s, 1h30m)"))
        }
        other => Err(format!("ttl {other:?} is not a duration")),
    }
}

fn go_duration(text: &str) -> Option<Duration> {
    if text == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let seconds = match &rest[..unit] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += number * seconds;
        rest = &rest[unit..];
    }
    Some(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
defaults:
  observer_type: histogram
  ttl: 10m
mappings:
- match: "test.dispatcher.*.*.*"
  name: "dispatcher_events_total"
  labels:
    processor: "$1"
    action: "$2"
    outcome: "$3"
    job: "test_dispatcher"
- match: "*.signup.*.*"
  name: "signup_events_total"
  help: "Signups"
  labels:
    provider: "$2"
    outcome: "$3"
    job: "${1}_server"
- match: "(.*)\\.(.*)--(.*)\\.status\\.(.*)\\.count"
  match_type: regex
  name: "request_total"
  labels:
    hostname: "$1"
    exec: "$2"
    protocol: "$3"
    code: "$4"
- match: "noisy.*"
  action: drop
  name: "dropped"
- match: "rpc.*"
  match_metric_type: observer
  name: "rpc_seconds"
  scale: 0.001
  ttl: 30s
  histogram_options:
    buckets: [0.01, 0.1, 1]
  labels:
    method: "$1_x"
"#;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        let mut labels: Labels = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        labels.sort();
        labels
    }

    #[test]
    fn mappings_name_label_drop_and_pass_through() {
        let mapper = Mapper::from_yaml(FILE).unwrap();
        let series = |name: &str, kind| match mapper.map(name, kind) {
            Mapped::Series(mut mapping) => {
                mapping.labels.sort();
                Some(mapping)
            }
            _ => None,
        };
        let dispatcher = series("test.dispatcher.FooProcessor.send.success", Kind::Counter).unwrap();
        assert_eq!(dispatcher.name, "dispatcher_events_total");
        let want =
            [("action", "send"), ("job", "test_dispatcher"), ("outcome", "success"), ("processor", "FooProcessor")];
        assert_eq!(dispatcher.labels, labels(&want));
        assert_eq!(dispatcher.ttl, Some(Duration::from_secs(600)), "the default ttl");
        let signup = series("foo_product.signup.facebook.failure", Kind::Counter).unwrap();
        let want = [("job", "foo_product_server"), ("outcome", "failure"), ("provider", "facebook")];
        assert_eq!((signup.labels, signup.help.as_deref()), (labels(&want), Some("Signups")));
        let request = series("foo-node.bar-exec--http.status.200.count", Kind::Counter).unwrap();
        let want = [("code", "200"), ("exec", "bar-exec"), ("hostname", "foo-node"), ("protocol", "http")];
        assert_eq!((request.name.as_str(), request.labels), ("request_total", labels(&want)));
        assert_eq!(mapper.map("noisy.thing", Kind::Gauge), Mapped::Drop);
        assert_eq!(mapper.map("unmapped.name", Kind::Counter), Mapped::Unmatched);
        // Globs stay within a field.
        assert_eq!(mapper.map("test.dispatcher.a.b.c.d", Kind::Counter), Mapped::Unmatched);
        // match_metric_type: only observers; Go's Expand reads `$1_x` as the group `1_x`: empty.
        assert_eq!(mapper.map("rpc.get", Kind::Counter), Mapped::Unmatched);
        let rpc = series("rpc.get", Kind::Histogram).unwrap();
        assert_eq!((rpc.scale, rpc.ttl), (Some(0.001), Some(Duration::from_secs(30))));
        assert_eq!((rpc.buckets, rpc.labels), (Some(vec![0.01, 0.1, 1.0]), labels(&[("method", "")])));
        assert!(rpc.summary.is_none());
    }

    #[test]
    fn summaries_take_their_options_or_the_defaults() {
        let text = r#"
defaults: { observer_type: summary, summary_options: { max_age: 1m } }
mappings:
- { match: "a.*", name: "a" }
- { match: "b.*", name: "b", summary_options: { quantiles: [ { quantile: 0.99, error: 0.001 } ], age_buckets: 3 } }
- { match: "c.*", name: "c", observer_type: histogram }
"#;
        let mapper = Mapper::from_yaml(text).unwrap();
        let summary = |name: &str| match mapper.map(name, Kind::Histogram) {
            Mapped::Series(mapping) => mapping.summary.map(|s| (*s).clone()),
            other => panic!("{other:?}"),
        };
        let minute = Duration::from_secs(60);
        assert_eq!(summary("a.x"), Some(Summary { quantiles: vec![0.5, 0.9, 0.99], max_age: minute, age_buckets: 5 }));
        assert_eq!(summary("b.x"), Some(Summary { quantiles: vec![0.99], max_age: minute, age_buckets: 3 }));
        assert_eq!(summary("c.x"), None);
    }

    #[test]
    fn bad_files_are_refused_with_the_mapping_named() {
        let cases = [
            ("mappings: [ { match: 'a.*', labels: { x: '$1' } } ]", "sets no name"),
            ("mappings: [ { match: 'a.*', name: 'a-b' } ]", "cannot"),
            ("mappings: [ { match: '(', match_type: regex, name: 'a' } ]", "not a regular expression"),
            ("mappings: [ { match: 'a', name: 'a', action: keep } ]", "neither map nor drop"),
            ("mappings: [ { match: 'a', name: 'a', ttl: soon } ]", "not a duration"),
            ("mappings: [ { match: 'a', name: 'a', labels: { 'bad-label': x } } ]", "not a label name"),
            ("mappings: [ { match: 'a', name: 'a', match_type: fuzzy } ]", "neither glob nor regex"),
            ("mappings: {", "not a statsd_exporter mapping file"),
        ];
        for (text, want) in cases {
            let error = Mapper::from_yaml(text).unwrap_err();
            assert!(error.contains(want), "{text}: {error}");
        }
        assert!(Mapper::from_yaml("mappings: [ { match: 'a', name: 'a', ttl: 5s } ]").is_ok());
    }

    #[test]
    fn go_durations() {
        let cases = [("90s", 90.0), ("1h30m", 5400.0), ("500ms", 0.5), ("0", 0.0), ("1.5m", 90.0)];
        for (text, seconds) in cases {
            assert_eq!(go_duration(text), Some(Duration::from_secs_f64(seconds)), "{text}");
        }
        for bad in ["", "5", "5 s", "s"] {
            assert!(bad.is_empty() || go_duration(bad).is_none(), "{bad}");
        }
    }
}
