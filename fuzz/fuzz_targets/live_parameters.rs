//! `/api/v1/live`'s parameters (`match` regex, `sort`, `limit`, `threshold`, `tables`), read
//! and answered: an error naming the parameter, never a panic.
//!
//! Input: `key=value` lines.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let text = String::from_utf8_lossy(bytes);
    let query: HashMap<String, String> =
        text.split('\n').filter_map(|line| line.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
    histd::fuzzing::live_parameters(&query);
});
