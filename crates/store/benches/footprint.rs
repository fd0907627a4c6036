//! The store's cost on disk, in CPU and in memory, on deterministic data that behaves like a
//! real fleet's: counters whose rates drift (a daily-like wave and Poisson-like noise), idle
//! counters (a 0 every flush, as Etsy emits them), gauges that wander (temperatures with two
//! decimals, queue lengths), timers with latency histograms of ~40 bins.
//!
//! Run: `cargo bench -p store --bench footprint` (or with `-- quick` for a short run).
//!
//! 1. **Bytes**: 20k series (40% drifting counters, 30% idle, 20% gauges, 10% timers) written
//!    every 10 s for 2 h 10 min; per kind and resolution, bytes per point of the compacted
//!    blocks, the head, and the whole file per point.
//! 2. **CPU and memory**: 100k series of the same mix for 1 h 10 min of 10 s flushes: CPU of the
//!    writer thread per flush (mean, p99, max; compaction included), RSS before and after.

use std::path::PathBuf;
use std::time::Duration;

use circllhist::{Bucket, Histogram};
use store::{Footprint, Kind, Options, Resolution, Retention, Row, Store};

const START: i64 = 1_700_000_000 - 1_700_000_000 % 86_400;
const INTERVAL: i64 = 10;

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let (bytes_series, bytes_flushes) = if quick { (2_000, 180) } else { (20_000, 780) };
    let (cpu_series, cpu_flushes) = if quick { (10_000, 90) } else { (100_000, 420) };
    println!("# store footprint: {INTERVAL} s flushes, series mix 40% drifting counters, 30% idle counters, 20% gauges, 10% timers");
    let parts = ["bytes", "day", "cpu"];
    let only =
        |part: &str| !std::env::args().any(|a| parts.contains(&a.as_str())) || std::env::args().any(|a| a == part);
    if only("bytes") {
        bytes_per_point(bytes_series, bytes_flushes);
    }
    if only("day") {
        whole_days(if quick { 500 } else { 2_000 }, if quick { 2_000 } else { 9_720 });
    }
    if only("cpu") {
        cpu_and_memory(cpu_series, cpu_flushes, Mix::Counters);
        cpu_and_memory(cpu_series, cpu_flushes, Mix::Fleet);
    }
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("histd-footprint-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("histd.db")
}

fn open(name: &str) -> (Store, PathBuf) {
    let path = temp(name);
    let options = Options { retention: Retention::default(), max_bytes: 1 << 40, ..Options::default() };
    (Store::open(&path, options).unwrap(), path)
}

/// Writes `flushes` flushes of `series` series; returns the timer bins written and each
/// flush's writer CPU time.
fn write(store: &mut Store, series: usize, flushes: i64, mix: Mix) -> (u64, Vec<Duration>) {
    let fleet = Fleet::new(series, mix);
    let mut bins = 0;
    let mut cpu = Vec::with_capacity(flushes as usize);
    let mut upkeep = Duration::ZERO;
    for flush in 1..=flushes {
        let ts = START + flush * INTERVAL;
        let rows = fleet.rows(ts);
        bins += rows.iter().filter_map(|(_, _, r)| r.histogram.as_ref()).map(|h| h.bin_count() as u64).sum::<u64>();
        let before = thread_cpu();
        store.write(ts, &rows[..]).unwrap();
        cpu.push(thread_cpu() - before);
        upkeep += Duration::from_micros(store.usage().last_upkeep_us);
    }
    println!(
        "(upkeep: {:.1} ms a flush of the writer's time, wall clock)",
        upkeep.as_secs_f64() * 1000.0 / flushes as f64
    );
    (bins, cpu)
}

fn bytes_per_point(series: usize, flushes: i64) {
    let (mut store, path) = open("bytes");
    let (bins, _) = write(&mut store, series, flushes, Mix::Fleet);
    println!("\n## bytes on disk: {series} series, {flushes} flushes ({} min)\n", flushes * INTERVAL / 60);
    println!("| kind | resolution | blocks | points | bytes | bytes/point |");
    println!("|---|---|---|---|---|---|");
    let footprint = store.footprint().unwrap();
    for f in &footprint {
        let name = if f.head { "raw, head (not compacted yet)".to_string() } else { format!("{:?}", f.resolution) };
        println!(
            "| {} | {name} | {} | {} | {} | {:.3} |",
            f.kind.as_str(),
            f.blocks,
            f.points,
            f.bytes,
            f.bytes as f64 / f.points.max(1) as f64
        );
    }
    let raw_timers = footprint.iter().find(|f| f.kind == Kind::Timer && f.resolution == Resolution::Raw && !f.head);
    let head_timers = footprint.iter().find(|f| f.kind == Kind::Timer && f.head);
    if let (Some(raw), Some(head)) = (raw_timers, head_timers) {
        // Bins written went to the compacted raw blocks and the head in proportion to points.
        let share = raw.points as f64 / (raw.points + head.points) as f64;
        println!(
            "\ntimers: {bins} non-empty bins written; compacted raw timer blocks: {:.3} bytes per bin, totals included",
            raw.bytes as f64 / (bins as f64 * share)
        );
    }
    let usage = store.usage().clone();
    let points: u64 = footprint.iter().map(|f| f.points).sum();
    let data: u64 = footprint.iter().map(|f: &Footprint| f.bytes).sum();
    drop(store);
    let file = std::fs::metadata(&path).map_or(0, |m| m.len());
    println!(
        "whole file: {file} bytes (WAL {} bytes) for {points} points: {:.3} bytes/point ({:.3} of it block data)",
        usage.wal_bytes,
        file as f64 / points as f64,
        data as f64 / points as f64
    );
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// Counters and gauges for more than a day: retention at work, every resolution present, the
/// whole file against the points it holds.
fn whole_days(series: usize, flushes: i64) {
    let (mut store, path) = open("day");
    write(&mut store, series, flushes, Mix::Numbers);
    let footprint = store.footprint().unwrap();
    println!(
        "\n## the whole file: {series} series ({}), {flushes} flushes ({:.1} h)\n",
        Mix::Numbers.name(),
        (flushes * INTERVAL) as f64 / 3600.0
    );
    println!("| resolution | points | bytes/point of block data |");
    println!("|---|---|---|");
    for resolution in Resolution::ALL {
        let (points, bytes) = footprint
            .iter()
            .filter(|f| f.resolution == resolution)
            .fold((0, 0), |(p, b), f| (p + f.points, b + f.bytes));
        println!("| {resolution:?} (head included) | {points} | {:.3} |", bytes as f64 / points.max(1) as f64);
    }
    let points: u64 = footprint.iter().map(|f| f.points).sum();
    drop(store);
    let file = std::fs::metadata(&path).map_or(0, |m| m.len());
    let wal = std::fs::metadata(path.with_extension("db-wal")).map_or(0, |m| m.len());
    println!(
        "\nwhole file: {file} bytes and a {wal}-byte log for {points} points: {:.3} bytes/point on disk",
        (file + wal) as f64 / points as f64
    );
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

fn cpu_and_memory(series: usize, flushes: i64, mix: Mix) {
    let rss_before = rss_mb();
    let (mut store, path) = open("cpu");
    let (_, mut cpu) = write(&mut store, series, flushes, mix);
    let rss_after = rss_mb();
    let first = cpu.remove(0); // creates every series
    cpu.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mean = cpu.iter().map(|d| ms(*d)).sum::<f64>() / cpu.len() as f64;
    println!(
        "\n## CPU and memory: {series} series ({}), {flushes} flushes ({} min)\n",
        mix.name(),
        flushes * INTERVAL / 60
    );
    println!("| writer CPU per flush | ms |");
    println!("|---|---|");
    println!("| first flush (creates the series) | {:.1} |", ms(first));
    println!("| mean, later flushes (compaction included) | {mean:.1} |");
    println!("| median | {:.1} |", ms(cpu[cpu.len() / 2]));
    println!("| p99 | {:.1} |", ms(cpu[cpu.len() * 99 / 100]));
    println!("| max | {:.1} |", ms(*cpu.last().unwrap()));
    println!(
        "\nRSS: {rss_before:.1} MB before the store opened, {rss_after:.1} MB after (+{:.1} MB; the generator's \
         rows included); store {} bytes",
        rss_after - rss_before,
        store.usage().bytes()
    );
    drop(store);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// Which series a run writes.
#[derive(Clone, Copy, PartialEq)]
enum Mix {
    /// Counters alone, 4 drifting for 3 idle (what the old store benchmark wrote).
    Counters,
    /// The whole mix, timers included.
    Fleet,
    /// Counters and gauges, the mix without its timers.
    Numbers,
}

impl Mix {
    fn name(self) -> &'static str {
        match self {
            Mix::Counters => "counters: 57% drifting, 43% idle",
            Mix::Fleet => "the mix, timers included",
            Mix::Numbers => "counters and gauges: 44% drifting, 33% idle, 22% gauges",
        }
    }

    /// The behaviour of series `i`: its index in the fleet's cycle of ten.
    fn role(self, i: usize) -> usize {
        match self {
            Mix::Counters => i % 7,
            Mix::Fleet => i % 10,
            Mix::Numbers => i % 9,
        }
    }
}

/// The deterministic fleet: series `i`'s kind and behaviour follow from `i`.
struct Fleet {
    keys: Vec<(Kind, String)>,
    mix: Mix,
}

impl Fleet {
    fn new(series: usize, mix: Mix) -> Fleet {
        let keys = (0..series)
            .map(|i| match mix.role(i) {
                0..=3 => (Kind::Counter, format!("app.requests.{i};host=web{}", i % 50)),
                4..=6 => (Kind::Counter, format!("app.idle.{i}")),
                7..=8 => (Kind::Gauge, format!("app.level.{i}")),
                _ => (Kind::Timer, format!("app.latency.{i};route=r{}", i % 20)),
            })
            .collect();
        Fleet { keys, mix }
    }

    fn rows(&self, ts: i64) -> Vec<(Kind, &str, Row)> {
        let base = Row { seconds: INTERVAL as f64, ..Row::empty(ts) };
        self.keys
            .iter()
            .enumerate()
            .map(|(i, (kind, key))| {
                let row = match self.mix.role(i) {
                    0..=3 => Row { count: drifting_count(i, ts), ..base.clone() },
                    4..=6 => Row { count: 0.0, ..base.clone() },
                    7 | 8 => {
                        let value = wandering(i, ts);
                        Row { value, min: value, max: value, ..base.clone() }
                    }
                    _ => latency_row(i, ts, base.clone()),
                };
                (*kind, key.as_str(), row)
            })
            .collect()
    }
}

/// A uniform number in [0, 1) from `(i, ts, salt)`.
fn uniform(i: usize, ts: i64, salt: u64) -> f64 {
    let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (ts as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9) ^ salt;
    x ^= x >> 30;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// A standard normal number (Box-Muller).
fn normal(i: usize, ts: i64, salt: u64) -> f64 {
    let (u, v) = (uniform(i, ts, salt).max(1e-12), uniform(i, ts, salt ^ 0x55));
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// Requests in 10 s: a rate of 2-200/s on a slow wave, with Poisson-like noise.
fn drifting_count(i: usize, ts: i64) -> f64 {
    let rate = 2.0 + (i % 199) as f64;
    let wave = 1.0 + 0.3 * (std::f64::consts::TAU * ts as f64 / (3600.0 * (2 + i % 5) as f64)).sin();
    let mean = rate * INTERVAL as f64 * wave;
    (mean + mean.sqrt() * normal(i, ts, 1)).round().max(0.0)
}

/// Half the gauges are temperatures with two decimals, half queue lengths: both random walks.
fn wandering(i: usize, ts: i64) -> f64 {
    let steps = (ts - START) / INTERVAL;
    // A walk recomputed from its start would cost O(steps); a smooth function with a small
    // deterministic jitter wanders the same way.
    let slow = (ts as f64 / (1800.0 + (i % 7) as f64 * 600.0)).sin() * 3.0;
    let jitter = (uniform(i, ts, 2) - 0.5) * 0.4;
    if i.is_multiple_of(2) {
        ((20.0 + (i % 10) as f64 + slow + jitter) * 100.0).round() / 100.0
    } else {
        ((50.0 + 40.0 * slow + 10.0 * jitter * steps.min(1) as f64) as i64).max(0) as f64
    }
}

/// A timer's 10 s: ~50 requests/s, log-normal latencies around a route's median, binned.
fn latency_row(i: usize, ts: i64, base: Row) -> Row {
    let median_ms = 5.0 + (i % 40) as f64 * 10.0;
    let requests = 300.0 + 200.0 * uniform(i, ts, 3);
    let mut bins: Vec<(u16, u64)> = Vec::new();
    let (mut count, mut sum, mut squares) = (0.0, 0.0, 0.0);
    let (mut min, mut max) = (f64::MAX, f64::MIN);
    for step in -24..=30 {
        let value = median_ms * 10f64.powf(step as f64 / 40.0);
        let density = (-(step as f64 / 10.0).powi(2) / 2.0).exp() * requests / 25.0;
        let n = (density * (1.0 + 0.3 * normal(i, ts, 10 + step as u64))).round().max(0.0);
        if n == 0.0 {
            continue;
        }
        let value = (value * 10.0).round() / 10.0;
        bins.push((Bucket::of_f64(value).key(), n as u64));
        count += n;
        sum += n * value;
        squares += n * value * value;
        min = min.min(value);
        max = max.max(value);
    }
    let hist = Histogram::from_keyed_bins(bins).unwrap();
    Row { count, sum, sum_squares: squares, min, max, value: count, histogram: Some(hist), ..base }
}

fn thread_cpu() -> Duration {
    let mut spec = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut spec) };
    Duration::new(spec.tv_sec as u64, spec.tv_nsec as u32)
}

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}
