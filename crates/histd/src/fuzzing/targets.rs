//! Every fuzz target's body (`fuzz/fuzz_targets/<name>.rs` calls `<name>::run`), here so the
//! test command replays each target's seeds and mutations of them in the workspace's own build
//! (`crates/histd/tests/integration/fuzz_seeds.rs`), while `scripts/fuzz` runs libFuzzer on the same code.

pub mod certificate_name {
    //! `fuzz/fuzz_targets/certificate_name.rs`:
    //! A client certificate's DER as the HTTPS port reads its subject's common name: a name or
    //! none, never a panic.

    /// Runs the target on one input.
    pub fn run(der: &[u8]) {
        let _ = crate::fuzzing::certificate_name(der);
    }
}

pub mod cli_answer {
    //! `fuzz/fuzz_targets/cli_answer.rs`:
    //! Any bytes a server at the URL of `histd health`, `query` or `top` answers with (issue 48,
    //! P3: endless heads and bodies took them to 24 GB): read through their bounded client, never
    //! a panic, never a body past its cap, nothing echoed that drives a terminal.

    /// Runs the target on one input.
    pub fn run(data: &[u8]) {
        crate::fuzzing::cli_answer(data)
    }
}

pub mod config_text {
    //! `fuzz/fuzz_targets/config_text.rs`:
    //! A config file's text (an Etsy JS object literal): a config or an error naming a key or a
    //! position, never a panic.

    /// Runs the target on one input.
    pub fn run(bytes: &[u8]) {
        if let Ok(text) = std::str::from_utf8(bytes) {
            crate::fuzzing::config_text(text);
        }
    }
}

pub mod cross_protocol {
    //! `fuzz/fuzz_targets/cross_protocol.rs`:
    //! What a line port (statsd TCP, management) received first: recognised as HTTP or not,
    //! never a panic.

    /// Runs the target on one input.
    pub fn run(bytes: &[u8]) {
        let _ = crate::fuzzing::cross_protocol(bytes);
    }
}

pub mod forget_filters {
    //! `fuzz/fuzz_targets/forget_filters.rs`:
    //! `DELETE /api/v1/series`' filters against a small real store (nothing deleted): a 400 naming
    //! the parameter, never a panic or a 500.
    //!
    //! Input: `key=value` lines.

    use std::sync::{Mutex, OnceLock};

    fn store() -> &'static Mutex<store::Store> {
        static STORE: OnceLock<Mutex<store::Store>> = OnceLock::new();
        STORE.get_or_init(|| {
            let lines = |_| "hits:1|c\nlat:3|ms|#route:/a\nbench.x:1|c\nstatsd.y:1|g\nu:a|s\n".to_string();
            let store = crate::fuzzing::filled_store("forget", 1_800_000_000, 1, lines);
            Mutex::new(store)
        })
    }

    /// Runs the target on one input.
    pub fn run(bytes: &[u8]) {
        let query = crate::fuzzing::parameters(&String::from_utf8_lossy(bytes));
        crate::fuzzing::forget_filters(&query, &store().lock().unwrap());
    }
}

pub mod forward_batch {
    //! `fuzz/fuzz_targets/forward_batch.rs`:
    //! Untrusted forwarded batches (what `POST /api/v1/forward` reads): decoding never panics,
    //! neither compressed nor raw; what decodes merges into an aggregator and flushes without a
    //! panic, and merging it where it lies (what a global does) flushes what merging it
    //! decoded does.

    use agg::{AggConfig, Aggregator};
    use fleet::format;

    /// Runs the target on one input.
    pub fn run(bytes: &[u8]) {
        let _ = format::decode(bytes, 1 << 20);
        let _ = format::decompress_checked(bytes, 1 << 20, 24);
        let checked = format::check_batch(bytes, usize::MAX);
        assert_eq!(checked.is_ok(), format::read_batch(bytes).is_ok());
        if let (Ok(batch), Ok(checked)) = (format::read_batch(bytes), checked) {
            let mut decoded = Aggregator::new(AggConfig::default());
            decoded.absorb_mergeable(batch.interval);
            let decoded = decoded.flush(1_000_000);
            assert!(decoded.timers.iter().all(|t| t.totals.received == 0 || t.stats.len() > 2));
            let mut in_place = Aggregator::new(AggConfig::default());
            checked.read_into(&mut in_place.absorbing());
            assert_eq!(format!("{:?}", in_place.flush(1_000_000)), format!("{decoded:?}"));
        }
    }
}

pub mod health_answer {
    //! `fuzz/fuzz_targets/health_answer.rs`:
    //! Any answer (status and body) to `histd health`'s `GET /health`, as it reads it: never a
    //! panic, and "up" only for a 200 whose JSON says `"status": "up"`.

    use crate::health_cli::verdict;

    /// Runs the target on one input.
    pub fn run(data: &[u8]) {
        let status = data.first().map_or(200, |&b| 100 + u16::from(b) * 2);
        let Ok(body) = std::str::from_utf8(data.get(1..).unwrap_or_default()) else { return };
        if let Ok((true, _)) = verdict(status, body) {
            let said: serde_json::Value = serde_json::from_str(body).expect("an answer read as up is JSON");
            assert!(status == 200 && said["status"] == "up", "{status} {body}");
        }
    }
}

pub mod histogram_decode {
    //! `fuzz/fuzz_targets/histogram_decode.rs`:
    //! Untrusted bytes and base64: decoding never panics, and what decodes re-encodes to bytes that
    //! decode to the same histogram.

    use circllhist::Histogram;

    /// Runs the target on one input.
    pub fn run(bytes: &[u8]) {
        if let Ok((histogram, used)) = Histogram::read_bytes(bytes) {
            assert!(used <= bytes.len());
            assert_eq!(Histogram::from_bytes(&histogram.to_bytes()).unwrap(), histogram);
        }
        if let Ok(text) = std::str::from_utf8(bytes) {
            let _ = Histogram::from_base64(text);
        }
    }
}

pub mod histogram_round_trip {
    //! `fuzz/fuzz_targets/histogram_round_trip.rs`:
    //! Values read from the input: insert, merge two halves, serialise and read back; the merge
    //! equals inserting everything, the bytes round-trip, and statistics never panic.

    use circllhist::{Histogram, QuantileType};

    /// Runs the target on one input.
    pub fn run(bytes: &[u8]) {
        let values: Vec<f64> = bytes.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect();
        let (left, right) = values.split_at(values.len() / 2);
        let (mut a, mut b, mut all) = (Histogram::new(), Histogram::new(), Histogram::new());
        for (part, histogram) in [(left, &mut a), (right, &mut b), (&values[..], &mut all)] {
            for &value in part {
                histogram.insert(value, 1);
            }
        }
        a.merge(&b);
        assert_eq!(a, all);
        assert_eq!(Histogram::from_base64(&all.to_base64()).unwrap(), all);
        let _ = all.quantiles(&[0.0, 0.5, 0.99, 1.0], QuantileType::Type1);
        let _ = all.inverse_quantiles(&[-1.0, 0.0, 1.0]);
        let _ = (all.mean(), all.stddev(), all.sum());
    }
}

pub mod http_parameters {
    //! `fuzz/fuzz_targets/http_parameters.rs`:
    //! Untrusted query parameters, answered as the HTTP handlers answer them, from a small real
    //! store: never a panic, never a 500 (bad input is a 400 naming the parameter).
    //!
    //! Input: lines `route`, then `key=value` pairs (the route picks series, query, histogram or
    //! heatmap by its first byte).

    use std::sync::{Mutex, OnceLock};

    use crate::api::{answer, Context, Route};

    /// "Now" for every answer, so runs repeat.
    const NOW: i64 = 1_800_000_000;

    /// A store with a counter, a timer (two tags), a gauge and a set over a few flushes.
    fn store() -> &'static Mutex<store::Store> {
        static STORE: OnceLock<Mutex<store::Store>> = OnceLock::new();
        STORE.get_or_init(|| {
            let lines = |flush: u64| {
                format!(
                    "hits:{flush}|c\nlat:{}|ms|#route:/a\nlat:1500|ms|#route:/b\ntemp:{flush}|g\nusers:u{flush}|s\n",
                    flush * 10 + 3
                )
            };
            let store = crate::fuzzing::filled_store("http", NOW as u64 - 60, 6, lines);
            Mutex::new(store)
        })
    }

    /// Runs the target on one input.
    pub fn run(bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        let mut lines = text.split('\n');
        let route = match lines.next().and_then(|l| l.bytes().next()).unwrap_or(0) % 4 {
            0 => Route::Series,
            1 => Route::Query,
            2 => Route::Histogram,
            _ => Route::Heatmap,
        };
        let query = crate::fuzzing::parameters(&lines.collect::<Vec<_>>().join("\n"));
        let store = store().lock().unwrap();
        let context = Context { now: NOW, prefix_stats: "statsd".to_string(), limits: Default::default() };
        if let Err(failure) = answer(route, &query, &store, &context) {
            assert_eq!(failure.status(), 400, "{route:?} {query:?}: {}", failure.message());
        }
    }
}

pub mod influx_response {
    //! `fuzz/fuzz_targets/influx_response.rs`:
    //! An InfluxDB answer (any bytes a network peer sends, with any status) as the influx backend
    //! reads it: never a panic; a partial write's dropped points are only ever read from a body
    //! that says `partial write` and `dropped=`.

    use crate::exports::{influx_judge, influx_partial_write};
    use crate::otlp::Answer;

    /// Runs the target on one input.
    pub fn run(data: &[u8]) {
        if influx_partial_write(data).is_some() {
            let text = std::str::from_utf8(data).expect("read as text");
            assert!(text.contains("partial write") && text.contains("dropped="), "{text:?}");
        }
        let status = data.first().map_or(400, |&b| 100 + u16::from(b) * 2);
        let answer = Answer { status, body: bytes::Bytes::copy_from_slice(data), retry_after: None };
        let _ = influx_judge(&answer);
    }
}

pub mod journal_file {
    //! `fuzz/fuzz_targets/journal_file.rs`:
    //! A global's journal file: its credential and body, or refused.

    /// Runs the target on one input.
    pub fn run(file: &[u8]) {
        crate::fuzzing::journal_file(file)
    }
}

pub mod live_parameters {
    //! `fuzz/fuzz_targets/live_parameters.rs`:
    //! `/api/v1/live`'s parameters (`match` regex, `sort`, `limit`, `threshold`, `tables`), read
    //! and answered: an error naming the parameter, never a panic.
    //!
    //! Input: `key=value` lines.

    /// Runs the target on one input.
    pub fn run(bytes: &[u8]) {
        let query = crate::fuzzing::parameters(&String::from_utf8_lossy(bytes));
        crate::fuzzing::live_parameters(&query);
    }
}

pub mod management_command {
    //! `fuzz/fuzz_targets/management_command.rs`:
    //! A management command line, parsed and run against an aggregator as the management port
    //! does: never a panic, a reply in Etsy's shape.

    /// Runs the target on one input.
    pub fn run(line: &[u8]) {
        crate::fuzzing::management_command(line)
    }
}

pub mod otlp_response {
    //! `fuzz/fuzz_targets/otlp_response.rs`:
    //! An OTLP receiver's answer (`ExportMetricsServiceResponse`, any bytes a network peer
    //! sends) as the otlp backend reads it: never a panic; a partial success never reports more
    //! than the bytes could hold.

    use crate::otlp::{judge, partial_success, Answer};

    /// Runs the target on one input.
    pub fn run(data: &[u8]) {
        if let Some((_, message)) = partial_success(data) {
            assert!(message.len() <= data.len() * 3, "lossy UTF-8 grows at most threefold");
        }
        let status = data.first().map_or(200, |&b| 100 + u16::from(b) * 2);
        let answer = Answer { status, body: bytes::Bytes::copy_from_slice(data), retry_after: None };
        let _ = judge(&answer);
    }
}

pub mod parse_round_trip {
    //! `fuzz/fuzz_targets/parse_round_trip.rs`:
    //! Any bytes: parsing never panics, and every accepted metric encodes to a line that parses
    //! back to the same metric.

    use proto::{encode::encode_metric, lines, parse_line, Line};

    /// Runs the target on one input.
    pub fn run(packet: &[u8]) {
        for line in lines(packet) {
            let Line::Metrics(values) = parse_line(line) else { continue };
            for metric in values.flatten() {
                let mut encoded = Vec::new();
                encode_metric(&metric, &mut encoded);
                let Line::Metrics(again) = parse_line(&encoded) else { panic!("re-encoded as a non-metric") };
                let again: Vec<_> = again.collect();
                assert_eq!(again, vec![Ok(metric)]);
            }
        }
    }
}

pub mod prometheus_output {
    //! `fuzz/fuzz_targets/prometheus_output.rs`:
    //! Untrusted statsd lines (and a mapping file) through the prometheus backend: applied to the
    //! cumulative registry, then written as text, OpenMetrics, protobuf and remote write in every
    //! histogram mode. Never a panic; every text line is a comment or `name{labels} value` with a
    //! valid name, escaped label values and a number Prometheus reads.
    //!
    //! Input: a mapping file (YAML), a NUL byte, then statsd packets separated by NUL bytes (each
    //! one flush).

    use std::sync::Arc;

    use crate::exposition::{Exposition, Format};
    use crate::prometheus::config::{HistogramMode, DEFAULT_BUCKETS};
    use crate::prometheus::encode::{encode, Flush};
    use crate::prometheus::exposition::WriteRegistry;
    use crate::prometheus::mapping::Mapper;
    use crate::prometheus::samples::Layout;
    use crate::prometheus::state::Registry;

    /// `name{label="value",...} number`, as Prometheus' text parser needs it.
    fn check_line(line: &str) {
        let name_end = line.find(['{', ' ']).unwrap_or_else(|| panic!("no value: {line:?}"));
        let name = &line[..name_end];
        assert!(!name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit()), "{line:?}");
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'), "{line:?}");
        let mut rest = &line[name_end..];
        if let Some(labels) = rest.strip_prefix('{') {
            rest = labels;
            loop {
                let eq = rest.find('=').unwrap_or_else(|| panic!("label without value: {line:?}"));
                assert!(rest[..eq].chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{line:?}");
                rest = rest[eq + 1..].strip_prefix('"').unwrap_or_else(|| panic!("unquoted value: {line:?}"));
                let mut chars = rest.char_indices();
                let close = loop {
                    match chars.next() {
                        Some((_, '\\')) => assert!(matches!(chars.next(), Some((_, '\\' | '"' | 'n'))), "{line:?}"),
                        Some((at, '"')) => break at,
                        Some((_, '\n')) | None => panic!("unterminated value: {line:?}"),
                        _ => {}
                    }
                };
                rest = &rest[close + 1..];
                match rest.as_bytes().first() {
                    Some(b',') => rest = &rest[1..],
                    Some(b'}') => {
                        rest = &rest[1..];
                        break;
                    }
                    _ => panic!("bad label list: {line:?}"),
                }
            }
        }
        let value = rest.strip_prefix(' ').unwrap_or_else(|| panic!("no space before the value: {line:?}"));
        let number = matches!(value, "+Inf" | "-Inf" | "NaN") || value.parse::<f64>().is_ok();
        assert!(number, "{line:?}");
    }

    /// Runs the target on one input.
    pub fn run(bytes: &[u8]) {
        let mut parts = bytes.split(|&b| b == 0);
        let mapping =
            std::str::from_utf8(parts.next().unwrap_or_default()).ok().and_then(|t| Mapper::from_yaml(t).ok());
        let mut registry = Registry::new(true, Some(3), mapping.map(Arc::new));
        let config = agg::AggConfig::default();
        let mut aggregator = agg::Aggregator::new(config.clone());
        for (flush, packet) in parts.take(4).enumerate() {
            let mut table = agg::Table::new(config.key_name_sanitize, 64);
            table.insert_packet(1, packet);
            aggregator.absorb(table);
            registry.apply(&aggregator.flush(1_000_000 + flush as u64 * 10_000));
            registry.expire(1_000 + flush as u64 * 10, Some(15));
        }
        for mode in [HistogramMode::Classic, HistogramMode::Vmrange, HistogramMode::Native] {
            let layout = Layout::new(mode, &DEFAULT_BUCKETS);
            let flush = Flush { layout: &layout, timestamp_ms: 1_040_000, start_ms: 1_030_000, external_labels: &[] };
            for request in encode(&registry, &flush, &[]) {
                assert!(snap::raw::Decoder::new().decompress_vec(&request.body).is_ok());
            }
        }
        for format in [Format::Text, Format::OpenMetrics, Format::Protobuf] {
            let mut out = Exposition::in_format(format);
            let mode = if format == Format::Protobuf { HistogramMode::Native } else { HistogramMode::Classic };
            out.registry(&registry, &Layout::new(mode, &DEFAULT_BUCKETS));
            if format == Format::Protobuf {
                continue;
            }
            for line in out.finish().lines().filter(|l| !l.starts_with('#')) {
                check_line(line);
            }
        }
    }
}

pub mod proxy_route {
    //! `fuzz/fuzz_targets/proxy_route.rs`:
    //! A packet through `histd proxy`'s router: every line counted once, never a panic.

    /// Runs the target on one input.
    pub fn run(bytes: &[u8]) {
        let sanitize = bytes.first().is_some_and(|b| b & 1 == 1);
        crate::fuzzing::proxy_route(bytes.get(1..).unwrap_or_default(), sanitize);
    }
}

pub mod query_language {
    //! `fuzz/fuzz_targets/query_language.rs`:
    //! Untrusted expression text (the HTTP API's `expr` and `name`): parsing never panics or
    //! overflows the stack, and whatever parses nests no deeper than the limit.

    use store::{parse, parse_selector, Expr, MAX_DEPTH};

    fn depth(expr: &Expr) -> usize {
        match expr {
            Expr::Call(..) => 0,
            Expr::Cumulative(inner) => 1 + depth(inner),
        }
    }

    /// Runs the target on one input.
    pub fn run(bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        if let Ok(expr) = parse(&text) {
            assert!(depth(&expr) <= MAX_DEPTH, "{text:?} nests deeper than the limit");
        }
        let _ = parse_selector(&text);
    }
}

pub mod scan_agrees {
    //! `fuzz/fuzz_targets/scan_agrees.rs`:
    //! Any bytes: the readers' one-pass scanner splits a packet into the same lines as `lines`,
    //! and every line it reads itself gives exactly the full parser's one metric and series key
    //! (and, when it gives the key in short form, that form is the key's).

    use proto::{key::push_series_key, lines, parse_line, scan_lines, Line, Scanned};

    /// Runs the target on one input.
    pub fn run(packet: &[u8]) {
        let scanned: Vec<Scanned<'_>> = scan_lines(packet).collect();
        let split: Vec<&[u8]> = lines(packet).collect();
        assert_eq!(scanned.len(), split.len());
        for (item, line) in scanned.into_iter().zip(split) {
            let simple = match item {
                Scanned::Other(other) => {
                    assert_eq!(other, line);
                    continue;
                }
                Scanned::Simple(simple) => simple,
            };
            let Line::Metrics(values) = parse_line(line) else { panic!("a simple line is a metric line") };
            let values: Vec<_> = values.collect();
            let [Ok(metric)] = values.as_slice() else { panic!("one good value, got {values:?}") };
            assert_eq!(
                (simple.kind, simple.value, simple.sample_rate),
                (metric.kind, metric.value, metric.sample_rate)
            );
            assert!(metric.timestamp.is_none());
            let mut fast_key = String::new();
            simple.push_key(&mut fast_key);
            if let Some(short) = simple.short_key {
                assert_eq!(Some(short), proto::ShortKey::new(fast_key.as_bytes()));
            }
            for sanitize in [true, false] {
                let mut key = String::new();
                push_series_key(&mut key, metric.name, metric.tags, sanitize);
                assert_eq!(fast_key, key);
            }
        }
    }
}

pub mod sign_in_request {
    //! `fuzz/fuzz_targets/sign_in_request.rs`:
    //! Any `Cookie` header lines and sign-in form a browser (or anyone) sends the HTTP port
    //! (issue 49, item 2): read without a panic; a session id found is one the header holds.

    /// Runs the target on one input.
    pub fn run(data: &[u8]) {
        crate::fuzzing::sign_in_request(data)
    }
}

pub mod spool_file {
    //! `fuzz/fuzz_targets/spool_file.rs`:
    //! A forward spool file as a local finds it at start: read whole or set aside.

    /// Runs the target on one input.
    pub fn run(file: &[u8]) {
        crate::fuzzing::spool_file(file)
    }
}

pub mod store_block {
    //! `fuzz/fuzz_targets/store_block.rs`:
    //! Stored blocks read back from disk (a corrupt or truncated file): decoding never panics, and
    //! what decodes encodes again to the same rows.

    use store::codec::block::{self, Place};

    /// The place the pinned seeds were written for (the store's block tests keep them there):
    /// a version 4 block's checksum covers it.
    const SEEDED: Place = Place { resolution: 0, grp: 7, start: 1_700_000_000, span: 600 };

    /// Runs the target on one input.
    pub fn run(bytes: &[u8]) {
        let _ = block::decode_one(bytes, &SEEDED, 3);
        if let Ok(series) = block::decode_all(bytes, &SEEDED) {
            let again = block::decode_all(&block::encode(&series, &SEEDED), &SEEDED)
                .expect("what decoded encodes and decodes again");
            assert_eq!(format!("{again:?}"), format!("{series:?}"));
        }
    }
}

pub mod store_migration {
    //! `fuzz/fuzz_targets/store_migration.rs`:
    //! A store of the first format (one SQLite row per series and interval) with rows made of
    //! the input, migrated to blocks when histd opens it, then read: an error, never a panic.
    //!
    //! Input: a byte per series kind (up to 3 series), then rows of 8-byte fields (series, ts,
    //! seconds, count, min, max, value) and a histogram blob, cut by 0xff 0xfe.

    /// The schema of the first format, as that version created it.
    const FORMAT_1_SCHEMA: &str = "
    CREATE TABLE series (id INTEGER PRIMARY KEY, name TEXT NOT NULL, tags TEXT NOT NULL, kind TEXT NOT NULL, UNIQUE (name, tags, kind));
    CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
    CREATE TABLE points_raw (series INTEGER NOT NULL, ts INTEGER NOT NULL, seconds REAL NOT NULL, count REAL, sum REAL,
        sum_squares REAL, min REAL, max REAL, value REAL, hist BLOB, PRIMARY KEY (series, ts)) WITHOUT ROWID;
    CREATE TABLE points_1m (series INTEGER NOT NULL, ts INTEGER NOT NULL, seconds REAL NOT NULL, count REAL, sum REAL,
        sum_squares REAL, min REAL, max REAL, value REAL, hist BLOB, PRIMARY KEY (series, ts)) WITHOUT ROWID;
    CREATE TABLE points_1h (series INTEGER NOT NULL, ts INTEGER NOT NULL, seconds REAL NOT NULL, count REAL, sum REAL,
        sum_squares REAL, min REAL, max REAL, value REAL, hist BLOB, PRIMARY KEY (series, ts)) WITHOUT ROWID;
    ";

    const KINDS: [&str; 5] = ["counter", "timer", "gauge", "set", "bogus"];
    const TABLES: [&str; 3] = ["points_raw", "points_1m", "points_1h"];

    fn field(bytes: &[u8], at: usize) -> i64 {
        let mut word = [0u8; 8];
        for (i, b) in bytes.iter().skip(at * 8).take(8).enumerate() {
            word[i] = *b;
        }
        i64::from_le_bytes(word)
    }

    /// Runs the target on one input.
    pub fn run(bytes: &[u8]) {
        if bytes.len() < 4 {
            return;
        }
        let dir = std::env::temp_dir().join(format!("histd-fuzz-migrate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("histd.db");
        {
            let old = rusqlite::Connection::open(&path).unwrap();
            old.execute_batch(FORMAT_1_SCHEMA).unwrap();
            for (id, kind) in bytes[..3].iter().enumerate() {
                let kind = KINDS[usize::from(*kind) % KINDS.len()];
                let _ = old.execute(
                    "INSERT INTO series (id, name, tags, kind) VALUES (?1, ?2, '', ?3)",
                    rusqlite::params![id as i64 + 1, format!("s{id}"), kind],
                );
            }
            let _ = old
                .execute("INSERT INTO meta (key, value) VALUES ('rolled_points_1h', ?1)", [i64::from(bytes[3]) * 3600]);
            for (index, row) in bytes[4..].split(|&b| b == 0xfe).take(32).enumerate() {
                let (fields, hist) = row.split_at(row.len().min(56));
                let table = TABLES[index % TABLES.len()];
                let series = field(fields, 0).rem_euclid(4);
                let ts = field(fields, 1) % 100_000_000_000;
                let number = |at| f64::from_bits(field(fields, at) as u64);
                let _ = old.execute(
                    &format!("INSERT INTO {table} (series, ts, seconds, count, sum, min, max, value, hist) VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6, ?7, ?8)"),
                    rusqlite::params![series, ts, number(2), number(3), number(4), number(5), number(6), hist],
                );
            }
        }
        if let Ok(mut store) = store::Store::open(&path, store::Options::default()) {
            let _ = store.load_series();
            for expr in ["count(s0)", "quantile(s1, 0.5)", "value(s2)"] {
                let _ = store.query(&store::parse(expr).unwrap(), -1, 100_000_000_000, 86_400 * 365);
            }
        }
    }
}

pub mod store_salvage {
    //! `fuzz/fuzz_targets/store_salvage.rs`:
    //! A store file damaged anywhere (bytes overwritten at any offset past SQLite's first page, or
    //! the file cut short), then salvaged as histd does when SQLite finds it damaged, and the
    //! salvaged store opened and read: an error, never a panic. Every answer is one series' own:
    //! `c<n>` answers `n` a flush or nothing (blocks, series rows and group rows carry checksums,
    //! so a series renamed by a flipped byte is left out, not answered under another's name).
    //!
    //! Input: two bytes choosing the offset (scaled to the file), one choosing whether the file
    //! is cut there, then the bytes written there.

    /// Series written, each `c<n>` with the value `n` at every flush.
    const SERIES: u64 = 200;

    /// A store of `SERIES` counters over a few flushes, as bytes.
    fn pristine() -> &'static [u8] {
        static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        BYTES.get_or_init(|| crate::fuzzing::store_file(3, |_| (1..=SERIES).map(|n| format!("c{n}:{n}|c\n")).collect()))
    }

    /// Runs the target on one input.
    pub fn run(bytes: &[u8]) {
        let [high, low, cut, written @ ..] = bytes else { return };
        let mut file = pristine().to_vec();
        let room = file.len() - 4096;
        let at = 4096 + (usize::from(*high) << 8 | usize::from(*low)) * room / 65536;
        if cut & 1 == 1 {
            file.truncate(at);
        }
        let end = (at + written.len()).min(file.len());
        file[at.min(end)..end].copy_from_slice(&written[..end - at.min(end)]);
        let dir = std::env::temp_dir().join(format!("histd-fuzz-salvage-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (damaged, fresh) = (dir.join("damaged.db"), dir.join("histd.db"));
        std::fs::write(&damaged, &file).unwrap();
        drop(store::Store::open(&fresh, store::Options::default()).unwrap());
        if store::salvage(&damaged, &fresh).is_err() {
            return;
        }
        let Ok(mut salvaged) = store::Store::open(&fresh, store::Options::default()) else { return };
        if salvaged.load_series().is_err() {
            return;
        }
        for n in (1..=SERIES).step_by(13) {
            let expr = store::parse(&format!("count(c{n})")).unwrap();
            if let Ok(points) = salvaged.query(&expr, 1_800_000_000, 1_800_000_030, 10) {
                for (t, value) in points {
                    assert!(value == n as f64 || value.is_nan(), "c{n} answers {value} at {t}: another series' points");
                }
            }
        }
        let _ = salvaged.scrub();
    }
}

pub mod store_schema {
    //! `fuzz/fuzz_targets/store_schema.rs`:
    //! The store's schema rows damaged on disk (a series' name, tags, kind or group; a group's
    //! watermarks; a meta value; a block's key or bytes), then the store opened and read as histd
    //! does at start and for queries: an error, never a panic.
    //!
    //! Input: a byte picking the row and column, then the value (as an integer and as bytes).

    use rusqlite::types::Value;

    /// A fresh store with a counter and a timer over a few flushes, as bytes.
    fn pristine() -> &'static [u8] {
        static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        BYTES.get_or_init(|| crate::fuzzing::store_file(4, |flush| format!("hits:{flush}|c\nlat:{flush}|ms\n")))
    }

    const TARGETS: [&str; 10] = [
        "UPDATE series SET name = ?1",
        "UPDATE series SET tags = ?1",
        "UPDATE series SET kind = ?1",
        "UPDATE series SET grp = ?1",
        "UPDATE groups SET compacted_until = ?1",
        "UPDATE groups SET hour_until = ?1",
        "UPDATE groups SET kind = ?1",
        "UPDATE meta SET value = ?1",
        "UPDATE blocks SET data = ?1",
        "UPDATE blocks SET start = ?1",
    ];

    /// Runs the target on one input.
    pub fn run(bytes: &[u8]) {
        let Some((&pick, value)) = bytes.split_first() else { return };
        let dir = std::env::temp_dir().join(format!("histd-fuzz-schema-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("histd.db");
        std::fs::write(&path, pristine()).unwrap();
        {
            let connection = rusqlite::Connection::open(&path).unwrap();
            let value = match pick & 0x80 {
                0 => Value::Integer(i64::from_le_bytes(
                    value.iter().copied().chain([0; 8]).take(8).collect::<Vec<_>>().try_into().unwrap(),
                )),
                _ => Value::Blob(value.to_vec()),
            };
            let target = TARGETS[usize::from(pick & 0x7f) % TARGETS.len()];
            let _ = connection.execute(target, [value]);
        }
        if let Ok(mut store) = store::Store::open(&path, store::Options::default()) {
            let _ = store.load_series();
            let _ = store.series(None, 100);
            for expr in ["count(hits)", "quantile(lat, 0.5)", "count(lat)"] {
                let _ = store.query(&store::parse(expr).unwrap(), 1_799_999_000, 1_800_001_000, 60);
            }
            let _ = store.merged(&store::Selector { name: "lat".into(), tags: vec![] }, 1_799_999_000, 1_800_001_000);
        }
    }
}

pub mod stream_framer {
    //! `fuzz/fuzz_targets/stream_framer.rs`:
    //! A statsd byte stream in reads of any sizes: only whole lines are handed on, and the
    //! partial-line budget is given back.

    /// Runs the target on one input.
    pub fn run(bytes: &[u8]) {
        // The first 8 bytes say where reads end; the rest is the stream.
        let (cuts, stream) = bytes.split_at(bytes.len().min(8));
        crate::fuzzing::stream_framer(stream, cuts);
    }
}

pub mod table_insert {
    //! `fuzz/fuzz_targets/table_insert.rs`:
    //! Any bytes into a table, twice (sanitised and raw keys), then a flush: never panics, and every
    //! non-empty line is counted.

    use agg::{AggConfig, Aggregator, Table};

    /// Runs the target on one input.
    pub fn run(packet: &[u8]) {
        for sanitize in [true, false] {
            let mut table = Table::new(sanitize, 16);
            table.insert_packet(1, packet);
            assert_eq!(table.ingest().lines, proto::lines(packet).count() as u64);
            let mut aggregator = Aggregator::new(AggConfig { key_name_sanitize: sanitize, ..AggConfig::default() });
            aggregator.absorb(table);
            aggregator.flush(10_000);
        }
    }
}

pub mod peer_answers {
    //! `fuzz/fuzz_targets/peer_answers.rs`:
    //! Any bytes a peer of a global's group (`global.peers`) answers with, read as each answer
    //! the group routes merge (a histogram, a heatmap, a series list, a query's step rows, a
    //! live view) and merged into this global's own: refused or merged, never a panic (issue
    //! 49).

    use crate::contract::{HeatmapResult, HistogramResult, Live, SeriesList, SortBy};
    use crate::global::live_merge::{left_out, merge_live, order_and_cut};
    use crate::global::peers::{
        cut_series, merge_answers, merge_heatmap, merge_histogram, merge_series, merge_step_rows, StepRows,
    };

    /// Runs the target on one input.
    pub fn run(data: &[u8]) {
        let answer = || vec![("http://peer:8127".to_string(), Ok(data.to_vec()))];
        let mut histogram = HistogramResult::default();
        merge_answers(&mut histogram, answer(), merge_histogram);
        let mut heatmap = HeatmapResult::default();
        merge_answers(&mut heatmap, answer(), merge_heatmap);
        let mut series = SeriesList::default();
        merge_answers(&mut series, answer(), merge_series);
        cut_series(&mut series, 10);
        let mut rows = StepRows::default();
        merge_answers(&mut rows, answer(), merge_step_rows);
        let mut live = Live::default();
        if let Ok(theirs) = serde_json::from_slice::<Live>(data) {
            merge_live(&mut live, theirs.clone());
            merge_live(&mut live, theirs.clone());
            order_and_cut(&mut live, SortBy::P99, 5);
            let _ = left_out(&theirs, &live.series);
        }
    }
}

/// A target's body: one input.
pub type Body = fn(&[u8]);

/// Every target: its name (its folder in `fuzz/corpus-seeds`) and its body.
pub const TARGETS: &[(&str, Body)] = &[
    ("certificate_name", certificate_name::run),
    ("cli_answer", cli_answer::run),
    ("config_text", config_text::run),
    ("cross_protocol", cross_protocol::run),
    ("forget_filters", forget_filters::run),
    ("forward_batch", forward_batch::run),
    ("health_answer", health_answer::run),
    ("histogram_decode", histogram_decode::run),
    ("histogram_round_trip", histogram_round_trip::run),
    ("http_parameters", http_parameters::run),
    ("influx_response", influx_response::run),
    ("journal_file", journal_file::run),
    ("live_parameters", live_parameters::run),
    ("management_command", management_command::run),
    ("otlp_response", otlp_response::run),
    ("parse_round_trip", parse_round_trip::run),
    ("peer_answers", peer_answers::run),
    ("prometheus_output", prometheus_output::run),
    ("proxy_route", proxy_route::run),
    ("query_language", query_language::run),
    ("scan_agrees", scan_agrees::run),
    ("sign_in_request", sign_in_request::run),
    ("spool_file", spool_file::run),
    ("store_block", store_block::run),
    ("store_migration", store_migration::run),
    ("store_salvage", store_salvage::run),
    ("store_schema", store_schema::run),
    ("stream_framer", stream_framer::run),
    ("table_insert", table_insert::run),
];
