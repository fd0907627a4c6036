//! Encoder tests on snapshots from the real aggregator, read back with the protobuf field
//! reader of `sink.rs` (the integration test decodes the same requests with the official
//! OpenTelemetry proto definitions); the answer rules; what each histogram mode keeps.

use std::io::Read as _;

use agg::{AggConfig, Snapshot};
use circllhist::{Bucket, Histogram};

use super::config::{OtlpConfig, OtlpHistograms, Temporality};
use super::encode::{explicit_buckets, Encoder};
use super::sink::{fields, judge, partial_success, Field};
use super::state::Running;
use crate::http_client::Answer;
use crate::sinks::delivery::Verdict;
use crate::sinks::prometheus::native::Native;

/// Flushes of one aggregator, one packet each, 10 s apart from t = 1000 s.
fn snapshots(packets: &[&str]) -> Vec<Snapshot> {
    crate::sinks::test_flushes(packets, 1_000_000, AggConfig::default())
}

fn histogram_of(values: &[f64]) -> Histogram {
    let mut histogram = Histogram::new();
    values.iter().for_each(|&value| {
        histogram.insert(value, 1);
    });
    histogram
}

/// A message's fields with the given number.
fn all(message: &[u8], number: u64) -> Vec<Field<'_>> {
    fields(message).filter(|(n, _)| *n == number).map(|(_, value)| value).collect()
}

fn bytes_of(field: Field<'_>) -> &[u8] {
    match field {
        Field::Bytes(bytes) => bytes,
        other => panic!("expected bytes, got {other:?}"),
    }
}

fn one<'a>(message: &'a [u8], number: u64) -> Field<'a> {
    let found = all(message, number);
    assert_eq!(found.len(), 1, "field {number} once");
    found[0]
}

fn text(message: &[u8], number: u64) -> String {
    String::from_utf8(bytes_of(one(message, number)).to_vec()).unwrap()
}

fn double(field: Field<'_>) -> f64 {
    match field {
        Field::Fixed(bits) => f64::from_bits(bits),
        other => panic!("expected a double, got {other:?}"),
    }
}

fn fixed(field: Field<'_>) -> u64 {
    match field {
        Field::Fixed(value) => value,
        other => panic!("expected fixed64, got {other:?}"),
    }
}

/// A decoded number point: attributes, value, start and time.
type NumberPoint = (Vec<(String, String)>, f64, u64, u64);

/// A decoded metric: name, unit, data field number, and its data message.
struct Metric {
    name: String,
    unit: String,
    data_field: u64,
    data: Vec<u8>,
}

/// The metrics of a request body (gunzipped when `gzip`), and the resource's attributes.
fn decode(body: &[u8], gzip: bool) -> (Vec<(String, String)>, Vec<Metric>) {
    let mut plain = Vec::new();
    match gzip {
        true => {
            flate2::read::GzDecoder::new(body).read_to_end(&mut plain).unwrap();
        }
        false => plain = body.to_vec(),
    }
    let resource_metrics = bytes_of(one(&plain, 1)).to_vec();
    let resource = bytes_of(one(&resource_metrics, 1)).to_vec();
    let attributes = all(&resource, 1).into_iter().map(|kv| attribute(bytes_of(kv))).collect();
    let scope_metrics = bytes_of(one(&resource_metrics, 2)).to_vec();
    assert_eq!(text(bytes_of(one(&scope_metrics, 1)), 1), "histd");
    let metrics = all(&scope_metrics, 2)
        .into_iter()
        .map(|metric| {
            let metric = bytes_of(metric);
            let data = fields(metric).find(|(n, _)| [5, 7, 9, 10].contains(n)).unwrap();
            Metric {
                name: text(metric, 1),
                unit: all(metric, 3)
                    .first()
                    .map(|u| String::from_utf8(bytes_of(*u).to_vec()).unwrap())
                    .unwrap_or_default(),
                data_field: data.0,
                data: bytes_of(data.1).to_vec(),
            }
        })
        .collect();
    (attributes, metrics)
}

fn attribute(pair: &[u8]) -> (String, String) {
    (text(pair, 1), text(bytes_of(one(pair, 2)), 1))
}

fn config(histograms: OtlpHistograms, temporality: Temporality) -> OtlpConfig {
    OtlpConfig { histograms, temporality, gzip: false, ..OtlpConfig::default() }
}

#[test]
fn every_type_becomes_its_otlp_metric_with_tags_as_attributes() {
    let flush =
        &snapshots(&["hits:3|c\nhits;route=/a:2|c\nheap:7|g\nusers:a|s\nusers:b|s\nlat:100|ms\nlat:200|ms\nsize:5|h"])
            [0];
    let config = OtlpConfig { gzip: true, ..config(OtlpHistograms::Exponential, Temporality::Delta) };
    let requests = Encoder::new(&config).encode(flush, &mut Running::default());
    assert_eq!(requests.len(), 1);
    let (resource, metrics) = decode(&requests[0].body, true);
    assert!(resource.contains(&("service.name".to_string(), "histd".to_string())));
    assert!(resource.iter().any(|(key, _)| key == "host.name"));
    // histd's own counters (`statsd.metrics_received`...) are sent too; the user's are these.
    let metrics: Vec<Metric> = metrics.into_iter().filter(|m| !m.name.starts_with("statsd.")).collect();
    let kinds: Vec<(&str, u64, &str)> =
        metrics.iter().map(|m| (m.name.as_str(), m.data_field, m.unit.as_str())).collect();
    assert_eq!(kinds, vec![("hits", 7, ""), ("heap", 5, ""), ("users", 5, ""), ("lat", 10, "ms"), ("size", 10, "")]);
    // hits: one Sum, delta (1), monotonic, two points: 3 and 2 with route=-a (keyNameSanitize).
    let sum = &metrics[0].data;
    assert_eq!((one(sum, 2), one(sum, 3)), (Field::Varint(1), Field::Varint(1)));
    // With monotonicCounters off the Sum says nothing of monotonicity (false).
    let config = OtlpConfig { monotonic_counters: false, ..config.clone() };
    let (_, plain) = decode(&Encoder::new(&config).encode(flush, &mut Running::default())[0].body, true);
    assert!(all(&plain.iter().find(|m| m.name == "hits").unwrap().data, 3).is_empty());
    let points: Vec<NumberPoint> = all(sum, 1)
        .into_iter()
        .map(|point| {
            let point = bytes_of(point);
            let attributes = all(point, 7).into_iter().map(|kv| attribute(bytes_of(kv))).collect();
            (attributes, double(one(point, 4)), fixed(one(point, 2)), fixed(one(point, 3)))
        })
        .collect();
    let (start, time) = (1_000_000_000_000 - 10_000_000_000, 1_000_000_000_000);
    assert_eq!(
        points,
        vec![(vec![], 3.0, start, time), (vec![("route".to_string(), "-a".to_string())], 2.0, start, time)]
    );
    assert_eq!(requests[0].points, 6 + 3);
    // users: a gauge of its 2 members.
    assert_eq!(double(one(bytes_of(one(&metrics[2].data, 1)), 4)), 2.0);
    // lat: count 2, sum 300, min 100, max 200, scale 5, buckets from offset with 2 samples.
    let point = bytes_of(one(&metrics[3].data, 1)).to_vec();
    assert_eq!(one(&metrics[3].data, 2), Field::Varint(1));
    assert_eq!((fixed(one(&point, 4)), double(one(&point, 5))), (2, 300.0));
    assert_eq!((double(one(&point, 12)), double(one(&point, 13))), (100.0, 200.0));
    assert_eq!(one(&point, 6), Field::Varint(10), "scale 5, zigzag");
    let positive = bytes_of(one(&point, 8));
    let Field::Bytes(packed) = one(positive, 2) else { panic!("packed counts") };
    let total: u64 = packed.iter().map(|&b| u64::from(b)).sum();
    assert_eq!(total, 2, "single-byte varints in this case");
}

#[test]
fn explicit_buckets_keep_every_bin_whole() {
    let cases: &[&[f64]] = &[
        &[],
        &[0.0],
        &[1.0, 1.05, 1.1, 1.19, 2.0],
        &[-2.5, -1.0, 0.0, 0.0, 3.0, 99.9, 100.0, 1e-5],
        &[9.9, 10.0, 0.99, 1.0],
    ];
    for values in cases {
        let histogram = histogram_of(values);
        let (bounds, counts) = explicit_buckets(&histogram);
        assert_eq!(counts.len(), bounds.len() + 1, "{values:?}");
        assert!(bounds.windows(2).all(|pair| pair[0] < pair[1]), "strictly increasing: {bounds:?}");
        assert_eq!(*counts.last().unwrap(), 0, "nothing above the last bound");
        // Each bucket (low, high] with a count is one whole bin: rebuilt from the bucket's
        // middle it is the same histogram.
        let mut rebuilt = Histogram::new();
        for (index, &count) in counts.iter().enumerate().filter(|(_, &c)| c > 0) {
            let high = bounds[index];
            // The bucket whose upper bound is 0 holds exact zeros alone.
            let low = if index == 0 || high == 0.0 { high } else { bounds[index - 1] };
            rebuilt.insert_bucket(Bucket::of_f64((low + high) / 2.0), count);
        }
        assert_eq!(rebuilt, histogram, "{values:?}");
    }
    // Neighbouring bins share their bound to the bit: [9.9, 10) and [10, 11).
    let (bounds, _) = explicit_buckets(&histogram_of(&[9.95, 10.5]));
    assert_eq!(bounds, vec![9.9, 10.0, 11.0]);
}

#[test]
fn cumulative_points_run_from_the_series_start_and_restart_after_a_gap() {
    let flushes = snapshots(&["n:1|c\nt:10|ms", "n:2|c\nt:20|ms", "other:1|c"]);
    let config = OtlpConfig {
        temporality: Temporality::Cumulative,
        ..config(OtlpHistograms::Explicit, Temporality::Cumulative)
    };
    let encoder = Encoder::new(&config);
    let mut running = Running::default();
    let values = |snapshot: &Snapshot, running: &mut Running| {
        let (_, metrics) = decode(&encoder.encode(snapshot, running)[0].body, false);
        metrics
    };
    values(&flushes[0], &mut running);
    let metrics = values(&flushes[1], &mut running);
    let counter = metrics.iter().find(|m| m.name == "n").unwrap();
    assert_eq!(one(&counter.data, 2), Field::Varint(2), "cumulative");
    let point = bytes_of(one(&counter.data, 1)).to_vec();
    assert_eq!(double(one(&point, 4)), 3.0);
    assert_eq!(fixed(one(&point, 2)), 990_000_000_000, "the start of its first interval");
    let timer = metrics.iter().find(|m| m.name == "t").unwrap();
    let point = bytes_of(one(&timer.data, 1)).to_vec();
    assert_eq!((fixed(one(&point, 4)), double(one(&point, 5))), (2, 30.0));
    assert_eq!((double(one(&point, 11)), double(one(&point, 12))), (10.0, 20.0));
    // Etsy sends idle counters as 0 (the series goes on); a deleted one would start over.
    let metrics = values(&flushes[2], &mut running);
    let counter = metrics.iter().find(|m| m.name == "n").unwrap();
    assert_eq!(double(one(bytes_of(one(&counter.data, 1)), 4)), 3.0);
}

#[test]
fn a_large_flush_is_split_into_requests_of_whole_metrics() {
    let packet: String = (0..500).map(|i| format!("name.{i}:1|c\n")).collect();
    let flush = &snapshots(&[&packet])[0];
    let mut config = config(OtlpHistograms::Explicit, Temporality::Delta);
    config.http.max_request_bytes = Some(4096);
    let requests = Encoder::new(&config).encode(flush, &mut Running::default());
    assert!(requests.len() > 5, "{} requests", requests.len());
    let mut names = Vec::new();
    for request in &requests {
        assert!(request.body.len() <= 4096 + 200, "{}", request.body.len());
        let (_, metrics) = decode(&request.body, false);
        assert_eq!(request.points, metrics.len() as u64);
        names.extend(metrics.into_iter().map(|m| m.name));
    }
    names.retain(|name| !name.starts_with("statsd."));
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 500);
}

#[test]
fn answers_are_read_as_otlp_http_says() {
    let answer = |status: u16, body: &[u8], retry_after: Option<u64>| Answer {
        status,
        body: bytes::Bytes::copy_from_slice(body),
        retry_after: retry_after.map(std::time::Duration::from_secs),
    };
    // ExportMetricsServiceResponse { partial_success { rejected_data_points: 3, error_message: "bad" } }
    let partial = [0x0a, 0x07, 0x08, 0x03, 0x12, 0x03, b'b', b'a', b'd'];
    assert_eq!(partial_success(&partial), Some((3, "bad".to_string())));
    assert_eq!(partial_success(&[]), None);
    assert_eq!(partial_success(&[0x0a, 0x05, 0x08]), None, "truncated");
    let cases: Vec<(Answer, Verdict)> = vec![
        (answer(200, &[], None), Verdict::DELIVERED),
        (answer(200, &partial, None), Verdict::Delivered { rejected: 3, reason: Some("bad".into()) }),
        (
            answer(429, b"slow down", Some(7)),
            Verdict::Retry { reason: "HTTP 429: slow down".into(), after: Some(std::time::Duration::from_secs(7)) },
        ),
        (answer(503, b"", None), Verdict::Retry { reason: "HTTP 503: ".into(), after: None }),
        (answer(500, b"boom", None), Verdict::Rejected("HTTP 500: boom".into())),
        (answer(400, b"bad data", None), Verdict::Rejected("HTTP 400: bad data".into())),
    ];
    for (answer, verdict) in cases {
        assert_eq!(judge(&answer), verdict, "{}", answer.status);
    }
}

/// The quantile `q` of an OTLP exponential histogram's buckets (Prometheus' layout, index + 1),
/// interpolated linearly within the bucket where the rank falls.
fn exponential_quantile(native: &Native, q: f64) -> f64 {
    let total: u64 = native.positive.values().sum::<u64>() + native.zero_count;
    let rank = q * total as f64;
    let mut seen = native.zero_count as f64;
    if rank <= seen {
        return 0.0;
    }
    for (&index, &count) in &native.positive {
        if seen + count as f64 >= rank {
            let (low, high) = (Native::upper_edge(native.schema, index - 1), Native::upper_edge(native.schema, index));
            return low + (high - low) * (rank - seen) / count as f64;
        }
        seen += count as f64;
    }
    f64::NAN
}

/// The relative error of exponential-mode quantiles against the exact quantiles of the raw
/// values, beside circllhist's own, on a log-normal latency load (docs/outputs.md quotes this table:
/// `cargo test -p histd otlp::tests::exponential_error -- --nocapture`).
#[test]
fn exponential_error_by_scale() {
    // A log-normal load: exp(N(ln 50 ms, 0.8)) from a fixed-seed generator, 100k samples.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut uniform = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut values: Vec<f64> = (0..100_000)
        .map(|_| {
            let normal = (-2.0 * uniform().max(1e-300).ln()).sqrt() * (std::f64::consts::TAU * uniform()).cos();
            (50.0f64.ln() + 0.8 * normal).exp()
        })
        .collect();
    values.sort_by(f64::total_cmp);
    let histogram = histogram_of(&values);
    let exact = |q: f64| values[((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
    let quantiles = [0.5, 0.9, 0.99, 0.999];
    let error = |estimate: f64, q: f64| (estimate / exact(q) - 1.0).abs() * 100.0;
    println!("| histogram | q=0.5 | q=0.9 | q=0.99 | q=0.999 |\n|---|---|---|---|---|");
    let row = |name: String, errors: Vec<f64>| {
        let cells: Vec<String> = errors.iter().map(|e| format!("{e:.2}%")).collect();
        println!("| {name} | {} |", cells.join(" | "));
    };
    let own: Vec<f64> = quantiles.iter().map(|&q| error(histogram.quantile(q), q)).collect();
    row("circllhist (histd's own)".to_string(), own.clone());
    for scale in [0, 2, 3, 4, 5, 6, 8] {
        let mut native = Native::new(scale);
        native.add(&histogram);
        let errors: Vec<f64> = quantiles.iter().map(|&q| error(exponential_quantile(&native, q), q)).collect();
        row(format!("exponential, scale {scale}"), errors.clone());
        if scale >= 5 {
            // From scale 5 on, the re-binned quantiles are within one bucket of circllhist's
            // own error (a bucket is 2.2% wide at scale 5).
            let bucket = ((-f64::from(scale)).exp2().exp2() - 1.0) * 100.0;
            for (index, e) in errors.iter().enumerate() {
                assert!(*e <= own[index] + bucket, "scale {scale} q={}: {e}% vs {}%", quantiles[index], own[index]);
            }
        }
    }
}
