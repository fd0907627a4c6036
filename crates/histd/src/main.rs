//! `histd`: a statsd-compatible metrics daemon that keeps whole histograms.
//!
//! Exit codes, for every subcommand: 0 on success (a clean stop), 1 for a failure at run time
//! (a port in use, a daemon `histd query` cannot reach), 2 for a bad command line, config or
//! expression.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use histd::{bench, config, query_cli, Config};

/// A statsd-compatible metrics daemon that keeps whole histograms.
#[derive(Debug, Parser)]
#[command(name = "histd", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the daemon (with no --config: UDP and TCP on 127.0.0.1:8125, management on
    /// 127.0.0.1:8126, the embedded store in ./histd-data with its HTTP API and web page on
    /// 127.0.0.1:8127).
    Run {
        /// An Etsy statsd config file (a JavaScript object literal, JSON5 or JSON).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Log level: error, warn, info, debug, trace (default info; `debug: true` in the
        /// config means debug).
        #[arg(long)]
        log_level: Option<tracing::Level>,
        /// Where the embedded store keeps its data (default ./histd-data, or `store.dataDir`).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        #[command(flatten)]
        ports: Ports,
    },
    /// Route statsd lines to several aggregators by series (reads Etsy's proxyConfig.js).
    Proxy {
        /// The proxy's config file (Etsy's proxyConfig.js keys: nodes, host, port, ...).
        #[arg(long, short)]
        config: PathBuf,
        /// Log level: error, warn, info, debug, trace (default info).
        #[arg(long)]
        log_level: Option<tracing::Level>,
    },
    /// Validate a config file and print the effective settings as JSON (exit 0: valid; 1:
    /// valid, with keys neither histd nor Etsy knows, each named with the one it likely meant;
    /// 2: invalid, the key or the line and column named).
    CheckConfig {
        /// The config file.
        file: PathBuf,
    },
    /// Print every config key histd knows, with its default and meaning (a markdown table).
    ConfigKeys,
    /// Evaluate an expression over the store, from a running histd or a data directory.
    Query(query_cli::QueryArgs),
    /// Ask a running histd whether it is up (`GET /health`; exit 0: up; 1: down or no answer;
    /// 2: arguments that name no API), for a container's or a supervisor's health check.
    Health(histd::health_cli::HealthArgs),
    /// The live terminal view of a running histd (`--once` for one snapshot on stdout).
    Top(histd::top::TopArgs),
    /// Load-test a statsd daemon (this one or any other) and report what arrived and at what cost.
    Bench(bench::BenchArgs),
    /// Read every block of a data directory's store and check it (checksums, bytes, SQLite's
    /// pages); list what is damaged, and the store's record of damage found before (exit 0:
    /// clean, nothing unacknowledged; 1: damage now or recorded; 2: no store).
    Scrub {
        /// The data directory (`store.dataDir`).
        #[arg(long, default_value = "histd-data")]
        data_dir: PathBuf,
        /// Acknowledge the record of damage: its entries are kept and no longer reported.
        #[arg(long)]
        acknowledge: bool,
    },
    /// Copy a store into one new file while its daemon runs (a consistent snapshot), then
    /// scrub the copy (exit 3: the store has damage, and the backup holds everything intact;
    /// 1: no backup).
    Backup {
        /// The file to write (it must not exist).
        destination: PathBuf,
        /// The data directory (`store.dataDir`).
        #[arg(long, default_value = "histd-data")]
        data_dir: PathBuf,
    },
    /// Put a backup back as a data directory's store, with its daemon stopped (the backup is
    /// scrubbed first; the store it replaces is kept as histd.db.replaced-<unix s>).
    Restore {
        /// The backup file (or --latest).
        #[arg(required_unless_present = "latest")]
        backup: Option<PathBuf>,
        /// The newest snapshot (`store.snapshots`, in DIR/snapshots) that scrubs whole.
        #[arg(long, conflicts_with = "backup")]
        latest: bool,
        /// The data directory (`store.dataDir`).
        #[arg(long, default_value = "histd-data")]
        data_dir: PathBuf,
    },
    /// Write the manual pages (histd.1 and one per subcommand) into a directory.
    Man {
        /// Where to write them.
        dir: PathBuf,
    },
    /// Print a shell's completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `histd run`'s ports, over the config's.
#[derive(Debug, Clone, clap::Args)]
struct Ports {
    /// The statsd port of every UDP and TCP listener (`port`, `servers[].port`).
    #[arg(long)]
    port: Option<u16>,
    /// The management port (`mgmt_port`).
    #[arg(long)]
    mgmt_port: Option<u16>,
    /// The HTTP port (`http_port`): the web page, /health, /metrics, the APIs; serves HTTP
    /// even when nothing in the config uses it.
    #[arg(long, conflicts_with = "no_http")]
    http_port: Option<u16>,
    /// Serve no HTTP at all (the store's web page and query API, /metrics and global.accept
    /// then go unserved).
    #[arg(long)]
    no_http: bool,
}

impl Ports {
    fn apply(&self, config: &mut Config) {
        if let Some(port) = self.port {
            config.set_listener_port(port);
        }
        if let Some(port) = self.mgmt_port {
            config.mgmt.set_port(port);
        }
        if let Some(port) = self.http_port {
            config.http_port.address.set_port(port);
            config.http_port.serve = true;
        }
        if self.no_http {
            config.http_port.serve = false;
        }
    }
}

fn main() -> ExitCode {
    histd::malloc::limit_arenas();
    let cli = Cli::parse();
    match cli.command {
        Command::CheckConfig { file } => check_config(&file),
        Command::ConfigKeys => {
            print!("{}", config::keys::markdown_table());
            ExitCode::SUCCESS
        }
        Command::Run { config, log_level, data_dir, ports } => run(config, log_level, data_dir, ports),
        Command::Proxy { config, log_level } => proxy(&config, log_level),
        Command::Query(args) => match query_cli::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(failure) => {
                eprintln!("histd query: {failure}");
                ExitCode::from(failure.exit_code())
            }
        },
        Command::Health(args) => histd::health_cli::run(&args),
        Command::Top(args) => match histd::top::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("histd top: {error:#}");
                ExitCode::FAILURE
            }
        },
        Command::Scrub { data_dir, acknowledge } => histd::upkeep_cli::scrub(&data_dir, acknowledge),
        Command::Backup { destination, data_dir } => histd::upkeep_cli::backup(&data_dir, &destination),
        Command::Restore { backup, latest: _, data_dir } => histd::upkeep_cli::restore(backup.as_deref(), &data_dir),
        Command::Man { dir } => match write_man_pages(&dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("histd man: {}: {error}", dir.display());
                ExitCode::FAILURE
            }
        },
        Command::Completions { shell } => {
            // Into memory first: clap_complete panics when its writer fails (`| head`).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), "histd", &mut script);
            match std::io::Write::write_all(&mut std::io::stdout(), &script) {
                Ok(()) => ExitCode::SUCCESS,
                Err(_) => ExitCode::FAILURE,
            }
        }
        Command::Bench(args) => match bench::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("histd bench: {error:#}");
                ExitCode::FAILURE
            }
        },
    }
}

/// histd.1, and histd-<subcommand>.1 for each subcommand shown in the help.
fn write_man_pages(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let command = <Cli as clap::CommandFactory>::command();
    let write = |name: &str, command: clap::Command| -> std::io::Result<()> {
        let mut page = Vec::new();
        clap_mangen::Man::new(command).render(&mut page)?;
        std::fs::write(dir.join(format!("{name}.1")), page)
    };
    for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        // A static name (clap is built without owned strings); one per page, once.
        let name: &'static str = Box::leak(format!("histd-{}", sub.get_name()).into_boxed_str());
        write(name, sub.clone().name(name))?;
    }
    write("histd", command)
}

fn check_config(file: &std::path::Path) -> ExitCode {
    match Config::from_file(file) {
        Ok(config) => {
            let problems = config.check_files();
            for problem in &problems {
                eprintln!("histd: {problem}");
            }
            if !problems.is_empty() {
                // The daemon would not start: no effective config on standard output, where
                // a script would take it for a valid one.
                return ExitCode::from(2);
            }
            println!("{}", serde_json::to_string_pretty(&config.effective()).unwrap_or_default());
            for warning in config.warnings() {
                eprintln!("histd: warning: {warning}");
            }
            for key in &config.ignored_keys {
                eprintln!("histd: `{key}`: {}", config::keys::why_unused(key));
            }
            match config.ignored_keys.iter().any(|key| config::keys::is_unknown(key)) {
                true => ExitCode::from(1), // a typo would otherwise pass unnoticed
                false => ExitCode::SUCCESS,
            }
        }
        Err(error) => {
            eprintln!("histd: invalid config: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn run(
    config_path: Option<PathBuf>,
    log_level: Option<tracing::Level>,
    data_dir: Option<PathBuf>,
    ports: Ports,
) -> ExitCode {
    // The command line's settings go over the file's at start and at every reload.
    let overrides = move |config: &mut Config| {
        if let Some(dir) = &data_dir {
            config.set_data_dir(dir.clone());
        }
        ports.apply(config);
    };
    let source = histd::reload::ConfigSource { path: config_path, overrides: Box::new(overrides) };
    let config = match source.load() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("histd: invalid config: {error:#}");
            return ExitCode::from(2);
        }
    };
    let level = log_level.unwrap_or(if config.debug { tracing::Level::DEBUG } else { tracing::Level::INFO });
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_ansi(false).with_max_level(level).init();
    for key in &config.ignored_keys {
        tracing::warn!(key, "config key ignored: {}", config::keys::why_unused(key));
    }
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
    histd::malloc::return_large_blocks_to_the_system();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(2).on_thread_start(yield_to_readers);
    serve_until_signal("histd", builder, |shutdown, hangups| histd::run(config, source, shutdown, hangups))
}

fn proxy(path: &std::path::Path, log_level: Option<tracing::Level>) -> ExitCode {
    let config = match histd::proxy::ProxyConfig::from_file(path) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("histd proxy: invalid config: {error:#}");
            return ExitCode::from(2);
        }
    };
    let level = log_level.unwrap_or(tracing::Level::INFO);
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_ansi(false).with_max_level(level).init();
    for key in &config.ignored_keys {
        tracing::warn!(key, "proxy config key ignored");
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(1);
    serve_until_signal("histd proxy", builder, |shutdown, _hangups| histd::proxy::run(config, shutdown))
}

/// Runs `serve` on a runtime from `builder` until SIGTERM or SIGINT: exit code 0 after a clean
/// stop, 1 when it failed (the error printed after `who`).
fn serve_until_signal<Serving>(
    who: &str,
    mut builder: tokio::runtime::Builder,
    serve: impl FnOnce(Shutdown, Hangups) -> Serving,
) -> ExitCode
where
    Serving: std::future::Future<Output = anyhow::Result<()>>,
{
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("{who}: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let (shutdown, hangups) =
            shutdown_signal().map_err(|e| anyhow::anyhow!("cannot install signal handlers: {e}"))?;
        serve(shutdown, hangups).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{who}: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the control plane (flush, sinks, admin, stream connections) at a lower priority than the
/// datagram readers, so that on a busy core a flush never takes time the readers need to keep the
/// socket buffers from overflowing.
fn yield_to_readers() {
    // SAFETY: setpriority on the calling thread (who = 0 with PRIO_PROCESS means "this thread"
    // on Linux) has no memory effects; a failure leaves the priority as it was.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 10);
    }
}

/// Completes on SIGTERM or SIGINT.
type Shutdown = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// One message per SIGHUP: reload the config.
type Hangups = tokio::sync::mpsc::UnboundedReceiver<()>;

/// Installs the handlers now (so that a signal arriving while histd starts up is not lost to
/// the default action) and returns a future that completes on SIGTERM or SIGINT, and the
/// SIGHUPs (a reload each; `histd proxy` does not reload and says so).
fn shutdown_signal() -> std::io::Result<(Shutdown, Hangups)> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    let (hangups, received) = tokio::sync::mpsc::unbounded_channel();
    let shutdown = Box::pin(async move {
        loop {
            tokio::select! {
                _ = term.recv() => return,
                _ = int.recv() => return,
                _ = hup.recv() => match hangups.send(()) {
                    Ok(()) => tracing::info!("SIGHUP: reloading the config"),
                    Err(_) => tracing::warn!("SIGHUP: this process does not reload its config; restart it to apply a new one"),
                },
            }
        }
    });
    Ok((shutdown, received))
}
