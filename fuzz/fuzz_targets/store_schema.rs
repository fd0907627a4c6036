//! The store's schema rows damaged on disk (a series' name, tags, kind or group; a group's
//! watermarks; a meta value; a block's key or bytes), then the store opened and read as histd
//! does at start and for queries: an error, never a panic.
//!
//! Input: a byte picking the row and column, then the value (as an integer and as bytes).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::store_schema::run(data));
