//! A config file's text (an Etsy JS object literal): a config or an error naming a key or a
//! position, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::config_text::run(data));
