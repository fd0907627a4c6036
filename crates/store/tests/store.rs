//! The store over many flushes, time injected: queries against circllhist computed directly,
//! rollups, retention, tags.

use agg::{AggConfig, Aggregator, Table};
use circllhist::Histogram;
use store::{parse, Options, Resolution, Retention, Selector, Store, PERIOD};

struct Fixture {
    aggregator: Aggregator,
    store: Store,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fixture(name: &str, retention: Retention) -> Fixture {
    fixture_at(name, retention).0
}

/// A fixture and its database file.
fn fixture_at(name: &str, retention: Retention) -> (Fixture, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("histd-store-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("histd.db");
    let store = Store::open(&path, Options { retention, ..Options::default() }).unwrap();
    (Fixture { aggregator: Aggregator::new(AggConfig::default()), store, _dir: TempDir(dir) }, path)
}

impl Fixture {
    /// One 10 s flush at `ts` (unix seconds) of `lines`.
    fn flush(&mut self, ts: i64, lines: &str) {
        let mut table = Table::new(true, 8192);
        table.insert_packet(ts as u64, lines.as_bytes());
        self.aggregator.absorb(table);
        let snapshot = self.aggregator.flush(ts as u64 * 1000);
        self.store.write(ts, store::rows_of(&snapshot)).unwrap();
        self.store.load_series().unwrap();
    }

    /// As [`Fixture::flush`], returning the store's answer.
    fn try_flush(&mut self, ts: i64, lines: &str) -> Result<(), store::StoreError> {
        let mut table = Table::new(true, 8192);
        table.insert_packet(ts as u64, lines.as_bytes());
        self.aggregator.absorb(table);
        let snapshot = self.aggregator.flush(ts as u64 * 1000);
        let written = self.store.write(ts, store::rows_of(&snapshot));
        self.store.load_series().unwrap();
        written
    }

    fn query(&self, expr: &str, from: i64, to: i64, step: i64) -> Vec<(i64, f64)> {
        self.store.query(&parse(expr).unwrap(), from, to, step).unwrap()
    }
}

/// Latency-like values for flush `i`: 3 significant digits, a few decades.
fn latencies(i: i64, count: usize) -> Vec<f64> {
    (0..count).map(|k| ((i as usize * 7919 + k * 104_729) % 9000 + 100) as f64 / 100.0).collect()
}

fn timer_lines(name: &str, values: &[f64]) -> String {
    values.iter().map(|v| format!("{name}:{v}|ms\n")).collect()
}

const START: i64 = 1_700_000_000 - 1_700_000_000 % 3600;

#[test]
fn quantiles_and_counts_match_circllhist_over_the_same_samples() {
    let mut f = fixture("quantiles", Retention::default());
    let mut all = Histogram::new();
    for i in 1..=30 {
        let values = latencies(i, 200);
        for &value in &values {
            all.insert(value, 1);
        }
        f.flush(START + i * 10, &timer_lines("api.latency", &values));
    }
    let (from, to) = (START, START + 400);
    let one = |expr: &str| -> f64 {
        let points = f.query(expr, from, to, 400);
        assert_eq!(points.len(), 1, "{expr}: {points:?}");
        points[0].1
    };
    assert_eq!(one("quantile(api.latency, 0.99)"), all.quantile(0.99));
    assert_eq!(one("quantile(api.latency, 0.5)"), all.quantile(0.5));
    assert_eq!(one("inverse_quantile(api.latency, 45)"), all.inverse_quantiles(&[45.0]).unwrap()[0]);
    assert_eq!(one("count(api.latency)"), 6000.0);
    // A two-digit threshold falls on a bin edge: the count is exact.
    let exact_above = (1..=30).flat_map(|i| latencies(i, 200)).filter(|&v| v >= 45.0).count() as f64;
    assert_eq!(one("count_above(api.latency, 45)"), exact_above);
    let exact_below = (1..=30).flat_map(|i| latencies(i, 200)).filter(|&v| v < 4.5).count() as f64;
    assert_eq!(one("count_below(api.latency, 4.5)"), exact_below);
    let sum: f64 = (1..=30).flat_map(|i| latencies(i, 200)).sum();
    assert!((one("mean(api.latency)") - sum / 6000.0).abs() < 1e-9);
    let cumulative = f.query("cumulative(count(api.latency))", from, to, 100);
    assert_eq!(cumulative.last().unwrap().1, 6000.0);
    assert!(cumulative.windows(2).all(|w| w[0].1 <= w[1].1));
}

#[test]
fn rollups_of_rollups_equal_rollups_of_raw_data() {
    let mut f = fixture("rollups", Retention::default());
    let mut expected = Histogram::new();
    let mut count = 0.0;
    // Two hours and a bit of 10 s flushes: integer values, so sums are exact too.
    for i in 1..=760 {
        let values: Vec<f64> = latencies(i, 5).iter().map(|v| v.round()).collect();
        let hour_one = START + i * 10 < START + 3600;
        if hour_one {
            for &value in &values {
                expected.insert_int_scale(value as i64, 0, 1);
            }
            count += values.len() as f64;
        }
        f.flush(START + i * 10, &(timer_lines("t", &values) + "hits:3|c\n"));
    }
    let selector = Selector { name: "t".into(), tags: vec![] };
    let series = f.store.select(&selector)[0].id;
    let hour_rows = f.store.rows(series, Resolution::Hour, START, START + 3600).unwrap();
    assert_eq!(hour_rows.len(), 1, "the first hour is rolled up");
    let hour = &hour_rows[0];
    assert_eq!(hour.hist.as_ref().unwrap(), &expected, "hour histogram = merge of every raw histogram");
    assert_eq!(hour.count, count);
    let minutes = f.store.rows(series, Resolution::Minute, START, START + 3600).unwrap();
    assert_eq!(minutes.len(), 60);
    let mut from_minutes = minutes[0].clone();
    minutes[1..].iter().for_each(|m| from_minutes.merge(m, store::Kind::Timer));
    let raw = f.store.rows(series, Resolution::Raw, START, START + 3600).unwrap();
    let mut from_raw = raw[0].clone();
    raw[1..].iter().for_each(|r| from_raw.merge(r, store::Kind::Timer));
    for rolled in [&from_minutes, &from_raw] {
        assert_eq!(rolled.hist, hour.hist);
        assert_eq!(
            (rolled.count, rolled.sum, rolled.min, rolled.max, rolled.value),
            (hour.count, hour.sum, hour.min, hour.max, hour.value)
        );
    }
    // Hour steps read hour rows; the same question over raw steps gives the same answer.
    let by_hour = f.query("quantile(t, 0.9)", START, START + 3600, 3600);
    let by_raw_merge = expected.quantile(0.9).clamp(hour.min, hour.max);
    assert_eq!(by_hour, vec![(START, by_raw_merge)]);
    let rate = f.query("rate(hits)", START, START + 3600, 3600);
    assert_eq!(rate, vec![(START, 0.3)]);
}

#[test]
fn retention_deletes_old_rows_and_nothing_else() {
    let retention = Retention { raw: 600, minute: 3600, hour: 86_400 };
    let mut f = fixture("retention", retention);
    for i in 1..=400 {
        f.flush(START + i * 10, "c:1|c\n");
    }
    let now = START + 4000;
    let series = f.store.select(&Selector { name: "c".into(), tags: vec![] })[0].id;
    // Rows go in whole blocks (ten minutes of raw rows, an hour of minutes), once the whole
    // block is older than the retention.
    let raw = f.store.rows(series, Resolution::Raw, 0, i64::MAX).unwrap();
    let first_raw = raw.first().unwrap().ts;
    assert!((now - 600 - PERIOD..=now - 600).contains(&first_raw), "raw rows from {first_raw}, now {now}");
    assert_eq!(raw.len() as i64, (now - first_raw) / 10 + 1, "every flush since then");
    let minutes = f.store.rows(series, Resolution::Minute, 0, i64::MAX).unwrap();
    let first_minute = minutes.first().unwrap().ts;
    assert!((now - 7200..=now - 3600).contains(&first_minute), "minutes from {first_minute}, now {now}");
    // Old ranges are still answered, from the coarser rows.
    let early = f.query("count(c)", START, START + 3600, 3600);
    assert_eq!(early, vec![(START, 359.0)]);
}

#[test]
fn idle_timer_rows_give_no_value_not_a_failure() {
    let mut f = fixture("idle", Retention::default());
    f.flush(START + 10, "t:5|ms\n");
    f.flush(START + 20, ""); // the timer is idle: a row with count 0, no min or max
    let p50 = f.query("quantile(t, 0.5)", START, START + 30, 10);
    assert_eq!(p50.len(), 1, "only the step with samples has a value: {p50:?}");
    assert_eq!(f.query("count(t)", START, START + 30, 10), vec![(START + 10, 1.0), (START + 20, 0.0)]);
}

#[test]
fn series_with_tags_stay_apart_and_merge_on_request() {
    let mut f = fixture("tags", Retention::default());
    f.flush(START + 10, "req:1|ms|#route:/login,env:prod\nreq:100|ms|#env:prod,route:/home\nreq:5|ms\n");
    f.flush(START + 20, "req:2|ms|#env:prod,route:/login\n");
    let keys: Vec<String> =
        f.store.series(Some("req"), usize::MAX).unwrap().0.iter().map(|s| s.key.to_string()).collect();
    assert_eq!(keys, ["req", "req{env=prod,route=-home}", "req{env=prod,route=-login}"]);
    let (first_two, total) = f.store.series(Some("req"), 2).unwrap();
    let first_two: Vec<String> = first_two.iter().map(|s| s.key.to_string()).collect();
    assert_eq!((first_two, total), (vec!["req".to_string(), "req{env=prod,route=-home}".to_string()], 3));
    let count = |expr: &str| f.query(expr, START, START + 100, 100)[0].1;
    assert_eq!(count("count(req{route=/login})"), 2.0, "tags sent in either order are one series");
    assert_eq!(count("count(req{env=prod})"), 3.0);
    assert_eq!(count("count(req)"), 4.0, "no tags: every series of the name");
    assert_eq!(count("max(req{route:/home})"), 100.0);
}

/// Issue 18: one counter sent with its tags in two orders was two aggregator keys, which the
/// store merged into one series adding their interval lengths (20 s for a 10 s flush), so
/// `rate()` was halved. Tags are put in one order when the key is built.
#[test]
fn tags_in_any_order_are_one_series() {
    let mut f = fixture("tag-order", Retention::default());
    f.flush(
        START + 10,
        "tagc:10|c|#a:1,b:2\ntagc:10|c|#b:2,a:1\nlat:5|ms|#b:2,a:1\nlat:7|ms|#a:1,b:2\nlat:9|ms|#c,b:2,a:1\n",
    );
    let keys: Vec<String> = f.store.series(None, usize::MAX).unwrap().0.iter().map(|s| s.key.to_string()).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).filter(|k| !k.starts_with("statsd.")).collect();
    assert_eq!(keys, ["lat{a=1,b=2}", "lat{a=1,b=2,c}", "tagc{a=1,b=2}"]);
    let at = |expr: &str| f.query(expr, START, START + 20, 10)[0].1;
    assert_eq!(at("rate(tagc)"), 2.0, "20 increments over one 10 s flush");
    assert_eq!(at("rate(tagc{b=2,a=1})"), 2.0);
    assert_eq!(at("count(tagc{a:1})"), 20.0);
    assert_eq!(at("count(lat{b=2})"), 3.0);
    assert_eq!(at("max(lat{a=1,b=2})"), 9.0);
}

/// Issue 18: a function that does not read the picked series' type says so instead of
/// answering no points (which reads as "no data").
#[test]
fn a_function_of_the_wrong_type_says_so() {
    let mut f = fixture("types", Retention::default());
    f.flush(START + 10, "hits:1|c\nlat:5|ms\ntemp:20|g\nusers:a|s\nboth:1|c\nboth:2|ms\n");
    let check = |expr: &str| f.store.check_types(&parse(expr).unwrap()).map_err(|e| e.to_string());
    let cases: &[(&str, Option<&str>)] = &[
        ("quantile(hits, 0.9)", Some("quantile() reads timers; 'hits' is a counter: try count, sum, rate")),
        ("value(lat)", Some("value() reads gauges; 'lat' is a timer: try quantile, inverse_quantile")),
        ("cumulative(cardinality(temp))", Some("cardinality() reads sets; 'temp' is a gauge: try min, max, value")),
        ("rate(users{k=v})", None), // no such series: an empty answer, not a type error
        ("rate(hits)", None),
        ("quantile(lat, 0.5)", None),
        ("count(lat)", None),
        ("quantile(both, 0.5)", None), // a counter and a timer: the timer answers
        ("value(both)", Some("value() reads gauges; 'both' is a counter and a timer")),
    ];
    for (expr, want) in cases {
        match (check(expr), want) {
            (Ok(()), None) => {}
            (Err(error), Some(want)) => assert!(error.contains(want), "{expr}: {error}"),
            (got, want) => panic!("{expr}: got {got:?}, wanted {want:?}"),
        }
    }
}

/// Issue 19 B1: a write that failed inside its transaction left the series it had created in
/// the id map; SQLite gave a rolled-back id to the next new series, and the stale entry wrote
/// another series' rows under it (a counter that received nothing showed 5).
#[test]
fn a_failed_write_never_mixes_series() {
    let (mut f, path) = fixture_at("failed-write", Retention::default());
    let injector = rusqlite::Connection::open(&path).unwrap();
    injector
        .execute_batch(
            "CREATE TRIGGER fail_boom BEFORE INSERT ON blocks \
             WHEN (SELECT count(*) FROM series WHERE name = 'boom') > 0 BEGIN SELECT RAISE(ABORT, 'injected'); END;",
        )
        .unwrap();
    assert!(f.try_flush(START + 10, "a:3|c\nboom:1|c\n").is_err(), "the injected failure");
    injector.execute_batch("DROP TRIGGER fail_boom;").unwrap();
    f.flush(START + 20, "b:1|c\n");
    f.flush(START + 30, "a:5|c\n");
    let total =
        |name: &str| f.query(&format!("count({name})"), START, START + 100, 100).iter().map(|p| p.1).sum::<f64>();
    assert_eq!((total("a"), total("b")), (5.0, 1.0), "the rolled-back flush is lost, nothing is mixed");
}
