//! A store file damaged anywhere (bytes overwritten at any offset past SQLite's first page, or
//! the file cut short), then salvaged as histd does when SQLite finds it damaged, and the
//! salvaged store opened and read: an error, never a panic. Every answer is one series' own:
//! `c<n>` answers `n` a flush or nothing (blocks, series rows and group rows carry checksums,
//! so a series renamed by a flipped byte is left out, not answered under another's name).
//!
//! Input: two bytes choosing the offset (scaled to the file), one choosing whether the file
//! is cut there, then the bytes written there.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| histd::fuzzing::targets::store_salvage::run(data));
