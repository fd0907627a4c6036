//! `histd top`: the live terminal view of a running histd, polling `/api/v1/live` every
//! `--interval`: the header (input rates, losses, memory, flush, series, store, sinks), the
//! busiest series (rate, p50, p99, samples at or above `--threshold`, a heat strip), a series'
//! detail (histogram bars, rate and p99 sparklines), and cardinality (series per name and tag
//! key, hot prefixes). `--once` prints one snapshot and exits.
//!
//! model.rs holds the state and what each key does; text.rs lays screens out as lines; tui.rs
//! draws them with ratatui and reads keys with crossterm.

mod model;
mod text;
mod tui;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use crate::api_client::{printable, refusal, ApiArgs, Endpoint, ANSWERS, UNREACHABLE_HINT};
use crate::contract::Live;
use model::Model;

/// `histd top`'s command line.
#[derive(Debug, clap::Args)]
pub struct TopArgs {
    #[command(flatten)]
    api: ApiArgs,
    /// Seconds between refreshes.
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
    /// Count timer samples at or above this value, and highlight series whose p99 reaches it.
    #[arg(long)]
    threshold: Option<f64>,
    /// Append a line to this file whenever a series' p99 crosses the threshold.
    #[arg(long)]
    log: Option<PathBuf>,
    /// Print one snapshot (two polls `--interval` apart, for the rates) and exit.
    #[arg(long)]
    once: bool,
    /// Columns of the `--once` output.
    #[arg(long, default_value_t = 120)]
    width: usize,
    /// Series rows asked for.
    #[arg(long, default_value_t = 200)]
    limit: usize,
    /// Sort column at start: name, rate, value, p50, p99, above.
    #[arg(long, default_value = "rate")]
    sort: String,
    /// A regex on series keys at start.
    #[arg(long)]
    filter: Option<String>,
    /// Start in the cardinality view (series per name and tag key, hot prefixes).
    #[arg(long)]
    cardinality: bool,
}

/// Runs `histd top`.
pub fn run(args: &TopArgs) -> anyhow::Result<()> {
    let url = args.api.endpoint().map_err(anyhow::Error::msg)?;
    let mut model = Model::new(args.threshold, args.limit.clamp(1, 1000));
    model.sort = model::Column::named(&args.sort)
        .with_context(|| format!("--sort {}: not name, rate, value, p50, p99 or above", args.sort))?;
    model.filter = args.filter.clone();
    if args.cardinality {
        model.view = model::View::Cardinality;
    }
    let interval = Duration::from_secs_f64(args.interval.clamp(0.1, 3600.0));
    let mut poller = Poller { url, log: args.log.clone() };
    if args.once {
        poller.poll(&mut model)?;
        std::thread::sleep(interval);
        poller.poll(&mut model)?;
        let screen: String = text::screen(&model, args.width).iter().map(|line| format!("{}\n", line.text)).collect();
        return Ok(crate::api_client::write_stdout(&screen)?);
    }
    tui::run(&mut model, &mut poller, interval)
}

/// Asks the daemon and feeds the model.
pub struct Poller {
    url: Endpoint,
    log: Option<PathBuf>,
}

impl Poller {
    /// One answer into the model; crossings appended to `--log`.
    pub fn poll(&mut self, model: &mut Model) -> anyhow::Result<()> {
        let live = self.fetch(&model.query())?;
        let crossed = model.update(live);
        if let (Some(path), false) = (&self.log, crossed.is_empty()) {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("--log {}", path.display()))?;
            crossed.iter().try_for_each(|line| writeln!(file, "{line}"))?;
        }
        Ok(())
    }

    fn fetch(&self, path: &str) -> anyhow::Result<Live> {
        let url = &self.url;
        let (status, body) =
            url.get(path, ANSWERS).with_context(|| format!("cannot reach histd at {url} ({UNREACHABLE_HINT})"))?;
        if let Some(refused) = refusal(status, &body) {
            anyhow::bail!("{url}{path}: {refused}");
        }
        if status != 200 {
            anyhow::bail!("{url}{path}: HTTP {status}: {}", printable(&body));
        }
        serde_json::from_str(&body).with_context(|| format!("not the live view from {url}: {}", printable(&body)))
    }
}
