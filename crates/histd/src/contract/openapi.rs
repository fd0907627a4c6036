//! `openapi.json` held to the contract: for every `/api/v1/*` route, an answer with every
//! field filled must match the route's schema exactly (each property the answer writes is
//! described, each property described is written, each with its JSON type and enum), an
//! answer with every optional field empty must still match its types, error answers match
//! `Error`, and the parameters the request types read are the ones the route lists.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use super::*;

fn spec() -> Value {
    serde_json::from_str(OPENAPI).expect("openapi.json is JSON")
}

/// What a `$ref` names (`#/components/...`), or the schema itself.
fn resolve<'a>(spec: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let pointer = reference.strip_prefix('#').expect("a local $ref");
            resolve(spec, spec.pointer(pointer).unwrap_or_else(|| panic!("{reference} is not in openapi.json")))
        }
        None => schema,
    }
}

/// The JSON types a schema allows (`type`, a list of them, `nullable`).
fn types_of(schema: &Value) -> Vec<&str> {
    let mut types: Vec<&str> = match &schema["type"] {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if schema["nullable"] == Value::Bool(true) {
        types.push("null");
    }
    types
}

fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Checks `value` against `schema`; with `complete`, every property the schema describes must
/// be in the value too. Problems are named by their JSON path.
fn check(spec: &Value, schema: &Value, value: &Value, at: &str, complete: bool, problems: &mut Vec<String>) {
    let schema = resolve(spec, schema);
    if let Some(alternatives) = schema["oneOf"].as_array() {
        let fits = |alternative: &Value| {
            let mut found = Vec::new();
            check(spec, alternative, value, at, complete, &mut found);
            found.is_empty()
        };
        if !alternatives.iter().any(fits) {
            problems.push(format!("{at}: fits none of its oneOf: {value}"));
        }
        return;
    }
    let allowed = types_of(schema);
    let actual = type_of(value);
    let fits = allowed.is_empty() || allowed.contains(&actual) || (actual == "integer" && allowed.contains(&"number"));
    if !fits {
        problems.push(format!("{at}: a {actual} where openapi.json says {allowed:?}"));
        return;
    }
    if let Some(choices) = schema["enum"].as_array() {
        if !value.is_null() && !choices.contains(value) {
            problems.push(format!("{at}: {value} is not one of {choices:?}"));
        }
    }
    match value {
        Value::Array(items) => {
            let item_schema = &schema["items"];
            if item_schema.is_null() {
                problems.push(format!("{at}: an array whose items openapi.json does not describe"));
            }
            let counts = (schema["minItems"].as_u64(), schema["maxItems"].as_u64());
            for (index, item) in items.iter().enumerate() {
                check(spec, item_schema, item, &format!("{at}[{index}]"), complete, problems);
            }
            if counts.0.is_some_and(|least| (items.len() as u64) < least)
                || counts.1.is_some_and(|most| items.len() as u64 > most)
            {
                problems.push(format!("{at}: {} items where openapi.json says {counts:?}", items.len()));
            }
        }
        Value::Object(fields) => check_object(spec, schema, fields, at, complete, problems),
        _ => {}
    }
}

fn check_object(
    spec: &Value,
    schema: &Value,
    fields: &serde_json::Map<String, Value>,
    at: &str,
    complete: bool,
    problems: &mut Vec<String>,
) {
    let properties = schema["properties"].as_object();
    let extra = &schema["additionalProperties"];
    if properties.is_none() && !extra.is_object() {
        problems.push(format!("{at}: openapi.json says only `object`: describe its properties"));
        return;
    }
    for (name, value) in fields {
        let path = format!("{at}.{name}");
        match properties.and_then(|p| p.get(name)) {
            Some(property) => check(spec, property, value, &path, complete, problems),
            None if extra.is_object() => check(spec, extra, value, &path, complete, problems),
            None => problems.push(format!("{path}: answered but not in openapi.json")),
        }
    }
    for name in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        if !fields.contains_key(name) {
            problems.push(format!("{at}.{name}: required by openapi.json, not answered"));
        }
    }
    if complete {
        for name in properties.into_iter().flat_map(|p| p.keys()) {
            if !fields.contains_key(name) {
                problems.push(format!("{at}.{name}: in openapi.json, never answered"));
            }
        }
    }
}

/// The schema of a route's answer with `status`.
fn answer_schema<'a>(spec: &'a Value, path: &str, method: &str, status: &str) -> &'a Value {
    let response = &spec["paths"][path][method]["responses"][status];
    let response = resolve(spec, response);
    let schema = &response["content"]["application/json"]["schema"];
    assert!(!schema.is_null(), "{method} {path} {status}: no JSON schema in openapi.json");
    schema
}

fn problems_of(path: &str, method: &str, answer: &impl Serialize, complete: bool) -> Vec<String> {
    let spec = spec();
    let schema = answer_schema(&spec, path, method, "200");
    let value = serde_json::to_value(answer).unwrap();
    let mut problems = Vec::new();
    check(&spec, schema, &value, &format!("{method} {path}"), complete, &mut problems);
    problems
}

fn bins() -> Vec<Bin> {
    vec![(1.0, 1.1, 3), (2.0, 2.1, 1)]
}

fn live_full() -> Live {
    Live {
        now_ms: 1_700_000_000_123,
        uptime_s: 60,
        interval: Interval { seconds: 10.0, elapsed_s: 2.5 },
        totals: Totals {
            packets: 4,
            lines: 100,
            bad_lines: BTreeMap::from([("no_value".to_string(), 2)]),
            kernel_drops: 1,
            truncated_datagrams: 0,
            bad_line_examples: BTreeMap::from([(
                "no_value".to_string(),
                BadLineExample {
                    line: "a.b".to_string(),
                    source: Some("127.0.0.1".to_string()),
                    unix_s: 1_700_000_000,
                },
            )]),
        },
        receive_buffer_bytes: 1 << 20,
        receive_queue_bytes: 512,
        flush_lag_s: Some(0.01),
        rss_bytes: 20 << 20,
        flushes: 6,
        last_flush_duration_ms: 1.5,
        store_bytes: Some(1 << 16),
        series_count: SeriesCount { counter: 1, timer: 1, gauge: 0, set: 0 },
        sinks: BTreeMap::from([("graphite".to_string(), BTreeMap::from([("delivered".to_string(), 3.0)]))]),
        sink_last_errors: BTreeMap::from([("forward".to_string(), "broker down".to_string())]),
        alerts: vec![ActiveAlert { name: "slow".into(), state: "firing".into(), summary: "312 waited".into() }],
        series: vec![SeriesRow {
            name: "api.latency;route=/a".into(),
            kind: "timer".into(),
            value: Some(4.0),
            rate: Some(1.6),
            p50: Some(1.0),
            p99: Some(2.0),
            at_or_above: Some(1),
            bins: Some(bins()),
        }],
        matched: 1,
        truncated: false,
        cardinality: Some(Cardinality {
            names: vec![NameRow { name: "api.latency".into(), series: 1, tags: vec![("route".into(), 1)] }],
            other: Other { names: 0, series: 0 },
        }),
        prefixes: Some(vec![Prefix { prefix: "api".into(), rate: 1.6, share: 1.0 }]),
        partial: Some(true),
        members: Some(vec![Member { url: "https://g2:8080".into(), answered: false, error: Some("timed out".into()) }]),
        kafka: Some(KafkaStanding {
            topic: "histd-forward".into(),
            group: "dc-a".into(),
            instance_id: Some("histd-3f2a".into()),
            partitions: vec![PartitionStanding { partition: 0, next: 10, end: 12, lag: 2 }],
            lag: 2,
            commits_pending: 1,
            last_commit_age_s: Some(3),
            falling_behind: false,
        }),
    }
}

fn alerts_full() -> Alerts {
    let rule = AlertRule {
        name: "slow".into(),
        expr: "count_above(api.latency, 1500)".into(),
        over_s: 60,
        for_s: 0,
        comparison: "above".into(),
        threshold: 300.0,
        state: "firing".into(),
        value: Some(312.0),
        since: Some(1),
        firing_since: Some(1),
        resolved_at: Some(0),
        evaluated_at: Some(2),
        summary: "312 users waited".into(),
        labels: BTreeMap::from([("team".to_string(), "web".to_string())]),
        url: "http://127.0.0.1:8127/".into(),
    };
    Alerts { alerts: vec![rule], firing: 1 }
}

fn budgets_full() -> Budgets {
    let per_type = || BTreeMap::from([("counters".to_string(), 1), ("timers".to_string(), 2)]);
    Budgets {
        series: per_type(),
        max_series: per_type(),
        max_series_per_name: 10_000,
        max_tag_values: 1_000,
        max_set_members: 100_000,
        names_at_series_per_name: per_type(),
        folded_series: BTreeMap::from([("max_series".to_string(), 0)]),
        sets_sketched: 0,
        idle_expired: per_type(),
        offenders: vec![Offender { pattern: "user.*".into(), new_series_per_second: 0.5, new_series: 10, folded: 2 }],
    }
}

fn series_full() -> SeriesList {
    SeriesList {
        series: vec![
            SeriesEntry::Series {
                name: "api.latency".into(),
                tags: vec!["route=/a".into()],
                kind: "timer".into(),
                origin: Origin::User,
            },
            SeriesEntry::Name { name: "api.hits".into(), kind: "counter".into(), tag_sets: 3, origin: Origin::Histd },
        ],
        total: 2,
        truncated: false,
        origins: BTreeMap::from([("user".to_string(), 2)]),
    }
}

/// Every `/api/v1` answer, filled, with its route.
fn full_answers() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        ("/api/v1/live", "get", value(live_full())),
        ("/api/v1/series", "get", value(series_full())),
        (
            "/api/v1/series",
            "delete",
            value(Forgotten {
                forgotten: 1,
                points: 10,
                aggregator_keys: 1,
                series: vec!["a{b=c}".into()],
                series_truncated: false,
            }),
        ),
        (
            "/api/v1/query",
            "get",
            value(QueryResult {
                expr: "count(a)".into(),
                step: 10,
                from: 0,
                to: 20,
                points: vec![(0, Some(1.5))],
                partial: Some(true),
                members: Some(vec![Member {
                    url: "https://g2:8080".into(),
                    answered: false,
                    error: Some("timed out".into()),
                }]),
            }),
        ),
        (
            "/api/v1/histogram",
            "get",
            value(HistogramResult {
                name: "a".into(),
                from: 0,
                to: 10,
                count: 4.0,
                sum: Some(5.2),
                min: Some(1.0),
                max: Some(2.0),
                bins: bins(),
                circllhist: "AAE=".into(),
            }),
        ),
        (
            "/api/v1/heatmap",
            "get",
            value(HeatmapResult {
                name: "a".into(),
                from: 0,
                to: 20,
                step: 10,
                steps: vec![HeatmapStep { t: 0, bins: bins() }],
            }),
        ),
        ("/api/v1/alerts", "get", value(alerts_full())),
        ("/api/v1/budgets", "get", value(budgets_full())),
        ("/api/v1/forward", "post", value(Merged { merged: 3, duplicate: false })),
    ]
}

/// An answer as the handler writes it.
fn value(answer: impl Serialize) -> Value {
    serde_json::to_value(answer).unwrap()
}

#[test]
fn every_answer_filled_matches_its_schema_property_for_property() {
    let spec = spec();
    let mut problems = Vec::new();
    for (path, method, value) in full_answers() {
        let schema = answer_schema(&spec, path, method, "200");
        check(&spec, schema, &value, &format!("{method} {path}"), true, &mut problems);
    }
    assert!(problems.is_empty(), "openapi.json and the contract differ:\n{}", problems.join("\n"));
}

#[test]
fn every_api_route_of_openapi_has_a_typed_answer() {
    let spec = spec();
    let typed: BTreeSet<(&str, &str)> = full_answers().iter().map(|(path, method, _)| (*path, *method)).collect();
    let described: BTreeSet<(String, String)> = spec["paths"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(path, _)| path.starts_with("/api/v1/") && path.as_str() != "/api/v1/openapi.json")
        .flat_map(|(path, methods)| methods.as_object().unwrap().keys().map(move |m| (path.clone(), m.clone())))
        .collect();
    let typed: BTreeSet<(String, String)> = typed.into_iter().map(|(p, m)| (p.to_string(), m.to_string())).collect();
    assert_eq!(described, typed, "routes in openapi.json and routes with a typed answer");
}

#[test]
fn answers_with_their_optional_fields_empty_match_their_types() {
    let live = Live {
        cardinality: None,
        prefixes: None,
        store_bytes: None,
        flush_lag_s: None,
        partial: None,
        members: None,
        kafka: Some(KafkaStanding { instance_id: None, last_commit_age_s: None, ..live_full().kafka.unwrap() }),
        ..live_full()
    };
    let mut row = live_full().series[0].clone();
    (row.value, row.rate, row.p50, row.p99, row.at_or_above, row.bins) = (None, None, None, None, None, None);
    let live = Live { series: vec![row], ..live };
    let mut rule = alerts_full().alerts[0].clone();
    (rule.value, rule.since, rule.firing_since, rule.resolved_at, rule.evaluated_at) = (None, None, None, None, None);
    let histogram = HistogramResult { sum: None, min: None, max: None, ..HistogramResult::default() };
    let query = QueryResult { points: vec![(0, None)], ..QueryResult::default() };
    let mut problems = problems_of("/api/v1/live", "get", &live, false);
    problems.extend(problems_of("/api/v1/alerts", "get", &Alerts { alerts: vec![rule], firing: 0 }, false));
    problems.extend(problems_of("/api/v1/histogram", "get", &histogram, false));
    problems.extend(problems_of("/api/v1/query", "get", &query, false));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn error_answers_match_the_error_schema() {
    let spec = spec();
    let error = serde_json::to_value(ErrorAnswer { error: "parameter `step`: too small".into() }).unwrap();
    let mut problems = Vec::new();
    for (path, methods) in spec["paths"].as_object().unwrap() {
        for (method, operation) in methods.as_object().unwrap() {
            for (status, response) in operation["responses"].as_object().unwrap() {
                let response = resolve(&spec, response);
                let schema = &response["content"]["application/json"]["schema"];
                // `/health` answers its whole body when down (503): not an error.
                if status.starts_with(['4', '5']) && !schema.is_null() && path != "/health" {
                    check(&spec, schema, &error, &format!("{method} {path} {status}"), true, &mut problems);
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_parameters_read_are_the_parameters_listed() {
    let spec = spec();
    let cases: [(&str, &str, &[&str]); 6] = [
        ("/api/v1/live", "get", &LiveRequest::PARAMETERS),
        ("/api/v1/series", "get", &SeriesRequest::PARAMETERS),
        ("/api/v1/series", "delete", &SeriesRequest::FORGET_PARAMETERS),
        ("/api/v1/query", "get", &QueryRequest::PARAMETERS),
        ("/api/v1/histogram", "get", &HistogramRequest::PARAMETERS),
        ("/api/v1/heatmap", "get", &HeatmapRequest::PARAMETERS),
    ];
    for (path, method, read) in cases {
        let listed: BTreeSet<&str> = spec["paths"][path][method]["parameters"]
            .as_array()
            .unwrap_or_else(|| panic!("{method} {path} lists no parameters"))
            .iter()
            .map(|parameter| resolve(&spec, parameter)["name"].as_str().unwrap())
            .collect();
        let read: BTreeSet<&str> = read.iter().copied().collect();
        assert_eq!(listed, read, "{method} {path}: openapi.json's parameters and the request type's");
    }
}

#[test]
fn requests_read_back_what_their_clients_write() {
    let query_of = |path_and_query: &str| -> std::collections::HashMap<String, String> {
        let (_, query) = path_and_query.split_once('?').unwrap_or_default();
        query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .map(|(name, value)| (name.to_string(), percent_decode(value)))
            .collect()
    };
    let live = LiveRequest {
        limit: 7,
        sort: SortBy::P99,
        pattern: Some("^api\\.(a|b)".into()),
        threshold: Some(1.5),
        tables: true,
        keys: vec!["api.a;route=/x".into(), "api.b".into()],
    };
    assert_eq!(LiveRequest::from_query(&query_of(&live.path_and_query())), Ok(live.clone()));
    let plain = LiveRequest { pattern: None, threshold: None, tables: false, keys: Vec::new(), ..live };
    assert_eq!(LiveRequest::from_query(&query_of(&plain.path_and_query())), Ok(plain));
    let query = QueryRequest { expr: "quantile(a{r=/x}, 0.9)".into(), from: 100, to: 700, step: 60 };
    assert_eq!(QueryRequest::from_query(&query_of(&query.path_and_query()), 1_000, 100), Ok(query));
    let series = SeriesRequest {
        pattern: Some("api.*".into()),
        contains: Some("route".into()),
        selector: Some("api.latency{route=/a}".into()),
        exact: true,
        kind: Some(store::Kind::Timer),
        origins: Some(vec![Origin::User, Origin::Bench]),
        group_by_name: true,
        limit: Some(9),
    };
    assert_eq!(SeriesRequest::from_query(&query_of(&series.path_and_query()), 100), Ok(series));
    let all = SeriesRequest::default();
    assert_eq!(all.path_and_query(), "/api/v1/series");
    assert_eq!(SeriesRequest::from_query(&query_of(&all.path_and_query()), 100), Ok(all));
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            out.push(u8::from_str_radix(&text[index + 1..index + 3], 16).unwrap());
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

#[test]
fn bad_parameters_are_named() {
    let query = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let cases: [(Result<(), crate::query_params::BadParameter>, &str); 6] = [
        (LiveRequest::from_query(&query(&[("sort", "speed")])).map(drop), "sort"),
        (LiveRequest::from_query(&query(&[("limit", "0")])).map(drop), "limit"),
        (LiveRequest::from_query(&query(&[("threshold", "NaN")])).map(drop), "threshold"),
        (QueryRequest::from_query(&query(&[]), 1_000, 100).map(drop), "expr"),
        (SeriesRequest::from_query(&query(&[("origin", "user,them")]), 100).map(drop), "origin"),
        (HeatmapRequest::from_query(&query(&[("name", "a"), ("step", "1s")]), 100_000, 100).map(drop), "step"),
    ];
    for (index, (result, name)) in cases.into_iter().enumerate() {
        assert_eq!(result.map_err(|bad| bad.name), Err(name), "case {index}");
    }
}
