//! A store of the first format (one SQLite row per series and interval) with rows made of
//! the input, migrated to blocks when histd opens it, then read: an error, never a panic.
//!
//! Input: a byte per series kind (up to 3 series), then rows of 8-byte fields (series, ts,
//! seconds, count, min, max, value) and a histogram blob, cut by 0xff 0xfe.
#![no_main]

use libfuzzer_sys::fuzz_target;

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

fuzz_target!(|bytes: &[u8]| {
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
        let _ =
            old.execute("INSERT INTO meta (key, value) VALUES ('rolled_points_1h', ?1)", [i64::from(bytes[3]) * 3600]);
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
});
