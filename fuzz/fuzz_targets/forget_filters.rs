//! `DELETE /api/v1/series`' filters against a small real store (nothing deleted): a 400 naming
//! the parameter, never a panic or a 500.
//!
//! Input: `key=value` lines.
#![no_main]

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;

fn store() -> &'static Mutex<store::Store> {
    static STORE: OnceLock<Mutex<store::Store>> = OnceLock::new();
    STORE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("histd-fuzz-forget-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut store = store::Store::open(&dir.join("histd.db"), store::Options::default()).unwrap();
        let mut aggregator = agg::Aggregator::new(agg::AggConfig::default());
        let mut table = agg::Table::new(true, 100);
        table.insert_packet(1_800_000_000, b"hits:1|c\nlat:3|ms|#route:/a\nbench.x:1|c\nstatsd.y:1|g\nu:a|s\n");
        aggregator.absorb(table);
        let snapshot = aggregator.flush(1_800_000_000_000);
        store.write(1_800_000_000, &snapshot).unwrap();
        store.load_series().unwrap();
        Mutex::new(store)
    })
}

fuzz_target!(|bytes: &[u8]| {
    let text = String::from_utf8_lossy(bytes);
    let query: HashMap<String, String> =
        text.split('\n').filter_map(|line| line.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
    histd::fuzzing::forget_filters(&query, &store().lock().unwrap());
});
