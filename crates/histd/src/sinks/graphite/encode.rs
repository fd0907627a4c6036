//! Graphite lines: `<name> <value> <timestamp>\n`, named as Etsy's `backends/graphite.js`
//! names them (etsy-statsd.md §5.2) and valued as JavaScript prints numbers.

use agg::jsfmt::write_js_number;
use agg::Snapshot;

use super::GraphiteConfig;

/// Bytes of Graphite lines per chunk: a flush is held and sent as chunks of about this size,
/// never as one string that keeps doubling as it grows. The encoder's chunk, the two queued,
/// the one being written and those kept until carbon has read them are resident while a flush
/// is written, so the chunk's size multiplies into every daemon's peak (the 100k-counter row
/// with a carbon that reads, BENCHMARKS.md, is measured with 64 KiB); a write a chunk stays
/// cheap (about 110 for a flush of 100k counters).
pub const CHUNK_BYTES: usize = 1 << 16;

/// Lines gathered into chunks of about [`CHUNK_BYTES`], each handed to `emit` once full.
pub struct Chunked<F: FnMut(String)> {
    current: String,
    emit: F,
}

impl<F: FnMut(String)> Chunked<F> {
    /// Chunks go to `emit`.
    pub fn new(emit: F) -> Self {
        Chunked { current: String::new(), emit }
    }

    /// The string the next line is appended to (a new chunk when the current one is full).
    pub fn line(&mut self) -> &mut String {
        if self.current.len() >= CHUNK_BYTES {
            let full = std::mem::take(&mut self.current);
            (self.emit)(full);
        }
        if self.current.capacity() == 0 {
            self.current.reserve(CHUNK_BYTES + 4096);
        }
        &mut self.current
    }

    /// Hands over the last chunk.
    pub fn finish(mut self) {
        if !self.current.is_empty() {
            let last = std::mem::take(&mut self.current);
            (self.emit)(last);
        }
    }
}

/// The name prefixes of one configuration, computed once.
#[derive(Debug, Clone)]
pub struct GraphiteNames {
    counter_rate: String,
    counter_count: String,
    rate_stat: &'static str,
    count_stat: &'static str,
    timer: String,
    gauge: String,
    set: String,
    /// `numStats`'s full name (legacy mode has no `stats.` before it).
    num_stats: String,
    /// Prefix of `processing_time`, `graphiteStats.*`.
    internal: String,
    suffix: String,
    flush_counts: bool,
    sanitize_keys: bool,
}

/// `parts` joined by `.`, empty parts left out, with a trailing `.` when not empty.
fn prefix(parts: &[&str]) -> String {
    let joined: Vec<&str> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
    if joined.is_empty() {
        String::new()
    } else {
        format!("{}.", joined.join("."))
    }
}

impl GraphiteNames {
    /// Names for `config`; `prefix_stats` is `prefixStats`; `keys_sanitized` tells whether
    /// keys were already cleaned (`keyNameSanitize`), else the part before `;` is cleaned here.
    pub fn new(config: &GraphiteConfig, prefix_stats: &str, keys_sanitized: bool) -> Self {
        let legacy = GraphiteNames {
            counter_rate: "stats.".into(),
            counter_count: "stats_counts.".into(),
            rate_stat: "",
            count_stat: "",
            timer: "stats.timers.".into(),
            gauge: "stats.gauges.".into(),
            set: "stats.sets.".into(),
            num_stats: format!("{prefix_stats}.numStats"),
            internal: prefix(&["stats", prefix_stats]),
            suffix: config.global_suffix.as_ref().map(|s| format!(".{s}")).unwrap_or_default(),
            flush_counts: config.flush_counts,
            sanitize_keys: !keys_sanitized,
        };
        if config.legacy_namespace {
            return legacy;
        }
        let global = config.global_prefix.as_str();
        let counters = prefix(&[global, &config.prefix_counter]);
        GraphiteNames {
            counter_rate: counters.clone(),
            counter_count: counters,
            rate_stat: ".rate",
            count_stat: ".count",
            timer: prefix(&[global, &config.prefix_timer]),
            gauge: prefix(&[global, &config.prefix_gauge]),
            set: prefix(&[global, &config.prefix_set]),
            num_stats: format!("{}numStats", prefix(&[global, prefix_stats])),
            internal: prefix(&[global, prefix_stats]),
            ..legacy
        }
    }

    /// Appends every line of `snapshot` and `numStats`, in Etsy's order (the caller adds the
    /// timing lines that follow: see [`GraphiteNames::internal_line`]).
    pub fn encode(&self, snapshot: &Snapshot, out: &mut Chunked<impl FnMut(String)>) {
        let ts = &time_suffix(snapshot.timestamp);
        let names = snapshot.stat_names();
        let mut head = String::new();
        for counter in &snapshot.counters {
            self.line(out.line(), &self.counter_rate, counter.key, self.rate_stat, counter.rate, ts);
            if self.flush_counts {
                self.line(out.line(), &self.counter_count, counter.key, self.count_stat, counter.count, ts);
            }
        }
        for timer in &snapshot.timers {
            // The name and tags are the same for every statistic: built once per timer.
            head.clear();
            let tags = self.push_name(&mut head, &self.timer, &timer.key);
            for (which, value) in &timer.stats {
                let line = out.line();
                line.push_str(&head);
                line.push('.');
                line.push_str(names.of(which));
                line.push_str(&self.suffix);
                line.push_str(tags);
                push_value_and_time(line, value, ts);
            }
            if let Some(bins) = &timer.bins {
                let rule = &snapshot.histograms[bins.rule];
                for (index, &count) in bins.counts.iter().enumerate() {
                    let stat = format!(".histogram.{}", rule.bin_name(index));
                    self.line(out.line(), &self.timer, &timer.key, &stat, count as f64, ts);
                }
            }
        }
        for gauge in &snapshot.gauges {
            self.line(out.line(), &self.gauge, &gauge.key, "", gauge.value, ts);
        }
        for set in &snapshot.sets {
            self.line(out.line(), &self.set, &set.key, ".count", set.count as f64, ts);
        }
        if !snapshot.late {
            // A late interval's lines join a second that already has its numStats.
            self.plain_line(out.line(), &self.num_stats, snapshot.num_stats() as f64, ts);
        }
    }

    /// Appends `<prefixStats>.<name>` (prefixed as the namespace mode wants).
    pub fn internal_line(&self, out: &mut String, name: &str, value: f64, ts: u64) {
        let full = format!("{}{name}", self.internal);
        self.plain_line(out, &full, value, &time_suffix(ts));
    }

    fn plain_line(&self, out: &mut String, name: &str, value: f64, ts: &str) {
        out.push_str(name);
        out.push_str(&self.suffix);
        push_value_and_time(out, value, ts);
    }

    /// Appends `prefix` + the key without its tags (sanitised when keys are not already);
    /// returns the key's `;tags`, which go after the stat and suffix.
    fn push_name<'k>(&self, out: &mut String, prefix: &str, key: &'k str) -> &'k str {
        let (name, tags) = key.split_at(key.find(';').unwrap_or(key.len()));
        out.push_str(prefix);
        if self.sanitize_keys {
            proto::key::push_sanitized(out, name.as_bytes());
        } else {
            out.push_str(name);
        }
        tags
    }

    /// `prefix` + key without tags + `stat` + suffix + `;tags`, then value and time.
    fn line(&self, out: &mut String, prefix: &str, key: &str, stat: &str, value: f64, ts: &str) {
        let tags = self.push_name(out, prefix, key);
        out.push_str(stat);
        out.push_str(&self.suffix);
        out.push_str(tags);
        push_value_and_time(out, value, ts);
    }
}

/// `" <ts>\n"`: what ends every line of a flush, written once.
fn time_suffix(ts: u64) -> String {
    let mut suffix = String::from(" ");
    agg::jsfmt::write_integer(&mut suffix, ts);
    suffix.push('\n');
    suffix
}

/// Appends `" <value>"` and the flush's [`time_suffix`].
fn push_value_and_time(out: &mut String, value: f64, time_suffix: &str) {
    out.push(' ');
    write_js_number(out, value);
    out.push_str(time_suffix);
}
