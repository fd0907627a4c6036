//! The store's schema rows damaged on disk (a series' name, tags, kind or group; a group's
//! watermarks; a meta value; a block's key or bytes), then the store opened and read as histd
//! does at start and for queries: an error, never a panic.
//!
//! Input: a byte picking the row and column, then the value (as an integer and as bytes).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rusqlite::types::Value;

/// A fresh store with a counter and a timer over a few flushes, as bytes.
fn pristine() -> &'static [u8] {
    static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BYTES.get_or_init(|| histd::fuzzing::store_file(4, |flush| format!("hits:{flush}|c\nlat:{flush}|ms\n")))
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

fuzz_target!(|bytes: &[u8]| {
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
});
