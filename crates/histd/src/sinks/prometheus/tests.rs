//! Encoder tests on snapshots from the real aggregator: remote-write requests are decompressed
//! and decoded by a protobuf reader written here from the `prompb` schema; `/metrics` text is
//! parsed line by line.

use agg::{AggConfig, Snapshot};

use super::config::{HistogramMode, DEFAULT_BUCKETS};
use super::encode::{encode, Flush, SERIES_PER_REQUEST, STALE_NAN};
use super::exposition::WriteRegistry;
use super::native::Native;
use super::samples::Layout;
use super::state::Registry;
use crate::exposition::{Exposition, Format};

/// Flushes of one aggregator, one packet each, 10 s apart from t = 1000 s.
fn snapshots(packets: &[&str]) -> Vec<Snapshot> {
    crate::sinks::test_flushes(packets, 1_000_000, AggConfig::default())
}

fn registry(packets: &[&str]) -> Registry {
    let mut registry = Registry::new(true, Some(5), None);
    snapshots(packets).iter().for_each(|snapshot| registry.apply(snapshot));
    registry
}

/// `registry` as `/metrics` text (OpenMetrics when `open_metrics`), histograms as `layout` says.
fn text_of(registry: &Registry, layout: &Layout, open_metrics: bool) -> String {
    let mut text = Exposition::new(open_metrics);
    text.registry(registry, layout);
    text.finish()
}

/// A decoded time series: sorted labels, value, timestamp, and the time of a 0 sent before
/// (a sample that begins with the flush).
type Decoded = (Vec<(String, String)>, f64, i64, Option<i64>);

fn varint(bytes: &[u8], at: &mut usize) -> u64 {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = bytes[*at];
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            break;
        }
    }
    value
}

/// The fields of one message: (field number, wire type, payload or varint/fixed value).
fn fields(bytes: &[u8]) -> Vec<(u64, u8, Vec<u8>)> {
    let (mut at, mut out) = (0, Vec::new());
    while at < bytes.len() {
        let key = varint(bytes, &mut at);
        let (field, wire) = (key >> 3, (key & 7) as u8);
        let payload = match wire {
            0 => varint(bytes, &mut at).to_le_bytes().to_vec(),
            1 => {
                at += 8;
                bytes[at - 8..at].to_vec()
            }
            2 => {
                let len = varint(bytes, &mut at) as usize;
                at += len;
                bytes[at - len..at].to_vec()
            }
            other => panic!("unexpected wire type {other}"),
        };
        out.push((field, wire, payload));
    }
    out
}

fn decode_request(body: &[u8]) -> Vec<Decoded> {
    let raw = snap::raw::Decoder::new().decompress_vec(body).expect("snappy block format");
    let mut series = Vec::new();
    for (field, wire, payload) in fields(&raw) {
        assert_eq!((field, wire), (1, 2), "WriteRequest holds only timeseries");
        let (mut labels, mut samples) = (Vec::new(), Vec::new());
        for (field, _, inner) in fields(&payload) {
            match field {
                1 => {
                    let parts = fields(&inner);
                    let text = |i: usize| String::from_utf8(parts[i].2.clone()).unwrap();
                    assert_eq!((parts[0].0, parts[1].0), (1, 2));
                    labels.push((text(0), text(1)));
                }
                2 => {
                    let parts = fields(&inner);
                    let value = f64::from_le_bytes(parts[0].2.clone().try_into().unwrap());
                    let ts = u64::from_le_bytes(parts[1].2.clone().try_into().unwrap()) as i64;
                    samples.push((value, ts));
                }
                4 => {
                    let native = decode_native(&inner);
                    samples.push((native.count() as f64, native_timestamp(&inner)));
                }
                other => panic!("unexpected TimeSeries field {other}"),
            }
        }
        let (value, ts) = *samples.last().expect("a sample");
        let start = match samples[..] {
            [_] => None,
            [(zero, start), (_, ts)] if zero == 0.0 && start < ts => Some(start),
            _ => panic!("one sample, or a 0 before it: {samples:?}"),
        };
        series.push((labels, value, ts, start));
    }
    series
}

fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

fn u64_of(payload: &[u8]) -> u64 {
    u64::from_le_bytes(payload.try_into().unwrap())
}

/// A `Histogram` message back into buckets (spans and deltas), checking its count and sum.
fn decode_native(bytes: &[u8]) -> Native {
    let mut native = Native::new(0);
    let (mut count, mut spans, mut deltas) = (0, [Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for (field, _, payload) in fields(bytes) {
        match field {
            1 => count = u64_of(&payload),
            3 | 5 | 15 => {}
            4 => native.schema = unzigzag(u64_of(&payload)) as i32,
            6 => native.zero_count = u64_of(&payload),
            8 | 11 => {
                let parts = fields(&payload);
                let span = (unzigzag(u64_of(&parts[0].2)) as i32, u64_of(&parts[1].2) as i32);
                spans[usize::from(field == 11)].push(span);
            }
            9 | 12 => {
                let mut at = 0;
                while at < payload.len() {
                    deltas[usize::from(field == 12)].push(unzigzag(varint(&payload, &mut at)));
                }
            }
            other => panic!("unexpected Histogram field {other}"),
        }
    }
    for side in 0..2 {
        let (mut index, mut value, mut delta) = (0, 0i64, deltas[side].iter());
        for &(offset, length) in &spans[side] {
            index += offset;
            for _ in 0..length {
                value += delta.next().expect("a delta per bucket");
                let buckets = if side == 1 { &mut native.positive } else { &mut native.negative };
                buckets.insert(index, value as u64);
                index += 1;
            }
        }
    }
    assert_eq!(count, native.count() + native.nan_count, "count_int is every observation");
    native
}

fn native_timestamp(bytes: &[u8]) -> i64 {
    fields(bytes).iter().find(|(field, ..)| *field == 15).map_or(0, |(_, _, p)| u64_of(p) as i64)
}

fn decode_all(registry: &Registry, mode: HistogramMode) -> Vec<Decoded> {
    let layout = Layout::new(mode, &DEFAULT_BUCKETS);
    let flush = Flush { layout: &layout, timestamp_ms: 1_010_000, start_ms: 1_000_000, external_labels: &[] };
    encode(registry, &flush, &[]).iter().flat_map(|r| decode_request(&r.body)).collect()
}

fn find<'a>(series: &'a [Decoded], wanted: &[(&str, &str)]) -> Option<&'a Decoded> {
    let wanted: Vec<(String, String)> = wanted.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    series.iter().find(|(labels, ..)| *labels == wanted)
}

#[test]
fn counters_accumulate_across_flushes_and_labels_are_sorted() {
    let registry =
        registry(&["hits:3|c|#route:a,env:prod\nhits:1|c|@0.5|#env:prod,route:a", "hits:2|c|#env:prod,route:a"]);
    let series = decode_all(&registry, HistogramMode::Classic);
    let hits = find(&series, &[("__name__", "hits"), ("env", "prod"), ("route", "a")]).expect("hits");
    assert_eq!((hits.1, hits.2), (3.0 + 2.0 + 2.0, 1_010_000));
    for (labels, ..) in &series {
        let mut sorted = labels.clone();
        sorted.sort();
        assert_eq!(&sorted, labels, "labels sorted by name");
    }
}

#[test]
fn gauges_sets_and_type_conflicts() {
    let registry = registry(&["temp:20|g\nusers:a|s\nusers:b|s\nusers:a|s", "temp:-5|g\nusers:c|s\ntemp:1|c"]);
    let series = decode_all(&registry, HistogramMode::Classic);
    assert_eq!(find(&series, &[("__name__", "temp")]).unwrap().1, 15.0);
    assert_eq!(find(&series, &[("__name__", "users")]).unwrap().1, 1.0, "a set is its last interval's members");
    assert_eq!(registry.counts.type_conflicts, 1, "temp is a gauge: the counter is refused");
}

#[test]
fn an_empty_name_is_refused_and_counted() {
    // Found by the prometheus_output fuzz target: `{k="v"} 1` is not a sample.
    let registry = registry(&[";k=v:1|c\n;x=y:2|ms"]);
    assert_eq!(registry.counts.empty_names, 2);
    let text = text_of(&registry, &Layout::new(HistogramMode::Classic, &DEFAULT_BUCKETS), false);
    assert!(!text.lines().any(|line| line.starts_with('{')));
}

#[test]
fn timers_in_seconds_as_classic_buckets() {
    let registry = registry(&["rt:4|ms\nrt:100|ms\nrt:101|ms\nrt:3000|ms", "rt:20000|ms"]);
    let series = decode_all(&registry, HistogramMode::Classic);
    let bucket = |le: &str| find(&series, &[("__name__", "rt_bucket"), ("le", le)]).map(|s| s.1);
    // 100 ms sits on the 0.1 boundary: circllhist's bin [0.10, 0.11) is above it.
    let want = [
        ("0.005", 1.0),
        ("0.05", 1.0),
        ("0.1", 1.0),
        ("0.25", 3.0),
        ("2.5", 3.0),
        ("5", 4.0),
        ("10", 4.0),
        ("+Inf", 5.0),
    ];
    for (le, count) in want {
        assert_eq!(bucket(le), Some(count), "le={le}");
    }
    assert_eq!(find(&series, &[("__name__", "rt_count")]).unwrap().1, 5.0);
    let sum = find(&series, &[("__name__", "rt_sum")]).unwrap().1;
    assert!((sum - 23.205).abs() < 1e-9, "{sum}");
}

#[test]
fn timers_as_vmrange_buckets_bin_for_bin() {
    let registry = registry(&["rt:4|ms\nrt:100|ms\nrt:101|ms\nrt:109|ms\nrt:0|ms\nh:-3|h", "rt:100|ms"]);
    let series = decode_all(&registry, HistogramMode::Vmrange);
    let bucket = |range: &str| find(&series, &[("__name__", "rt_bucket"), ("vmrange", range)]).map(|s| s.1);
    assert_eq!(bucket("4.0e-03...4.1e-03"), Some(1.0));
    assert_eq!(bucket("1.0e-01...1.1e-01"), Some(4.0));
    assert_eq!(bucket("0...0"), Some(1.0));
    let buckets = series.iter().filter(|(labels, ..)| labels[0].1 == "rt_bucket").count();
    assert_eq!(buckets, 3);
    // `h` histograms keep their unit, negatives mirror.
    let negative = find(&series, &[("__name__", "h_bucket"), ("vmrange", "-3.1e+00...-3.0e+00")]);
    assert_eq!(negative.map(|s| s.1), Some(1.0));
}

#[test]
fn large_flushes_are_cut_into_requests() {
    let packet: String = (0..SERIES_PER_REQUEST + 5).map(|i| format!("c{i}:1|c\n")).collect();
    let registry = registry(&[&packet]);
    let layout = Layout::new(HistogramMode::Classic, &DEFAULT_BUCKETS);
    let requests =
        encode(&registry, &Flush { layout: &layout, timestamp_ms: 1, start_ms: 0, external_labels: &[] }, &[]);
    assert_eq!(requests.len(), 2);
    let total: u64 = requests.iter().map(|r| r.points).sum();
    let decoded: usize = requests.iter().map(|r| decode_request(&r.body).len()).sum();
    assert_eq!((total, decoded), (registry.series_count() as u64, registry.series_count()));
}

#[test]
fn expired_series_get_stale_markers() {
    let mut registry = registry(&["old:1|c\nrt:5|ms", "new:1|c"]);
    let forgotten = registry.expire(1_010, Some(5));
    let names: Vec<&str> = forgotten.iter().map(|f| f.name.as_str()).collect();
    // statsd.bad_lines_seen stayed 0: an idle counter too.
    assert_eq!(names, ["old", "rt", "statsd_bad_lines_seen"]);
    let layout = Layout::new(HistogramMode::Classic, &DEFAULT_BUCKETS);
    let series: Vec<Decoded> =
        encode(&registry, &Flush { layout: &layout, timestamp_ms: 1, start_ms: 0, external_labels: &[] }, &forgotten)
            .iter()
            .flat_map(|r| decode_request(&r.body))
            .collect();
    let stale: Vec<&Decoded> = series.iter().filter(|(_, value, ..)| value.to_bits() == STALE_NAN).collect();
    assert_eq!(stale.len(), 2 + DEFAULT_BUCKETS.len() + 3, "old, bad_lines_seen, and rt's buckets, +Inf, _sum, _count");
    assert!(find(&series, &[("__name__", "new")]).is_some());
    assert_eq!(registry.counts.expired, 3);
}

#[test]
fn exposition_text_and_open_metrics() {
    let registry = registry(&["hits:2|c|#env:prod\nrt:100|ms\nq\"x:1|g|#k:a\\\"b"]);
    let layout = Layout::new(HistogramMode::Classic, &[0.1, 1.0]);
    let text = text_of(&registry, &layout, false);
    for line in [
        "# TYPE hits counter",
        "hits{env=\"prod\"} 2",
        "# TYPE rt histogram",
        "rt_bucket{le=\"0.1\"} 0",
        "rt_bucket{le=\"1\"} 1",
        "rt_bucket{le=\"+Inf\"} 1",
        "rt_sum 0.1",
        "rt_count 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    let open = text_of(&registry, &layout, true);
    assert!(open.lines().any(|l| l == "# TYPE hits counter"));
    assert!(open.lines().any(|l| l == "hits_total{env=\"prod\"} 2"), "{open}");
    assert!(open.ends_with("# EOF\n"));
}

#[test]
fn accept_headers_choose_the_format() {
    let cases = [
        ("", false),
        ("text/plain", false),
        ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1", true),
        ("text/plain;version=0.0.4;q=1,application/openmetrics-text;q=0.5", false),
        ("application/openmetrics-text; version=1.0.0", true),
        ("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3", false),
    ];
    for (accept, open_metrics) in cases {
        let want = if open_metrics { Format::OpenMetrics } else { Format::Text };
        assert_eq!(Format::negotiate(accept, false), want, "{accept}");
    }
    let prometheus_native = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.1";
    let formats = [
        (prometheus_native, true, Format::Protobuf),
        (prometheus_native, false, Format::Text),
        ("application/openmetrics-text;version=1.0.0,application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5", true, Format::OpenMetrics),
        ("text/plain", true, Format::Text),
        ("application/openmetrics-text;q=0", true, Format::Text),
        ("*/*", true, Format::Text),
    ];
    for (accept, allowed, want) in formats {
        assert_eq!(Format::negotiate(accept, allowed), want, "{accept}");
    }
}

#[test]
fn external_labels_join_every_series_unless_it_has_its_own() {
    let registry = registry(&["a:1|c\nb:1|c|#instance:own"]);
    let layout = Layout::new(HistogramMode::Classic, &DEFAULT_BUCKETS);
    let external = [("instance".to_string(), "web-1".to_string()), ("zone".to_string(), "z".to_string())];
    let flush = Flush { layout: &layout, timestamp_ms: 1, start_ms: 0, external_labels: &external };
    let series: Vec<Decoded> = encode(&registry, &flush, &[]).iter().flat_map(|r| decode_request(&r.body)).collect();
    assert!(find(&series, &[("__name__", "a"), ("instance", "web-1"), ("zone", "z")]).is_some());
    assert!(find(&series, &[("__name__", "b"), ("instance", "own"), ("zone", "z")]).is_some());
}

#[test]
fn what_begins_with_a_flush_gets_a_zero_at_the_interval_start() {
    // rt's bin 4 ms is new in the second flush, 100 ms is not; hits is new in the first.
    let registry = registry(&["hits:1|c\nrt:100|ms\ntemp:5|g", "hits:1|c\nrt:100|ms\nrt:4|ms\nlate:1|c"]);
    let series = decode_all(&registry, HistogramMode::Vmrange);
    let start = |labels: &[(&str, &str)]| find(&series, labels).unwrap_or_else(|| panic!("{labels:?}")).3;
    assert_eq!(start(&[("__name__", "late")]), Some(1_000_000), "a counter new in this flush");
    assert_eq!(start(&[("__name__", "hits")]), None, "a counter seen before");
    assert_eq!(start(&[("__name__", "temp")]), None, "never a gauge");
    assert_eq!(start(&[("__name__", "rt_bucket"), ("vmrange", "4.0e-03...4.1e-03")]), Some(1_000_000));
    assert_eq!(start(&[("__name__", "rt_bucket"), ("vmrange", "1.0e-01...1.1e-01")]), None);
    assert_eq!(start(&[("__name__", "rt_count")]), None);
}

#[test]
fn native_histograms_round_trip_through_spans_and_deltas() {
    let registry = registry(&["rt:4|ms\nrt:100|ms\nrt:101|ms\nrt:0|ms\nrt:3000|ms\nneg:-2|h\nneg:-2.5|h", "rt:100|ms"]);
    let layout = Layout::new(HistogramMode::Native, &DEFAULT_BUCKETS);
    let flush = Flush { layout: &layout, timestamp_ms: 1_010_000, start_ms: 1_000_000, external_labels: &[] };
    let body = &encode(&registry, &flush, &[])[0].body;
    let raw = snap::raw::Decoder::new().decompress_vec(body).unwrap();
    let mut found = 0;
    for (_, _, series) in fields(&raw) {
        let parts = fields(&series);
        let name = String::from_utf8(fields(&parts[0].2)[1].2.clone()).unwrap();
        let Some((_, _, histogram)) = parts.iter().find(|(field, ..)| *field == 4) else { continue };
        let family = &registry.families[&name];
        let super::state::Value::Histogram(cumulative) = &family.series.iter().next().unwrap().1.value else {
            panic!()
        };
        let want = cumulative.native.as_ref().unwrap();
        let got = decode_native(histogram);
        assert_eq!(
            (&got.positive, &got.negative, got.zero_count, got.schema),
            (&want.positive, &want.negative, want.zero_count, 5),
            "{name}"
        );
        assert_eq!(native_timestamp(histogram), 1_010_000);
        found += 1;
    }
    assert_eq!(found, 2, "rt and neg are native histograms, without _bucket samples");
}

#[test]
fn a_mapping_file_names_labels_scales_and_drops() {
    let mapper = super::mapping::Mapper::from_yaml(
        r#"
mappings:
- match: "api.*.latency"
  name: "api_latency_seconds"
  help: "API latency"
  labels: { route: "$1", env: "mapped" }
  histogram_options: { buckets: [0.05, 0.5] }
  ttl: 5s
- match: "legacy.*"
  name: "legacy_seconds"
  scale: 0.5
- match: "debug.*"
  action: drop
  name: "x"
"#,
    )
    .unwrap();
    let mut registry = Registry::new(true, None, Some(std::sync::Arc::new(mapper)));
    for snapshot in snapshots(&["api.login.latency:100|ms|#env:prod,host:a\ndebug.x:1|c\nlegacy.t:4|h\nplain.c:1|c"]) {
        registry.apply(&snapshot);
    }
    assert_eq!(registry.counts.mapping_drops, 1);
    let text = text_of(&registry, &Layout::new(HistogramMode::Classic, &DEFAULT_BUCKETS), false);
    for line in [
        "# HELP api_latency_seconds API latency",
        "api_latency_seconds_bucket{env=\"mapped\",host=\"a\",route=\"login\",le=\"0.05\"} 0",
        "api_latency_seconds_bucket{env=\"mapped\",host=\"a\",route=\"login\",le=\"0.5\"} 1",
        "api_latency_seconds_bucket{env=\"mapped\",host=\"a\",route=\"login\",le=\"+Inf\"} 1",
        "legacy_seconds_sum 2",
        "plain_c 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    assert!(!text.contains("debug"), "{text}");
    // The mapping's ttl (5 s) forgets the latency series; the rest have none.
    let forgotten = registry.expire(1_000 + 6, None);
    let names: Vec<&str> = forgotten.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["api_latency_seconds"]);
}

#[test]
fn protobuf_exposition_carries_native_and_classic_buckets() {
    let registry = registry(&["hits:2|c|#env:prod\nrt:100|ms\nrt:4|ms\ntemp:3|g"]);
    let mut out = Exposition::in_format(Format::Protobuf);
    let sample = out.family("histd_own_total", Some(crate::exposition::Kind::Counter), Some("own"));
    out.sample(&sample, &[], None, 7.0);
    out.registry(&registry, &Layout::new(HistogramMode::Native, &[0.01, 0.5]));
    let bytes = out.finish_bytes();
    let mut families = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = varint(&bytes, &mut at) as usize;
        families.push(fields(&bytes[at..at + len]));
        at += len;
    }
    let family = |name: &str| families.iter().find(|f| f[0].2 == name.as_bytes()).unwrap_or_else(|| panic!("{name}"));
    let double = |payload: &[u8]| f64::from_le_bytes(fields(payload)[0].2.clone().try_into().unwrap());
    // A counter: type 0, Metric.counter (3) holds the value.
    let own = family("histd_own_total");
    assert_eq!((u64_of(&own[2].2), double(&fields(&own[3].2)[0].2)), (0, 7.0));
    let hits = family("hits");
    let metric = fields(&hits[2].2);
    assert_eq!(metric[0].0, 1, "a label pair first");
    assert_eq!((metric[1].0, double(&metric[1].2)), (3, 2.0));
    let gauge = fields(&family("temp")[2].2);
    assert_eq!((gauge[0].0, double(&gauge[0].2)), (2, 3.0));
    // A histogram: type 4; count, sum, classic buckets below 0.01 and 0.5, native schema 5.
    let rt = family("rt");
    assert_eq!(u64_of(&rt[1].2), 4);
    let histogram = fields(&fields(&rt[2].2)[0].2);
    let field = |n: u64| histogram.iter().filter(move |f| f.0 == n).map(|f| f.2.clone());
    assert_eq!(u64_of(&field(1).next().unwrap()), 2);
    assert!((f64::from_le_bytes(field(2).next().unwrap().try_into().unwrap()) - 0.104).abs() < 1e-12);
    let buckets: Vec<u64> = field(3).map(|b| u64_of(&fields(&b)[0].2)).collect();
    assert_eq!(buckets, vec![1, 2]);
    assert_eq!(unzigzag(u64_of(&field(5).next().unwrap())), 5);
    assert!(field(12).next().is_some() && field(13).next().is_some(), "positive spans and deltas");
}

#[test]
fn summary_mappings_expose_quantiles_over_their_window() {
    let mapper = super::mapping::Mapper::from_yaml(
        "mappings: [ { match: 'rpc.*', name: 'rpc_seconds', observer_type: summary, labels: { method: '$1' }, \
         summary_options: { quantiles: [ { quantile: 0.5 }, { quantile: 0.99 } ], max_age: 20s, age_buckets: 2 } } ]",
    )
    .unwrap();
    let mut registry = Registry::new(true, Some(5), Some(std::sync::Arc::new(mapper)));
    // Flushes 10 s apart: the first interval's values leave the 20 s window at the third.
    let flushes = snapshots(&["rpc.get:100|ms\nrpc.get:100|ms\nrpc.get:100|ms", "rpc.get:3000|ms", "rpc.get:3000|ms"]);
    let layout = Layout::new(HistogramMode::Classic, &DEFAULT_BUCKETS);
    let text = |registry: &Registry| text_of(registry, &layout, false);
    registry.apply(&flushes[0]);
    registry.apply(&flushes[1]);
    let two = text(&registry);
    assert!(two.contains("# TYPE rpc_seconds summary\n"), "{two}");
    let value = |text: &str, q: &str| -> f64 {
        let prefix = format!("rpc_seconds{{method=\"get\",quantile=\"{q}\"}} ");
        text.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or_else(|| panic!("{q} in {text}")).parse().unwrap()
    };
    assert!((0.10..0.11).contains(&value(&two, "0.5")), "{two}");
    assert!((3.0..3.1).contains(&value(&two, "0.99")), "{two}");
    registry.apply(&flushes[2]);
    let three = text(&registry);
    assert!((3.0..3.1).contains(&value(&three, "0.5")), "the 100 ms values aged out: {three}");
    assert!(three.contains("rpc_seconds_count{method=\"get\"} 5\n") && !three.contains("_bucket"), "{three}");
    // Remote write: quantile samples, _sum and _count, no native histogram for a summary.
    let series = decode_all(&registry, HistogramMode::Native);
    assert!(find(&series, &[("__name__", "rpc_seconds"), ("method", "get"), ("quantile", "0.5")]).is_some());
    assert_eq!(find(&series, &[("__name__", "rpc_seconds_count"), ("method", "get")]).unwrap().1, 5.0);
    // Forgotten, it is stale-marked as it was written: quantiles, not buckets.
    let forgotten = registry.expire(1_020 + 100, Some(10));
    let layout = Layout::new(HistogramMode::Classic, &DEFAULT_BUCKETS);
    let flush = Flush { layout: &layout, timestamp_ms: 1_120_000, start_ms: 1_110_000, external_labels: &[] };
    let stale: Vec<Decoded> =
        encode(&registry, &flush, &forgotten).iter().flat_map(|r| decode_request(&r.body)).collect();
    assert!(stale.iter().all(|(.., value, _, _)| value.to_bits() == STALE_NAN));
    assert!(find(&stale, &[("__name__", "rpc_seconds"), ("method", "get"), ("quantile", "0.99")]).is_some());
    assert!(!stale.iter().any(|(labels, ..)| labels[0].1.ends_with("_bucket")), "{stale:?}");
}

/// Issue 32: a histogram whose samples mostly miss the classic buckets (a DogStatsD
/// `histogram()` in milliseconds against the default bounds in seconds) is reported once per
/// family; one inside them is not; without classic buckets nothing is checked.
#[test]
fn histograms_mostly_outside_the_classic_buckets_are_reported_once() {
    let flushes = [
        "api.size:250|h\napi.size:900|h\napi.size:3|h\nlat:250|ms\nlat:900|ms\ntiny:0.0001|h\ntiny:0.0002|h\n",
        "api.size:300|h\nlat:20|ms\ntiny:0.0001|h\n",
    ];
    let mut registry = Registry::new(true, None, None).with_classic_bounds(&DEFAULT_BUCKETS);
    snapshots(&flushes).iter().for_each(|snapshot| registry.apply(snapshot));
    let flagged: Vec<&str> =
        registry.families.iter().filter(|(_, family)| family.outside_buckets).map(|(name, _)| name.as_str()).collect();
    assert_eq!(flagged, ["api_size", "tiny"], "milliseconds timers are exported in seconds: inside");
    assert_eq!(registry.counts.outside_buckets, 2, "each family counted once");
    let unchecked = registry_with(&flushes, Registry::new(true, None, None));
    assert_eq!(unchecked.counts.outside_buckets, 0);
}

fn registry_with(packets: &[&str], mut registry: Registry) -> Registry {
    snapshots(packets).iter().for_each(|snapshot| registry.apply(snapshot));
    registry
}
