//! Untrusted query parameters, answered as the HTTP handlers answer them, from a small real
//! store: never a panic, never a 500 (bad input is a 400 naming the parameter).
//!
//! Input: lines `route`, then `key=value` pairs (the route picks series, query, histogram or
//! heatmap by its first byte).
#![no_main]

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use histd::api::{answer, Context, Route};
use libfuzzer_sys::fuzz_target;

/// "Now" for every answer, so runs repeat.
const NOW: i64 = 1_800_000_000;

/// A store with a counter, a timer (two tags), a gauge and a set over a few flushes.
fn store() -> &'static Mutex<store::Store> {
    static STORE: OnceLock<Mutex<store::Store>> = OnceLock::new();
    STORE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("histd-fuzz-http-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut store = store::Store::open(&dir.join("histd.db"), store::Options::default()).unwrap();
        let mut aggregator = agg::Aggregator::new(agg::AggConfig::default());
        for flush in 0..6u64 {
            let mut table = agg::Table::new(true, 100);
            let packet = format!(
                "hits:{flush}|c\nlat:{}|ms|#route:/a\nlat:1500|ms|#route:/b\ntemp:{flush}|g\nusers:u{flush}|s\n",
                flush * 10 + 3
            );
            table.insert_packet(NOW as u64 - 60 + flush * 10, packet.as_bytes());
            aggregator.absorb(table);
            let now_ms = (NOW as u64 - 60 + flush * 10) * 1000;
            let snapshot = aggregator.flush(now_ms);
            store.write(snapshot.timestamp as i64, &snapshot).unwrap();
        }
        store.load_series().unwrap();
        Mutex::new(store)
    })
}

fuzz_target!(|bytes: &[u8]| {
    let text = String::from_utf8_lossy(bytes);
    let mut lines = text.split('\n');
    let route = match lines.next().and_then(|l| l.bytes().next()).unwrap_or(0) % 4 {
        0 => Route::Series,
        1 => Route::Query,
        2 => Route::Histogram,
        _ => Route::Heatmap,
    };
    let query: HashMap<String, String> =
        lines.filter_map(|line| line.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let store = store().lock().unwrap();
    let context = Context { now: NOW, prefix_stats: "statsd".to_string(), limits: Default::default() };
    if let Err(failure) = answer(route, &query, &store, &context) {
        assert_eq!(failure.status(), 400, "{route:?} {query:?}: {}", failure.message());
    }
});
