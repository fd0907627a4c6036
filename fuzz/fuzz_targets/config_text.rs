//! A config file's text (an Etsy JS object literal): a config or an error naming a key or a
//! position, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(text) = std::str::from_utf8(bytes) {
        histd::fuzzing::config_text(text);
    }
});
