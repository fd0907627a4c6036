//! `histd bench`: the load generator to run against any statsd. It sends a workload (lines
//! per datagram, name cardinality, type mix) at target rates or as fast as it can, then reads
//! the daemon's own counters to report what arrived, what was lost and what it cost the daemon.
//! `--baseline` sends to a bare in-process receiver instead: the ceiling of the machine.
//! `--count kernel` measures any daemon (Brubeck, statsite, Etsy statsd) by the kernel's own
//! counts for its port instead of its management port.

mod baseline;
pub(crate) mod daemon_stats;
mod send;
pub(crate) mod socket_stats;
mod workload;
pub use workload::NAME_PREFIX;

use std::net::SocketAddr;
use std::time::Duration;

use baseline::Baseline;
use send::human;
pub use workload::Mix;

/// The arguments of `histd bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Where the daemon receives statsd over UDP.
    #[arg(long, default_value = "127.0.0.1:8125")]
    target: SocketAddr,
    /// The daemon's management port, read before and after each run.
    #[arg(long, default_value = "127.0.0.1:8126")]
    admin: SocketAddr,
    /// The daemon's process id, for its CPU time and memory (local daemons only).
    #[arg(long)]
    pid: Option<u32>,
    /// Lines per datagram.
    #[arg(long, default_value_t = 25)]
    lines: usize,
    /// Distinct metric names.
    #[arg(long, default_value_t = 1000)]
    names: usize,
    /// Line types.
    #[arg(long, value_enum, default_value_t = Mix::Counters)]
    mix: Mix,
    /// How many different orders the names are sent in, one after the other (1: the same
    /// order every pass, which flatters a daemon's caches: its next name is always the one
    /// that came next before).
    #[arg(long, default_value_t = 1)]
    orders: usize,
    /// Target rates in lines per second, comma separated (`500k,1M,5M`); 0 means as fast as
    /// possible. One run each.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    rate: Vec<String>,
    /// Seconds per run.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Send to a bare receiver (recvmmsg, count lines) started here instead of a daemon.
    #[arg(long)]
    baseline: bool,
    /// Pin the baseline receiver to this CPU.
    #[arg(long)]
    baseline_cpu: Option<usize>,
    /// The baseline receiver's socket buffer, bytes, as asked (SO_RCVBUFFORCE; the kernel
    /// doubles it: 16 MiB granted by default).
    #[arg(long, default_value_t = 8 * 1024 * 1024)]
    baseline_buffer: usize,
    /// Where the received and dropped counts come from: the daemon's management `stats`
    /// (histd, Etsy statsd), or the kernel's counts for the target port (`/proc/net/udp`:
    /// datagrams dropped on a full receive buffer), which any daemon on this machine has.
    #[arg(long, value_enum, default_value_t = Count::Daemon)]
    count: Count,
    /// Print the results as markdown table rows (for BENCHMARKS.md).
    #[arg(long)]
    markdown: bool,
    /// No progress line (there is none either when standard error is not a terminal).
    #[arg(long)]
    quiet: bool,
}

/// Where a run's received and dropped counts come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Count {
    /// The management port's `stats` (`messages.metrics_received`, `messages.kernel_drops`).
    Daemon,
    /// The kernel: drops and queued bytes of every UDP socket bound to the target port.
    Kernel,
}

/// One run's outcome.
struct Outcome {
    sent: send::Sent,
    received: u64,
    kernel_drops: u64,
    cpu_ns: Option<u64>,
    memory: Option<(u64, u64)>,
}

/// Runs every requested rate and prints a line for each.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let pool = workload::pool(args.names, args.lines, args.mix, args.orders);
    let receiver = if args.baseline { "baseline receiver" } else { "daemon" };
    if !args.markdown {
        println!(
            "workload: {} lines/datagram, {} names in {} order(s), {:?}; {} s per run; receiver: {receiver}",
            args.lines, args.names, args.orders, args.mix, args.duration
        );
    }
    print_header(args.markdown);
    for rate in &args.rate {
        let rate = parse_rate(rate)?;
        let outcome = match (args.baseline, args.count) {
            (true, _) => run_baseline(args, &pool, rate)?,
            (false, Count::Daemon) => run_daemon(args, &pool, rate)?,
            (false, Count::Kernel) => run_counted_by_kernel(args, &pool, rate)?,
        };
        print_outcome(rate, &outcome, args.lines, args.markdown);
    }
    Ok(())
}

fn run_daemon(args: &BenchArgs, pool: &workload::Pool, rate: f64) -> anyhow::Result<Outcome> {
    let before =
        daemon_stats::settled(args.admin).map_err(|e| anyhow::anyhow!("cannot read stats from {}: {e}", args.admin))?;
    let cpu_before = args.pid.and_then(daemon_stats::cpu_ns);
    let sent = send::send(args.target, pool, rate, Duration::from_secs_f64(args.duration), show_progress(args))?;
    let after = daemon_stats::settled(args.admin)?;
    let cpu_after = args.pid.and_then(daemon_stats::cpu_ns);
    Ok(Outcome {
        sent,
        received: after.lines - before.lines,
        kernel_drops: after.kernel_drops - before.kernel_drops,
        cpu_ns: cpu_before.zip(cpu_after).map(|(b, a)| a - b),
        memory: args.pid.and_then(daemon_stats::memory),
    })
}

/// Any daemon: lines received are the lines sent less the datagrams the kernel dropped on the
/// target port (every datagram of a workload holds the same number of lines); the run ends
/// when the daemon has read everything queued.
fn run_counted_by_kernel(args: &BenchArgs, pool: &workload::Pool, rate: f64) -> anyhow::Result<Outcome> {
    let port = args.target.port();
    let before = socket_stats::drained(port)?;
    let cpu_before = args.pid.and_then(daemon_stats::cpu_ns);
    let sent = send::send(args.target, pool, rate, Duration::from_secs_f64(args.duration), show_progress(args))?;
    let after = socket_stats::drained(port)?;
    let cpu_after = args.pid.and_then(daemon_stats::cpu_ns);
    anyhow::ensure!(
        after.sockets == before.sockets,
        "the sockets on port {port} changed during the run ({} then {}): did the daemon restart?",
        before.sockets,
        after.sockets
    );
    let dropped = after.drops.saturating_sub(before.drops);
    Ok(Outcome {
        sent,
        received: sent.lines.saturating_sub(dropped * pool.lines as u64),
        kernel_drops: dropped,
        cpu_ns: cpu_before.zip(cpu_after).map(|(b, a)| a - b),
        memory: args.pid.and_then(daemon_stats::memory),
    })
}

fn run_baseline(args: &BenchArgs, pool: &workload::Pool, rate: f64) -> anyhow::Result<Outcome> {
    let mut receiver = Baseline::start(args.baseline_buffer, args.baseline_cpu)?;
    let sent = send::send(receiver.address, pool, rate, Duration::from_secs_f64(args.duration), show_progress(args))?;
    let mut last = u64::MAX;
    while receiver.lines.load(std::sync::atomic::Ordering::Relaxed) != last {
        last = receiver.lines.load(std::sync::atomic::Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(200));
    }
    receiver.stop();
    let load = |value: &std::sync::atomic::AtomicU64| value.load(std::sync::atomic::Ordering::Relaxed);
    Ok(Outcome {
        sent,
        received: load(&receiver.lines),
        kernel_drops: load(&receiver.kernel_drops),
        cpu_ns: Some(load(&receiver.cpu_ns)),
        memory: None,
    })
}

const COLUMNS: [&str; 8] =
    ["target", "sent/s", "received", "loss %", "kernel drops", "ns/metric", "µs/datagram", "RSS MB peak"];

fn print_header(markdown: bool) {
    if markdown {
        println!("| {} |", COLUMNS.join(" | "));
        println!("|{}", "---|".repeat(COLUMNS.len()));
    } else {
        let [a, b, c, d, e, f, g, h] = COLUMNS;
        println!("{a:>10} {b:>10} {c:>12} {d:>9} {e:>12} {f:>12} {g:>14} {h:>12}");
    }
}

fn print_outcome(rate: f64, outcome: &Outcome, lines: usize, markdown: bool) {
    let sent = outcome.sent;
    let loss = 100.0 * (sent.lines.saturating_sub(outcome.received)) as f64 / sent.lines.max(1) as f64;
    let per_metric = outcome.cpu_ns.map(|ns| ns as f64 / outcome.received.max(1) as f64);
    let per_datagram = per_metric.map(|ns| ns * lines as f64 / 1000.0);
    let target = if rate == 0.0 { "max".to_string() } else { human(rate) };
    let option = |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    let cells = [
        target,
        human(sent.lines as f64 / sent.elapsed.as_secs_f64()),
        outcome.received.to_string(),
        format!("{loss:.3}"),
        outcome.kernel_drops.to_string(),
        option(per_metric, 1),
        option(per_datagram, 2),
        option(outcome.memory.map(|(_, peak)| peak as f64 / 1e6), 1),
    ];
    if markdown {
        println!("| {} |", cells.join(" | "));
    } else {
        let [a, b, c, d, e, f, g, h] = cells;
        println!("{a:>10} {b:>10} {c:>12} {d:>9} {e:>12} {f:>12} {g:>14} {h:>12}");
    }
}

/// `500k`, `2.5M`, `1000`, `0`.
fn parse_rate(text: &str) -> anyhow::Result<f64> {
    let text = text.trim();
    let (number, scale) = match text.chars().last() {
        Some('k' | 'K') => (&text[..text.len() - 1], 1e3),
        Some('m' | 'M') => (&text[..text.len() - 1], 1e6),
        _ => (text, 1.0),
    };
    let value: f64 = number.parse().map_err(|_| anyhow::anyhow!("--rate: '{text}' is not a rate like 500k or 2M"))?;
    Ok(value * scale)
}

/// A progress line only for a person watching: not with `--quiet`, not into a pipe or a file.
fn show_progress(args: &BenchArgs) -> bool {
    use std::io::IsTerminal;
    !args.quiet && std::io::stderr().is_terminal()
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_rates() {
        for (text, want) in [("0", 0.0), ("500k", 5e5), ("2.5M", 2.5e6), ("1000", 1e3)] {
            assert_eq!(super::parse_rate(text).unwrap(), want);
        }
        assert!(super::parse_rate("fast").is_err());
    }
}
