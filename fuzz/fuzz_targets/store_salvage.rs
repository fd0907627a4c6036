//! A store file damaged anywhere (bytes overwritten at any offset past SQLite's first page, or
//! the file cut short), then salvaged as histd does when SQLite finds it damaged, and the
//! salvaged store opened and read: an error, never a panic. Every answer is one series' own:
//! `c<n>` answers `n` a flush or nothing (blocks, series rows and group rows carry checksums,
//! so a series renamed by a flipped byte is left out, not answered under another's name).
//!
//! Input: two bytes choosing the offset (scaled to the file), one choosing whether the file
//! is cut there, then the bytes written there.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// Series written, each `c<n>` with the value `n` at every flush.
const SERIES: u64 = 200;

/// A store of `SERIES` counters over a few flushes, as bytes.
fn pristine() -> &'static [u8] {
    static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BYTES.get_or_init(|| histd::fuzzing::store_file(3, |_| (1..=SERIES).map(|n| format!("c{n}:{n}|c\n")).collect()))
}

fuzz_target!(|bytes: &[u8]| {
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
});
