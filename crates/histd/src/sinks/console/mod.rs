//! The console sink: a readable dump of each flush on standard output.

use std::fmt::Write as _;
use std::io::Write as _;

use agg::jsfmt::js_number;
use agg::Snapshot;

use serde_json::{json, Value};

use super::{Backend, Context, Shared, Started};
use crate::config_reader::keys::{etsy, KeyDoc};
use crate::config_reader::{ConfigError, Reader};
use crate::telemetry::EtsyStatus;

/// The console backend's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleConfig {
    /// `console.prettyprint` (false, as Etsy's code has it): one line per value when false,
    /// an aligned table when true.
    pub prettyprint: bool,
}

/// Reads `console.*`.
pub fn console(top: &Reader<'_>) -> Result<ConsoleConfig, ConfigError> {
    Ok(ConsoleConfig { prettyprint: top.object("console")?.bool("prettyprint", false)? })
}

/// The console backend: a readable dump of each flush on standard output.
pub struct Console;

impl Backend for Console {
    const NAME: &'static str = "console";
    const KEYS: &'static [KeyDoc] = KEYS;
    const ETSY: EtsyStatus = EtsyStatus::Console;
    type Settings = ConsoleConfig;

    fn read(top: &Reader<'_>, _listed: bool) -> Result<ConsoleConfig, ConfigError> {
        console(top)
    }

    fn effective(settings: &ConsoleConfig) -> Value {
        json!({ "prettyprint": settings.prettyprint })
    }

    /// Its settings and `sinkQueueBytes`.
    type Identity = (ConsoleConfig, u64);

    fn identity(settings: &ConsoleConfig, shared: &Shared) -> Self::Identity {
        (settings.clone(), shared.sink_queue_bytes)
    }

    fn start(settings: &ConsoleConfig, context: Context) -> anyhow::Result<Started> {
        let (mut flushes, counts, aligned) = (context.flushes(), context.telemetry, settings.prettyprint);
        Ok(Started::task(tokio::spawn(async move {
            while let Some(snapshot) = flushes.next().await {
                let text = render(&snapshot, aligned);
                let mut stdout = std::io::stdout().lock();
                if stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).is_err() {
                    counts.failed(snapshot.timestamp);
                } else {
                    counts.points_out.add(text.lines().count() as u64);
                    counts.bytes_out.add(text.len() as u64);
                    counts.succeeded(snapshot.timestamp);
                }
            }
        })))
    }
}

/// One flush as text: a header, then a line per series (`type key value...`). With
/// `aligned`, keys are padded to one width.
pub fn render(snapshot: &Snapshot, aligned: bool) -> String {
    let mut rows: Vec<(&str, &str, String)> = Vec::new();
    for counter in &snapshot.counters {
        rows.push((
            "counter",
            counter.key,
            format!("count={} rate={}", js_number(counter.count), js_number(counter.rate)),
        ));
    }
    for timer in &snapshot.timers {
        let mut text = String::new();
        for (index, (stat, value)) in timer.stats.iter().enumerate() {
            if index > 0 {
                text.push(' ');
            }
            snapshot.write_stat_name(stat, &mut text);
            let _ = write!(text, "={}", js_number(value));
        }
        if let Some(bins) = &timer.bins {
            let rule = &snapshot.histograms[bins.rule];
            for (index, count) in bins.counts.iter().enumerate() {
                let _ = write!(text, " histogram.{}={count}", rule.bin_name(index));
            }
        }
        let _ = write!(text, " circllhist={}", timer.histogram.to_base64());
        rows.push(("timer", &timer.key, text));
    }
    for gauge in &snapshot.gauges {
        rows.push(("gauge", &gauge.key, js_number(gauge.value)));
    }
    for set in &snapshot.sets {
        rows.push(("set", &set.key, format!("count={}", set.count)));
    }
    let width = if aligned { rows.iter().map(|(_, key, _)| key.len()).max().unwrap_or(0) } else { 0 };
    let mut out = format!(
        "Flushing stats at {} (unix {})\n",
        crate::timefmt::utc_rfc3339(snapshot.timestamp),
        snapshot.timestamp
    );
    for (kind, key, values) in rows {
        let _ = writeln!(out, "{kind:<7} {key:<width$} {values}");
    }
    out
}

/// Its keys, for README's table (`config/keys.rs`).
pub const KEYS: &[KeyDoc] =
    &[etsy(&["console.prettyprint"], "false", "the console backend: an aligned table instead of one line per value")];
