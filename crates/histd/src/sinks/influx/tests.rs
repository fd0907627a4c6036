//! The encoder on snapshots of the real aggregator: lines read back with a line-protocol
//! reader of the tests' own (escapes undone), tags sorted and escaped, non-finite values left
//! out, large flushes split at line ends. (The integration test reads them back through a
//! real InfluxDB.)
use agg::{AggConfig, Snapshot, Threshold};

use super::encode::{encode, write_line, Layout};
use super::partial_write;
use crate::sinks::delivery::Request;

fn layout(max_request_bytes: usize) -> Layout {
    Layout { separator: "_".into(), tags: vec![("host".into(), "web 1".into())], max_request_bytes }
}

fn flush(lines: &str) -> Snapshot {
    let thresholds = [90.0, 99.9, -10.0].map(Threshold::new);
    let config = AggConfig { thresholds: thresholds.into(), ..AggConfig::default() };
    crate::sinks::test_flushes(&[lines], 1_700_000_000_000, config).remove(0)
}

fn text(requests: &[Request]) -> String {
    requests.iter().map(|request| String::from_utf8(request.body.to_vec()).unwrap()).collect()
}

#[test]
fn each_kind_is_a_point_in_telegrafs_schema() {
    let snapshot = flush(
        "api.hits:3|c|#route:login\napi.latency:1|ms\napi.latency:2|ms\napi.latency:3|ms\napi.latency:4|ms\n\
         temp:21.5|g\nvisitors:x|s\nvisitors:y|s\n",
    );
    let out = text(&encode(&snapshot, &layout(1 << 20)));
    let cases = [
        "api_hits,host=web\\ 1,metric_type=counter,route=login value=3 1700000000\n",
        "visitors,host=web\\ 1,metric_type=set value=2 1700000000\n",
        "temp,host=web\\ 1,metric_type=gauge value=21.5 1700000000\n",
    ];
    for want in cases {
        assert!(out.contains(want), "{want:?} in\n{out}");
    }
    let timer = out.lines().find(|line| line.starts_with("api_latency,")).unwrap();
    let cases = [
        "api_latency,host=web\\ 1,metric_type=timing ",
        "count=4,",
        "lower=1,",
        "upper=4,",
        "mean=2.5,",
        "sum=10,",
        "90_percentile=4,",
        "99.9_percentile=4,",
        "mean_90=",
        " 1700000000",
    ];
    for want in cases {
        assert!(timer.contains(want), "{want:?} in {timer}");
    }
    assert!(timer.contains(",stddev="), "{timer}");
}

#[test]
fn names_and_tags_are_escaped_and_non_finite_values_left_out() {
    let cases = [
        ("a.b;k=v w", 1.0, Some("a_b,k=v\\ w,metric_type=gauge value=1 7\n")),
        ("x,y z;a=b=c", 2.0, Some("x\\,y\\ z,a=b\\=c,metric_type=gauge value=2 7\n")),
        ("n;metric_type=mine", 3.0, Some("n,metric_type=gauge value=3 7\n")),
        ("b\\s;path=c:\\d\\", 4.0, Some("b\\s,metric_type=gauge,path=c:\\d/ value=4 7\n")),
        ("t;k=a\\ b\\=c", 5.0, Some("t,k=a/\\ b/\\=c,metric_type=gauge value=5 7\n")),
        ("nan", f64::NAN, None),
    ];
    let layout = Layout { tags: Vec::new(), ..layout(1 << 20) };
    for (key, value, want) in cases {
        let mut out = String::new();
        let kept = write_line(&mut out, &layout, key, "gauge", &[("value", value)], 7);
        assert_eq!(kept.then_some(out.as_str()), want, "{key}");
    }
}

#[test]
fn large_flushes_are_split_at_line_ends() {
    let lines: String = (0..200).map(|n| format!("c{n}:1|c\n")).collect();
    let requests = encode(&flush(&lines), &layout(1000));
    assert!(requests.len() > 5, "{}", requests.len());
    for request in &requests {
        assert!(request.body.len() <= 1000 && request.body.ends_with(b"\n"));
    }
    let points: u64 = requests.iter().map(|request| request.points).sum();
    assert_eq!(points as usize, text(&requests).lines().count());
}

/// One line read back: measurement, tags, fields, time (escapes undone; a test's names
/// hold no unescaped `=` in the measurement).
type Point = (String, Vec<(String, String)>, Vec<(String, f64)>, u64);

fn read_line(line: &str) -> Point {
    let mut pieces: Vec<(String, char)> = Vec::new();
    let (mut piece, mut chars) = (String::new(), line.chars());
    while let Some(c) = chars.next() {
        match c {
            // As InfluxDB reads it: a backslash escapes `,`, `=` and ` `, else it is itself.
            '\\' if chars.clone().next().is_some_and(|next| matches!(next, ',' | '=' | ' ')) => {
                piece.push(chars.next().unwrap())
            }
            ',' | '=' | ' ' => pieces.push((std::mem::take(&mut piece), c)),
            _ => piece.push(c),
        }
    }
    pieces.push((piece, '\n'));
    let mut pieces = pieces.into_iter();
    let (measurement, mut after) = pieces.next().unwrap();
    let pair = |pieces: &mut std::vec::IntoIter<(String, char)>| {
        let (key, equals) = pieces.next().unwrap();
        assert_eq!(equals, '=', "{line}");
        let (value, next) = pieces.next().unwrap();
        (key, value, next)
    };
    let mut tags = Vec::new();
    while after == ',' {
        let (key, value, next) = pair(&mut pieces);
        tags.push((key, value));
        after = next;
    }
    assert_eq!(after, ' ', "{line}");
    let mut fields = Vec::new();
    loop {
        let (key, value, next) = pair(&mut pieces);
        fields.push((key, value.parse().unwrap()));
        if next == ' ' {
            break;
        }
    }
    let time = pieces.next().unwrap().0.parse().unwrap();
    (measurement, tags, fields, time)
}

/// Every point of a flush read back from the lines: each counter, gauge, set and timer with
/// its tags (the series' own, `metric_type`, `influx.tags`, sorted, escapes undone) and its
/// values, as the snapshot holds them.
#[test]
fn every_point_reads_back_as_the_snapshot_holds_it() {
    let snapshot =
        flush("api.hits:3|c|#route:login,zone:eu\napi.latency:1|ms\napi.latency:2.5|ms\ntemp:-21.5|g\nvisitors:x|s\n");
    let odd = "web 1,a=b\\c";
    let layout = Layout { tags: vec![("site".into(), odd.into())], ..layout(1 << 20) };
    let points: Vec<Point> = text(&encode(&snapshot, &layout)).lines().map(read_line).collect();
    let find = |measurement: &str| points.iter().find(|point| point.0 == measurement).unwrap().clone();
    let tags = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let hits = find("api_hits");
    let want = tags(&[("metric_type", "counter"), ("route", "login"), ("site", odd), ("zone", "eu")]);
    assert_eq!((hits.1, hits.2, hits.3), (want, vec![("value".into(), 3.0)], 1_700_000_000));
    assert_eq!(find("temp").2, vec![("value".to_string(), -21.5)]);
    assert_eq!(find("visitors").2, vec![("value".to_string(), 1.0)]);
    let timer = &snapshot.timers[0];
    let read = find("api_latency").2;
    assert_eq!(read.len(), timer.stats.len(), "one field a statistic");
    for ((_, value), (_, want)) in read.iter().zip(&timer.stats) {
        assert_eq!(*value, want);
    }
    assert_eq!(points.len(), snapshot.counters.len() + snapshot.gauges.len() + snapshot.sets.len() + 1);
}

#[test]
fn partial_writes_name_the_points_dropped() {
    let cases: [(&str, Option<u64>); 4] = [
        (
            r#"{"error":"partial write: field type conflict: input field \"value\" on measurement \"c\" is type float, already exists as type integer dropped=1"}"#,
            Some(1),
        ),
        (
            r#"{"code":"unprocessable entity","message":"failure writing points to database: partial write: points beyond retention policy dropped=12"}"#,
            Some(12),
        ),
        (r#"{"error":"unable to parse 'x': missing fields"}"#, None),
        ("", None),
    ];
    for (body, want) in cases {
        assert_eq!(partial_write(body.as_bytes()), want, "{body}");
    }
}
