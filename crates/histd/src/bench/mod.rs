//! `histd bench`: the load generator to run against any statsd. It sends a workload (lines
//! per datagram, name cardinality, type mix) at target rates or as fast as it can, then reads
//! the daemon's own counters to report what arrived, what was lost and what it cost the daemon.
//! `--baseline` sends to a bare in-process receiver instead: the ceiling of the machine.

mod baseline;
mod daemon_stats;
mod send;
mod workload;

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
    /// The baseline receiver's socket buffer, bytes.
    #[arg(long, default_value_t = 16 * 1024 * 1024)]
    baseline_buffer: usize,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
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
    let pool = workload::pool(args.names, args.lines, args.mix);
    let receiver = if args.baseline { "baseline receiver" } else { "daemon" };
    println!(
        "workload: {} lines/datagram, {} names, {:?}; {} s per run; receiver: {receiver}",
        args.lines, args.names, args.mix, args.duration
    );
    println!(
        "{:>10} {:>10} {:>12} {:>9} {:>12} {:>12} {:>14} {:>12}",
        "target", "sent/s", "received", "loss %", "kernel drops", "ns/metric", "µs/datagram", "RSS MB peak"
    );
    for rate in &args.rate {
        let rate = parse_rate(rate)?;
        let outcome = if args.baseline { run_baseline(args, &pool, rate)? } else { run_daemon(args, &pool, rate)? };
        print_outcome(rate, &outcome, args.lines);
    }
    Ok(())
}

fn run_daemon(args: &BenchArgs, pool: &workload::Pool, rate: f64) -> anyhow::Result<Outcome> {
    let before =
        daemon_stats::settled(args.admin).map_err(|e| anyhow::anyhow!("cannot read stats from {}: {e}", args.admin))?;
    let cpu_before = args.pid.and_then(daemon_stats::cpu_ns);
    let sent = send::send(args.target, pool, rate, Duration::from_secs_f64(args.duration), !args.quiet)?;
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

fn run_baseline(args: &BenchArgs, pool: &workload::Pool, rate: f64) -> anyhow::Result<Outcome> {
    let mut receiver = Baseline::start(args.baseline_buffer, args.baseline_cpu)?;
    let sent = send::send(receiver.address, pool, rate, Duration::from_secs_f64(args.duration), !args.quiet)?;
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

fn print_outcome(rate: f64, outcome: &Outcome, lines: usize) {
    let sent = outcome.sent;
    let loss = 100.0 * (sent.lines.saturating_sub(outcome.received)) as f64 / sent.lines.max(1) as f64;
    let per_metric = outcome.cpu_ns.map(|ns| ns as f64 / outcome.received.max(1) as f64);
    let per_datagram = per_metric.map(|ns| ns * lines as f64 / 1000.0);
    let target = if rate == 0.0 { "max".to_string() } else { human(rate) };
    let option = |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    println!(
        "{:>10} {:>10} {:>12} {:>9.3} {:>12} {:>12} {:>14} {:>12}",
        target,
        human(sent.lines as f64 / sent.elapsed.as_secs_f64()),
        outcome.received,
        loss,
        outcome.kernel_drops,
        option(per_metric, 1),
        option(per_datagram, 2),
        option(outcome.memory.map(|(_, peak)| peak as f64 / 1e6), 1),
    );
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
