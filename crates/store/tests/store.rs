//! The store over many flushes, time injected: queries against circllhist computed directly,
//! rollups, retention, tags.

use agg::{AggConfig, Aggregator, Table};
use circllhist::Histogram;
use store::{parse, Options, Resolution, Retention, Selector, Store, PERIOD};

struct Fixture {
    aggregator: Aggregator,
    store: Store,
    /// The directory removed with the fixture (none: the caller's).
    _dir: Option<TempDir>,
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
    let (dir, cleanup) = temp_dir(name);
    let path = dir.join("histd.db");
    let store = Store::open(&path, Options { retention, ..Options::default() }).unwrap();
    (Fixture { aggregator: Aggregator::new(AggConfig::default()), store, _dir: Some(cleanup) }, path)
}

/// A fixture writing the store at `path`, in a directory the caller keeps.
fn fixture_in(path: &std::path::Path) -> Fixture {
    let store = Store::open(path, Options::default()).unwrap();
    Fixture { aggregator: Aggregator::new(AggConfig::default()), store, _dir: None }
}

/// A new empty directory, removed when the guard drops.
fn temp_dir(name: &str) -> (std::path::PathBuf, TempDir) {
    let dir = std::env::temp_dir().join(format!("histd-store-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    (dir.clone(), TempDir(dir))
}

impl Fixture {
    /// One 10 s flush at `ts` (unix seconds) of `lines`.
    fn flush(&mut self, ts: i64, lines: &str) {
        let mut table = Table::new(true, 8192);
        table.insert_packet(ts as u64, lines.as_bytes());
        self.aggregator.absorb(table);
        let snapshot = self.aggregator.flush(ts as u64 * 1000);
        self.store.write(ts, &snapshot).unwrap();
        self.store.load_series().unwrap();
    }

    /// As [`Fixture::flush`], returning the store's answer.
    fn try_flush(&mut self, ts: i64, lines: &str) -> Result<(), store::StoreError> {
        let mut table = Table::new(true, 8192);
        table.insert_packet(ts as u64, lines.as_bytes());
        self.aggregator.absorb(table);
        let snapshot = self.aggregator.flush(ts as u64 * 1000);
        let written = self.store.write(ts, &snapshot);
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
    assert_eq!(hour.histogram.as_ref().unwrap(), &expected, "hour histogram = merge of every raw histogram");
    assert_eq!(hour.count, count);
    let minutes = f.store.rows(series, Resolution::Minute, START, START + 3600).unwrap();
    assert_eq!(minutes.len(), 60);
    let mut from_minutes = minutes[0].clone();
    minutes[1..].iter().for_each(|m| from_minutes.merge(m, store::Kind::Timer));
    let raw = f.store.rows(series, Resolution::Raw, START, START + 3600).unwrap();
    let mut from_raw = raw[0].clone();
    raw[1..].iter().for_each(|r| from_raw.merge(r, store::Kind::Timer));
    for rolled in [&from_minutes, &from_raw] {
        assert_eq!(rolled.histogram, hour.histogram);
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

/// A store of the first format (one SQLite row per series and interval), as the previous
/// version wrote it: opening it migrates every row into blocks, exactly.
#[test]
fn a_store_of_the_first_format_is_migrated_exactly() {
    let (dir, _cleanup) = temp_dir("migrate");
    let path = dir.join("histd.db");
    let old = rusqlite::Connection::open(&path).unwrap();
    old.execute_batch(FORMAT_1_SCHEMA).unwrap();
    old.execute_batch(
        "INSERT INTO series (id, name, tags, kind) VALUES (1, 'hits', '', 'counter'), (2, 'lat', 'env=prod', 'timer'), \
         (3, 'temp', '', 'gauge');",
    )
    .unwrap();
    // Three hours of 10 s flushes; the first two rolled up into minutes and hours, the third
    // (after the hour watermark) only raw, with minute rows the old store had made of it.
    let mut expected = Histogram::new();
    let (mut hits, mut samples) = (0.0, 0.0);
    for i in 1..=1080 {
        let ts = START + i * 10;
        old.execute("INSERT INTO points_raw (series, ts, seconds, count) VALUES (1, ?1, 10, 2)", [ts]).unwrap();
        hits += 2.0;
        if ts < START + 7200 {
            continue; // the timer starts in the third hour: the old rollups below are the counter's
        }
        let mut hist = Histogram::new();
        hist.insert((i % 50) as f64, 3);
        expected.merge(&hist);
        old.execute(
            "INSERT INTO points_raw (series, ts, seconds, count, sum, min, max, value, hist) \
             VALUES (2, ?1, 10, 3, ?2, ?3, ?3, 3, ?4)",
            rusqlite::params![ts, 3.0 * (i % 50) as f64, (i % 50) as f64, hist.to_bytes()],
        )
        .unwrap();
        old.execute(
            "INSERT INTO points_raw (series, ts, seconds, value, min, max) VALUES (3, ?1, 10, ?2, ?2, ?2)",
            rusqlite::params![ts, i as f64 / 4.0],
        )
        .unwrap();
        samples += 3.0;
    }
    // The old store's rollups: minutes and hours of the first two hours (sums of the raw rows).
    old.execute_batch(&format!(
        "INSERT INTO points_1m (series, ts, seconds, count) \
           SELECT 1, ts - ts % 60, sum(seconds), sum(count) FROM points_raw WHERE series = 1 AND ts < {two_hours} + 600 GROUP BY ts - ts % 60;
         INSERT INTO points_1h (series, ts, seconds, count) \
           SELECT 1, ts - ts % 3600, sum(seconds), sum(count) FROM points_raw WHERE series = 1 AND ts < {two_hours} GROUP BY ts - ts % 3600;
         INSERT INTO meta (key, value) VALUES ('rolled_points_1m', {minutes}), ('rolled_points_1h', {two_hours});",
        two_hours = START + 7200,
        minutes = START + 7200 + 600,
    ))
    .unwrap();
    drop(old);
    let mut store = Store::open(&path, Options::default()).unwrap();
    assert!(!dir.join("histd.db.format-1").exists(), "the copy kept during the migration is gone once it verified");
    store.load_series().unwrap();
    let (from, to) = (START, START + 4 * 3600);
    let total = |expr: &str, step: i64| -> f64 {
        store.query(&parse(expr).unwrap(), from, to, step).unwrap().iter().map(|p| p.1).sum()
    };
    for step in [10, 60, 3600, 4 * 3600] {
        assert_eq!(total("count(hits)", step), hits, "counter at step {step}");
        assert_eq!(total("count(lat)", step), samples, "timer at step {step}");
    }
    let merged = store.merged(&Selector { name: "lat".into(), tags: vec![] }, from, to).unwrap().unwrap();
    assert_eq!(merged.histogram.unwrap(), expected, "every histogram, merged exactly");
    let last = store.query(&parse("value(temp)").unwrap(), from, to, 3600).unwrap();
    assert_eq!(last.last(), Some(&(START + 10_800, 1080.0 / 4.0)), "the last flush, alone in its hour");
    let connection = rusqlite::Connection::open(&path).unwrap();
    let tables: Vec<String> = connection
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'points%'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(tables.is_empty(), "the old tables are gone: {tables:?}");
    let check: String = connection.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    // The migrated store takes new flushes, and compacts the migrated head with them.
    drop(connection);
    let mut f = Fixture { aggregator: agg::Aggregator::new(agg::AggConfig::default()), store, _dir: None };
    f.flush(START + 4 * 3600 + 10, "hits:5|c\n");
    assert_eq!(f.query("count(hits)", from, to + 3600, 3600).iter().map(|p| p.1).sum::<f64>(), hits + 5.0);
}

/// The schema of the first format, as that version created it.
const FORMAT_1_SCHEMA: &str = "
CREATE TABLE series (id INTEGER PRIMARY KEY, name TEXT NOT NULL, tags TEXT NOT NULL, kind TEXT NOT NULL, UNIQUE (name, tags, kind));
CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE points_raw (series INTEGER NOT NULL, ts INTEGER NOT NULL, seconds REAL NOT NULL, count REAL, sum REAL,
    sum_squares REAL, min REAL, max REAL, value REAL, hist BLOB, PRIMARY KEY (series, ts)) WITHOUT ROWID;
CREATE INDEX points_raw_ts ON points_raw (ts);
CREATE TABLE points_1m (series INTEGER NOT NULL, ts INTEGER NOT NULL, seconds REAL NOT NULL, count REAL, sum REAL,
    sum_squares REAL, min REAL, max REAL, value REAL, hist BLOB, PRIMARY KEY (series, ts)) WITHOUT ROWID;
CREATE INDEX points_1m_ts ON points_1m (ts);
CREATE TABLE points_1h (series INTEGER NOT NULL, ts INTEGER NOT NULL, seconds REAL NOT NULL, count REAL, sum REAL,
    sum_squares REAL, min REAL, max REAL, value REAL, hist BLOB, PRIMARY KEY (series, ts)) WITHOUT ROWID;
CREATE INDEX points_1h_ts ON points_1h (ts);
";

/// Past `store.maxBytes` the oldest blocks go first, counted; recent data stays.
#[test]
fn the_disk_budget_drops_the_oldest_data_first() {
    let (dir, _cleanup) = temp_dir("budget");
    let budget = 3 << 20;
    let options = Options { max_bytes: budget, ..Options::default() };
    let mut f = Fixture {
        aggregator: agg::Aggregator::new(agg::AggConfig::default()),
        store: Store::open(&dir.join("histd.db"), options).unwrap(),
        _dir: None,
    };
    // Noisy timers fill blocks fast: 12 hours of 10 s flushes of 20 timers.
    for i in 1..=4320 {
        let lines: String = (0..20).map(|t| timer_lines(&format!("t{t}"), &latencies(i * 20 + t, 8))).collect();
        f.flush(START + i * 10, &lines);
    }
    let usage = f.store.usage().clone();
    assert!(usage.budget_dropped_points > 0 && usage.budget_dropped_blocks > 0, "{usage:?}");
    assert!(usage.bytes() <= budget + (1 << 20), "{} bytes on disk for a budget of {budget}", usage.bytes());
    let end = START + 43_200;
    let count = |from: i64| f.query("count(t0)", from, from + 3600, 3600).iter().map(|p| p.1).sum::<f64>();
    assert_eq!(count(START), 0.0, "the first hour is gone");
    assert_eq!(count(end - 3600), 360.0 * 8.0, "the last hour is whole");
}

/// A flush stamped inside a period already compacted (a clock set back) is stored, and
/// rolled up with the next compaction.
#[test]
fn late_rows_are_compacted_into_their_period() {
    let mut f = fixture("late", Retention::default());
    for i in 1..=130 {
        f.flush(START + i * 10, "c:1|c\n");
    }
    f.flush(START + 15, "c:100|c\n"); // late: the first period was compacted long ago
    for i in 131..=200 {
        f.flush(START + i * 10, "c:1|c\n");
    }
    for step in [10, 60, 3600] {
        let total: f64 = f.query("count(c)", START, START + 3600, step).iter().map(|p| p.1).sum();
        assert_eq!(total, 300.0, "step {step}");
    }
}

/// Issue 18: forgetting series deletes their rows at every resolution (head, raw, minute,
/// hour) and nothing of the others; a reader opened before sees them go; their ids are never
/// given to another series; a series sent again starts afresh.
#[test]
fn forgotten_series_are_gone_at_every_resolution_and_nothing_else_is() {
    let (mut f, path) = fixture_at("forget", Retention::default());
    let lines = "a:1|c\nb:5|ms\nb:7|ms\nc:2|c|#x:1\nc:3|c|#x:2\n";
    for i in 1..=760 {
        f.flush(START + i * 10, lines); // two hours and a bit: every resolution and a head
    }
    let mut reader = Store::open_reader(&path).unwrap();
    let end = START + 7700;
    let totals = |store: &Store, expr: &str| -> Vec<f64> {
        [10, 60, 3600]
            .iter()
            .map(|&step| store.query(&parse(expr).unwrap(), START, end, step).unwrap().iter().map(|p| p.1).sum())
            .collect()
    };
    let a_before = totals(&f.store, "count(a)");
    assert_eq!(a_before, [760.0; 3]);
    assert_eq!(totals(&f.store, "count(b)"), [1520.0; 3]);
    let keys = |store: &Store| -> Vec<String> {
        let listed = store.series(None, usize::MAX).unwrap().0;
        listed.iter().map(|s| s.key.to_string()).filter(|k| !k.starts_with("statsd.")).collect()
    };
    assert_eq!(keys(&reader), ["a", "b", "c{x=1}", "c{x=2}"]);
    let doomed: Vec<store::SeriesKey> = f
        .store
        .series(None, usize::MAX)
        .unwrap()
        .0
        .into_iter()
        .map(|s| s.key)
        .filter(|k| k.name == "b" || k.tags == "x=1")
        .collect();
    let points_before = f.store.usage().points;
    let forgotten = f.store.forget(&doomed).unwrap();
    assert_eq!(forgotten.series, 2);
    assert!(forgotten.points > 2 * 760, "raw, minute and hour rows: {forgotten:?}");
    assert_eq!(f.store.usage().points, points_before - forgotten.points);
    assert_eq!(forgotten.corrupt_blocks, 0);
    f.store.load_series().unwrap();
    reader.load_series().unwrap();
    for store in [&f.store, &reader] {
        assert_eq!(keys(store), ["a", "c{x=2}"]);
        assert_eq!(totals(store, "count(b)"), [0.0; 3]);
        assert_eq!(totals(store, "count(c{x=1})"), [0.0; 3]);
        assert_eq!(totals(store, "count(c)"), [2280.0; 3], "only c{{x=2}} is left");
        assert_eq!(totals(store, "count(a)"), a_before, "the other series are untouched");
    }
    // Sent again (the aggregator told to forget it too), a series starts afresh; the newest
    // id, forgotten, is never given to another series (SQLite would reuse a deleted last id).
    f.aggregator.remove(agg::MetricType::Timers, "b");
    f.flush(end - 50, "b:9|ms\nz:1|c\n");
    assert_eq!(totals(&f.store, "count(b)")[0], 1.0);
    let id_of = |store: &Store, name: &str| store.series(Some(name), 1).unwrap().0[0].id;
    let newest = f.store.series(None, usize::MAX).unwrap().0.into_iter().max_by_key(|s| s.id).unwrap();
    assert_eq!(f.store.forget(std::slice::from_ref(&newest.key)).unwrap().series, 1);
    for kind in [agg::MetricType::Timers, agg::MetricType::Counters] {
        f.aggregator.remove(kind, &newest.key.name);
    }
    f.flush(end - 40, "y:1|c\n");
    assert!(id_of(&f.store, "y") > newest.id, "a new series under a new id");
    assert_eq!(totals(&f.store, "count(y)")[0], 1.0);
    assert_eq!(f.store.forget(&[newest.key]).unwrap(), store::Forgotten::default(), "already gone");
}

/// Series whose rows have all passed the longest retention are deleted (a store fed churning
/// names keeps no row per name forever); one sent again after a long silence is kept; ids are
/// never handed out twice.
#[test]
fn series_past_the_longest_retention_are_deleted() {
    let retention = Retention { raw: 600, minute: 3600, hour: 2 * 86_400 };
    let (mut f, path) = fixture_at("expiry", retention);
    f.aggregator = Aggregator::new(AggConfig { delete_counters: true, ..AggConfig::default() });
    for i in 1..=800 {
        f.flush(START + i * 10, "old:1|c\nback:1|c\nlive:1|c\n"); // hour rollups made
    }
    let mut reader = Store::open_reader(&path).unwrap();
    reader.load_series().unwrap();
    let listed = |store: &Store| -> Vec<String> {
        let all = store.series(None, usize::MAX).unwrap().0;
        all.into_iter().map(|s| s.key.to_string()).filter(|k| !k.starts_with("statsd.")).collect()
    };
    assert_eq!(listed(&reader), ["back", "live", "old"]);
    let largest_before = f.store.series(None, usize::MAX).unwrap().0.iter().map(|s| s.id).max().unwrap();
    // Five days later: `back` comes back, `old` never does.
    let later = START + 5 * 86_400;
    f.flush(later, "back:2|c\nlive:1|c\n");
    for i in 1..=70 {
        f.flush(later + i * 10, "live:1|c\n"); // past a period: trimmed
    }
    assert_eq!(f.store.usage().expired_series, 1);
    reader.load_series().unwrap();
    for store in [&f.store, &reader] {
        assert_eq!(listed(store), ["back", "live"]);
        let back = store.query(&parse("count(back)").unwrap(), later - 10, later + 700, 10).unwrap();
        assert_eq!(back.iter().map(|p| p.1).sum::<f64>(), 2.0, "its new rows are kept");
    }
    f.flush(later + 710, "new:1|c\n");
    let new = f.store.series(Some("new"), 1).unwrap().0[0].id;
    assert!(new > largest_before, "a new series under a new id, never a deleted one's");
    let connection = rusqlite::Connection::open(&path).unwrap();
    let rows: i64 = connection.query_row("SELECT count(*) FROM series WHERE name = 'old'", [], |r| r.get(0)).unwrap();
    assert_eq!(rows, 0);
}

/// N10 (issue 36): one damaged block (a flipped bit) is left out of the answers that meet it,
/// named with its group and span; every other row is still served, and writes go on.
#[test]
fn a_damaged_block_is_left_out_and_named_and_the_rest_is_served() {
    let (mut f, path) = fixture_at("damaged-block", Retention::default());
    for i in 1..=3 {
        f.flush(START + 10 * i, "c:1000|c\n");
    }
    assert_eq!(f.query("count(c)", START, START + 40, 40), vec![(START, 3000.0)]);
    let writer = rusqlite::Connection::open(&path).unwrap();
    let (rowid, mut data): (i64, Vec<u8>) = writer
        .query_row("SELECT rowid, data FROM blocks ORDER BY start LIMIT 1", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    let middle = data.len() / 2;
    data[middle] ^= 0x10;
    writer.execute("UPDATE blocks SET data = ?1 WHERE rowid = ?2", rusqlite::params![data, rowid]).unwrap();
    let reader = Store::open_reader(&path).unwrap();
    let answer = reader.query(&parse("count(c)").unwrap(), START, START + 40, 40).unwrap();
    let damaged = reader.take_damaged();
    assert_eq!(damaged.len(), 1, "{damaged:?}");
    assert!(damaged[0].reason.contains("checksum"), "{:?}", damaged[0]);
    let left = answer.first().map_or(0.0, |(_, count)| *count);
    assert!((1000.0..3000.0).contains(&left), "the damaged block's rows left out, the others served: {answer:?}");
    f.flush(START + 40, "c:1000|c\n");
    let more = reader.query(&parse("count(c)").unwrap(), START + 40, START + 50, 10).unwrap();
    assert_eq!(more, vec![(START + 40, 1000.0)], "written after the damage: served");
}

/// Issue 36: a migration that fails is rolled back: the first-format file is as it was (every
/// old row), no copy is left behind, and the next open tries again the same way.
#[test]
fn a_failed_migration_rolls_back_to_the_first_format() {
    let (dir, _cleanup) = temp_dir("migrate-rollback");
    let path = dir.join("histd.db");
    let old = rusqlite::Connection::open(&path).unwrap();
    old.execute_batch(FORMAT_1_SCHEMA).unwrap();
    old.execute_batch(
        "INSERT INTO series (id, name, tags, kind) VALUES (1, 'hits', '', 'counter'), (2, 'lat', '', 'timer');",
    )
    .unwrap();
    for i in 1..=100 {
        old.execute("INSERT INTO points_raw (series, ts, seconds, count) VALUES (1, ?1, 10, 2)", [START + i * 10])
            .unwrap();
    }
    // A timer row whose histogram does not decode: the migration stops there.
    old.execute(
        "INSERT INTO points_raw (series, ts, seconds, count, hist) VALUES (2, ?1, 10, 1, x'ffffffff')",
        [START + 500],
    )
    .unwrap();
    drop(old);
    let rows = || -> i64 {
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection.query_row("SELECT count(*) FROM points_raw", [], |r| r.get(0)).unwrap()
    };
    for attempt in 0..2 {
        let opened = Store::open(&path, Options::default());
        assert!(
            matches!(opened, Err(store::StoreError::CorruptHistogram { .. })),
            "attempt {attempt}: {:?}",
            opened.err()
        );
        assert_eq!(rows(), 101, "attempt {attempt}: every old row is back");
        assert!(!dir.join("histd.db.format-1").exists(), "no copy left behind");
    }
}

/// A first-format store at `path` of two counters, `rows` 10 s flushes each of 2 and 3: what
/// `count(a)` and `count(b)` must answer after the migration.
fn first_format_counters(path: &std::path::Path, rows: i64) -> (f64, f64) {
    let mut old = rusqlite::Connection::open(path).unwrap();
    old.execute_batch(FORMAT_1_SCHEMA).unwrap();
    old.execute_batch(
        "INSERT INTO series (id, name, tags, kind) VALUES (1, 'a', '', 'counter'), (2, 'b', '', 'counter');",
    )
    .unwrap();
    let insert = old.transaction().unwrap();
    for i in 1..=rows {
        let ts = START + i * 10;
        insert.execute("INSERT INTO points_raw (series, ts, seconds, count) VALUES (1, ?1, 10, 2)", [ts]).unwrap();
        insert.execute("INSERT INTO points_raw (series, ts, seconds, count) VALUES (2, ?1, 10, 3)", [ts]).unwrap();
    }
    insert.commit().unwrap();
    (2.0 * rows as f64, 3.0 * rows as f64)
}

/// The child of [`a_migration_killed_at_any_moment_loses_nothing`]: opens (so migrates) the
/// store at `HISTD_MIGRATE_PATH`. Does nothing when run on its own.
#[test]
#[ignore = "run by a_migration_killed_at_any_moment_loses_nothing as its child process"]
fn migrate_in_a_child() {
    if let Some(path) = std::env::var_os("HISTD_MIGRATE_PATH") {
        Store::open(std::path::Path::new(&path), Options::default()).unwrap();
    }
}

/// Issue 36: a migration SIGKILLed at a range of moments (a child process opening a
/// first-format store) loses nothing: the next open finds the first-format file, or puts it
/// back from the copy kept, migrates it, and every count is exact; no copy is left behind.
#[test]
fn a_migration_killed_at_any_moment_loses_nothing() {
    for delay_ms in [0u64, 10, 30, 60, 120, 250, 500, 1000] {
        let (dir, _cleanup) = temp_dir(&format!("migrate-killed-{delay_ms}"));
        let path = dir.join("histd.db");
        let (a, b) = first_format_counters(&path, 20_000);
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "migrate_in_a_child", "--test-threads", "1"])
            .env("HISTD_MIGRATE_PATH", &path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        let mut store = Store::open(&path, Options::default()).unwrap();
        assert!(!dir.join("histd.db.format-1").exists(), "killed after {delay_ms} ms: no copy left behind");
        store.load_series().unwrap();
        let total = |name: &str| -> f64 {
            let expr = parse(&format!("count({name})")).unwrap();
            store.query(&expr, START, START + 20_001 * 10, 86_400).unwrap().iter().map(|p| p.1).sum()
        };
        assert_eq!((total("a"), total("b")), (a, b), "killed after {delay_ms} ms");
    }
}

/// Issue 36: a store file with a damaged page (every page in turn, zeroed) is salvaged into a
/// fresh one: what survives is exact (each series' points are its own, never another's), what
/// is lost is the damaged page's rows (counted), and a series written afterwards reads only its
/// own points, even where a lost series' points remain in its old group's blocks. Issue 50: the
/// first page (SQLite's header and the schema) is one page like the others: zeroed, or a byte
/// of its header changed, it costs no row (every table's rows live on other pages).
#[test]
fn a_salvaged_store_keeps_what_can_be_read_and_never_mixes_series() {
    const SERIES: i64 = 2100; // three groups of counters
    const FLUSHES: i64 = 4;
    let (dir, _cleanup) = temp_dir("salvage");
    let pristine = dir.join("pristine.db");
    {
        let mut f = fixture_in(&pristine);
        let lines: String = (1..=SERIES).map(|n| format!("c{n}:{n}|c\n")).collect();
        for i in 1..=FLUSHES {
            f.flush(START + 10 * i, &lines);
        }
    }
    let pages = std::fs::metadata(&pristine).unwrap().len() / 4096;
    let (mut kept_everywhere, mut damaged_pages) = (0, 0);
    // (a page zeroed, or u64::MAX: none; a byte of the header changed, to what)
    let header_bytes = [
        (0, b'X'),
        (16, 0x20),
        (17, 0x01),
        (18, 9),
        (20, 8),
        (21, 1),
        (28, 0xff),
        (44, 0xff),
        (59, 2),
        (100, 0x0a),
        (100, 0),
    ];
    let header_flips = header_bytes.into_iter().map(|(at, value)| (u64::MAX, Some((at, value))));
    let damages = (0..pages).step_by(3).chain([u64::MAX]).map(|page| (page, None)).chain(header_flips);
    for (page, changed) in damages {
        let damaged = dir.join("damaged.db");
        let fresh = dir.join("fresh.db");
        for file in [&damaged, &fresh] {
            let _ = std::fs::remove_file(file);
        }
        let mut bytes = std::fs::read(&pristine).unwrap();
        if page != u64::MAX {
            bytes[page as usize * 4096..(page as usize + 1) * 4096].fill(0);
        }
        if let Some((at, value)) = changed {
            bytes[at] = value;
        }
        std::fs::write(&damaged, &bytes).unwrap();
        drop(Store::open(&fresh, Options::default()).unwrap());
        let salvaged = store::salvage(&damaged, &fresh).unwrap_or_else(|e| panic!("page {page}: {e}"));
        damaged_pages += salvaged.unreadable_pages;
        let mut store = Store::open(&fresh, Options::default()).unwrap();
        store.load_series().unwrap();
        assert_eq!(store.usage().points, salvaged.points, "page {page}: the store counts what it holds");
        let mut whole = 0;
        for n in (1..=SERIES).step_by(7) {
            let expr = parse(&format!("count(c{n})")).unwrap();
            let points = store.query(&expr, START, START + 10 * FLUSHES + 10, 10).unwrap();
            assert!(
                points.iter().all(|&(_, value)| value == n as f64),
                "page {page}: c{n} reads another's points: {points:?} ({salvaged:?})"
            );
            whole += usize::from(points.len() == FLUSHES as usize);
        }
        if page == u64::MAX || page == 0 {
            assert_eq!(whole, SERIES as usize / 7, "page {page} {changed:?}: everything salvaged ({salvaged:?})");
            assert_eq!(salvaged.unreadable_pages, 0, "page {page} {changed:?}");
        }
        if page == 0 || changed.is_some() {
            assert!(salvaged.first_page_rebuilt, "page {page} {changed:?}: the first page is rebuilt");
        }
        kept_everywhere += whole;
        // A series first written after the salvage, and a lost one written again, read only
        // their own points.
        let mut aggregator = Aggregator::new(AggConfig::default());
        let mut table = Table::new(true, 8192);
        let later = START + 10 * FLUSHES + 10;
        let lines: String = (1..=SERIES).map(|n| format!("n{n}:{}|c\n", n + 100_000)).collect();
        table.insert_packet(later as u64, lines.as_bytes());
        aggregator.absorb(table);
        store.write(later, &aggregator.flush(later as u64 * 1000)).unwrap();
        store.load_series().unwrap();
        for n in [1, SERIES / 2, SERIES] {
            let expr = parse(&format!("count(n{n})")).unwrap();
            let points = store.query(&expr, START, later + 10, 10).unwrap();
            assert_eq!(points, vec![(later, (n + 100_000) as f64)], "page {page}: a new series reads only its own");
        }
        drop(store);
    }
    let tried = (0..pages).step_by(3).count() as u64;
    assert!(damaged_pages >= tried / 2, "most zeroed pages were met and skipped: {damaged_pages} of {tried}");
    let share = kept_everywhere as f64 / ((SERIES / 7) as f64 * (tried + 1) as f64);
    assert!(share > 0.5, "a damaged page costs its rows, not the store: {share:.2} of the series kept whole");
}

/// An attack on a copy of a store (a 1,100-series store of four flushes over three ten-minute
/// blocks): blocks rewritten through SQL, or the file's bytes.
enum Attack {
    /// The bytes of every block of the first group (every resolution) changed by a function.
    Block(fn(&mut Vec<u8>)),
    /// The first two raw blocks of the first group swapped.
    SwapBlocks,
    /// The first group's first raw block written over the second group's of the same start.
    BlockOverOtherGroup,
    /// The file's bytes changed by a function.
    File(fn(&mut Vec<u8>)),
    /// Every occurrence of the first bytes in the file (a series row, and its index entry)
    /// written over with the second, as flipped bits leave them.
    Bytes(&'static [u8], &'static [u8]),
    /// A statement run on the file.
    Sql(&'static str),
}

/// Issue 36, item 5: a table of attacks on the store's format. Whatever is done to it, every
/// point answered is the one written (never another series' or another time's), the damage is
/// counted where a block's checksum meets it, and what is lost is what the damage touched.
#[test]
fn attacks_on_the_store_format() {
    const SERIES: i64 = 1100;
    let (dir, _cleanup) = temp_dir("attacks");
    let pristine = dir.join("pristine.db");
    {
        let mut f = fixture_in(&pristine);
        for i in 1..=4 {
            let lines: String = (1..=SERIES).map(|n| format!("c{n}:{}|c\n", n * 100 + i)).collect();
            f.flush(START + 300 * i, &lines);
        }
    }
    let sample: Vec<i64> = (1..=SERIES).step_by(25).chain([3, 1024, 1025, SERIES]).collect();
    // Answers for the sample, the blocks and series rows found damaged.
    let answers = |path: &std::path::Path| -> (Vec<Vec<(i64, f64)>>, usize, usize) {
        let store = Store::open_reader(path).unwrap();
        let answers = sample
            .iter()
            .map(|n| store.query(&parse(&format!("count(c{n})")).unwrap(), START, START + 1500, 300).unwrap())
            .collect();
        let damaged_series = store.take_damaged_rows().len();
        let mut damaged: Vec<(i64, i64)> = store.take_damaged().iter().map(|block| (block.grp, block.start)).collect();
        damaged.sort_unstable();
        damaged.dedup();
        (answers, damaged.len(), damaged_series)
    };
    let (expected, none, no_series) = answers(&pristine);
    assert_eq!((none, no_series), (0, 0));
    assert!(expected.iter().all(|points| points.len() == 4), "{expected:?}");
    let flip: fn(&mut Vec<u8>) = |data| {
        let middle = data.len() / 2;
        data[middle] ^= 0x04;
    };
    let truncate: fn(&mut Vec<u8>) = |data| data.truncate(data.len() / 2);
    let append: fn(&mut Vec<u8>) = |data| data.extend_from_slice(&[0xab; 16]);
    let empty: fn(&mut Vec<u8>) = |data| data.clear();
    let zero_checksum: fn(&mut Vec<u8>) = |data| {
        let end = data.len();
        data[end - 4..].fill(0);
    };
    let file_garbage: fn(&mut Vec<u8>) = |bytes| bytes.extend_from_slice(&[0x5a; 10_000]);
    let file_half: fn(&mut Vec<u8>) = |bytes| bytes.truncate(bytes.len() / 2 / 4096 * 4096);
    // (name, attack, whether damaged blocks are found and counted, whether damaged series or
    // group rows are, whether points are lost)
    let cases: [(&str, Attack, bool, bool, bool); 15] = [
        ("a bit flipped in a block", Attack::Block(flip), true, false, true),
        ("a block cut to half", Attack::Block(truncate), true, false, true),
        ("garbage after a block", Attack::Block(append), true, false, true),
        ("a block emptied", Attack::Block(empty), true, false, true),
        ("a block's checksum zeroed", Attack::Block(zero_checksum), true, false, true),
        // A block's checksum covers its place (probe P10): a block read from another row, its
        // group's or another group's, is a damaged block, counted, never another's numbers;
        // the points it held come from the group's rollups.
        ("two blocks of a group swapped", Attack::SwapBlocks, true, false, false),
        ("a block written over another group's", Attack::BlockOverOtherGroup, true, false, false),
        ("garbage after the file", Attack::File(file_garbage), false, false, false),
        ("the file cut to half", Attack::File(file_half), false, false, true),
        // c1 renamed c3 by one flipped bit: c3 still answers only its own points.
        ("a series' name flipped into another's", Attack::Bytes(b"c1counter", b"c3counter"), false, true, true),
        ("a series' name no longer UTF-8", Attack::Bytes(b"c26counter", b"\xe326counter"), false, true, true),
        (
            "a series moved to another group",
            Attack::Sql("UPDATE series SET grp = grp + 1 WHERE name = 'c51'"),
            false,
            true,
            true,
        ),
        (
            "a series' checksum gone",
            Attack::Sql("UPDATE series SET checksum = NULL WHERE name = 'c76'"),
            false,
            true,
            true,
        ),
        // Probe N10: a group's rollups said to end far ahead hid all its points; the group is
        // answered from raw rows instead, and a salvage rebuilds its row from its blocks.
        (
            "a group's compacted_until far ahead",
            Attack::Sql(
                "UPDATE groups SET compacted_until = 9223372036854775000 WHERE grp = (SELECT min(grp) FROM groups)",
            ),
            false,
            true,
            false,
        ),
        (
            "a group's kind changed",
            Attack::Sql("UPDATE groups SET kind = 'gauge' WHERE grp = (SELECT min(grp) FROM groups)"),
            false,
            true,
            false,
        ),
    ];
    for (name, attack, damaged_blocks, damaged_rows, loses) in cases {
        let path = dir.join("attacked.db");
        let fresh = dir.join("salvaged.db");
        for file in [&path, &fresh] {
            let _ = std::fs::remove_file(file);
        }
        std::fs::copy(&pristine, &path).unwrap();
        attack_store(&path, attack);
        // A file SQLite finds damaged is salvaged, as the daemon does.
        let readable = Store::open_reader(&path).and_then(|store| {
            for n in &sample {
                store.query(&parse(&format!("count(c{n})")).unwrap(), START, START + 1500, 300)?;
            }
            Ok(())
        });
        let read_from = match readable {
            Ok(()) => path.clone(),
            Err(error) => {
                assert!(error.is_damaged_file(), "{name}: {error}");
                drop(Store::open(&fresh, Options::default()).unwrap());
                store::salvage(&path, &fresh).unwrap_or_else(|e| panic!("{name}: {e}"));
                fresh.clone()
            }
        };
        let (got, damaged, damaged_series) = answers(&read_from);
        assert_eq!(damaged > 0, damaged_blocks, "{name}: {damaged} blocks found damaged");
        assert_eq!(damaged_series > 0, damaged_rows, "{name}: {damaged_series} series rows found damaged");
        let lost = lost_points(name, &sample, &expected, &got);
        assert_eq!(lost > 0, loses, "{name}: {lost} points lost");
        // The writer refuses a file whose series rows are damaged, as damaged: the daemon
        // salvages it, and what the salvage keeps answers as exactly.
        match Store::open(&read_from, Options::default()) {
            Ok(_) => assert!(!damaged_rows, "{name}: the writer opened a file with damaged series rows"),
            Err(error) => {
                assert!(error.is_damaged_file() && damaged_rows, "{name}: {error}");
                let salvaged = dir.join("salvaged-by-writer.db");
                let _ = std::fs::remove_file(&salvaged);
                drop(Store::open(&salvaged, Options::default()).unwrap());
                let copied = store::salvage(&read_from, &salvaged).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(copied.unreadable_rows + copied.rebuilt_groups > 0, "{name}: {copied:?}");
                let (after, _, series_after) = answers(&salvaged);
                assert_eq!(series_after, 0, "{name}: the salvage kept damaged series rows");
                assert_eq!(lost_points(name, &sample, &expected, &after), lost, "{name}: the salvage lost more");
                drop(Store::open(&salvaged, Options::default()).unwrap());
            }
        }
    }
}

/// Points of `expected` missing from `got` (per sampled series); panics on a point answered
/// that was never written.
fn lost_points(name: &str, sample: &[i64], expected: &[Vec<(i64, f64)>], got: &[Vec<(i64, f64)>]) -> usize {
    let mut lost = 0;
    for ((n, want), got) in sample.iter().zip(expected).zip(got) {
        for point in got {
            assert!(want.contains(point), "{name}: c{n} answers {point:?}, never written: {got:?} (written {want:?})");
        }
        lost += want.len() - got.len();
    }
    lost
}

fn attack_store(path: &std::path::Path, attack: Attack) {
    let connection = rusqlite::Connection::open(path).unwrap();
    let raw_blocks = |grp_order: &str| -> Vec<(i64, i64, i64, Vec<u8>)> {
        let sql = format!("SELECT rowid, grp, start, data FROM blocks WHERE resolution = 0 ORDER BY {grp_order}");
        let mut statement = connection.prepare(&sql).unwrap();
        let rows = statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).unwrap();
        rows.map(Result::unwrap).collect()
    };
    let write = |rowid: i64, data: &[u8]| {
        connection.execute("UPDATE blocks SET data = ?1 WHERE rowid = ?2", rusqlite::params![data, rowid]).unwrap();
    };
    match attack {
        Attack::Block(change) => {
            let mut statement =
                connection.prepare("SELECT rowid, data FROM blocks WHERE grp = (SELECT min(grp) FROM blocks)").unwrap();
            let blocks: Vec<(i64, Vec<u8>)> =
                statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect();
            for (rowid, mut data) in blocks {
                change(&mut data);
                write(rowid, &data);
            }
        }
        Attack::SwapBlocks => {
            let blocks = raw_blocks("grp, start");
            let (a, b) = (&blocks[0], &blocks[1]);
            assert_eq!(a.1, b.1, "two blocks of one group");
            write(a.0, &b.3);
            write(b.0, &a.3);
        }
        Attack::BlockOverOtherGroup => {
            let blocks = raw_blocks("start, grp");
            let (a, b) = (&blocks[0], &blocks[1]);
            assert!(a.2 == b.2 && a.1 != b.1, "two groups' blocks of one start");
            write(b.0, &a.3);
        }
        Attack::File(change) => {
            drop(connection);
            let mut bytes = std::fs::read(path).unwrap();
            change(&mut bytes);
            std::fs::write(path, bytes).unwrap();
        }
        Attack::Bytes(from, to) => {
            drop(connection);
            let mut bytes = std::fs::read(path).unwrap();
            let places: Vec<usize> =
                bytes.windows(from.len()).enumerate().filter(|(_, w)| w == &from).map(|(at, _)| at).collect();
            assert!(!places.is_empty(), "{from:?} is not in the file");
            for at in places {
                bytes[at..at + to.len()].copy_from_slice(to);
            }
            std::fs::write(path, bytes).unwrap();
        }
        Attack::Sql(statement) => {
            connection.execute(statement, []).unwrap();
        }
    }
}

/// A store written before series rows had checksums is read as it is, and the writer gives
/// every row its checksum once at open; afterwards a row without one is damaged.
#[test]
fn a_store_from_before_series_checksums_gets_them_at_open() {
    let (dir, _cleanup) = temp_dir("series-checksums");
    let path = dir.join("histd.db");
    {
        let mut f = fixture_in(&path);
        f.flush(START + 300, "a:1|c\nb:2|c\nt:3|ms\n");
    }
    {
        let old = rusqlite::Connection::open(&path).unwrap();
        old.execute_batch(
            "ALTER TABLE series DROP COLUMN checksum; ALTER TABLE groups DROP COLUMN checksum; \
             DELETE FROM meta WHERE key = 'row_checksums'",
        )
        .unwrap();
    }
    let loaded = |path: &std::path::Path| {
        let reader = Store::open_reader(path).unwrap();
        let count = reader.query(&parse("count(b)").unwrap(), START, START + 600, 300).unwrap();
        (reader.take_damaged_rows(), count)
    };
    // A reader before the writer opened it: the column is missing.
    assert_eq!(loaded(&path), (vec![], vec![(START + 300, 2.0)]));
    drop(Store::open(&path, Options::default()).unwrap());
    let (damaged, count) = loaded(&path);
    assert_eq!((damaged, count), (vec![], vec![(START + 300, 2.0)]));
    let checked: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("SELECT count(*) FROM series WHERE checksum IS NULL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(checked, 0);
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute("UPDATE series SET checksum = NULL WHERE name = 'a'", [])
        .unwrap();
    assert_eq!(loaded(&path).0.len(), 1, "a row without a checksum once all have one is damaged");
    assert!(Store::open(&path, Options::default()).is_err_and(|e| e.is_damaged_file()));
}

/// Issue 52: of a counter, `count` and `sum` are the same number, what it counted (each
/// increment's value over its sample rate, Graphite's `stats_counts`), not the number of lines;
/// of a timer, `count` is its samples (a sampled one standing for 1/rate) and `sum` the total of
/// the values received, as Etsy statsd's `count` and `sum`.
#[test]
fn a_counters_count_is_what_it_counted_and_a_timers_its_samples() {
    let mut f = fixture("count-is-counted", Retention::default());
    f.flush(START + 10, "hits:5|c\nhits:2|c|@0.5\nhits:1|c\nlat:10|ms\nlat:30|ms\nlat:20|ms|@0.5\n");
    // (the expression, its answer)
    let cases = [("count(hits)", 10.0), ("sum(hits)", 10.0), ("count(lat)", 4.0), ("sum(lat)", 60.0)];
    for (expr, want) in cases {
        let points = f.store.query(&parse(expr).unwrap(), START, START + 20, 10).unwrap();
        assert_eq!(points, vec![(START + 10, want)], "{expr}");
    }
}
