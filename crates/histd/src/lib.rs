//! histd as a library: [`start`] runs a whole daemon (listeners, readers, flusher, sinks,
//! management interface, HTTP API) on the current tokio runtime and returns its bound
//! addresses and a stop handle; [`run`] runs one until a shutdown future completes, as
//! `histd run` does. The integration tests start daemons in-process this way.
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! let config = histd::Config::from_text("{ port: 0, mgmt_port: 0, http_port: 0, backends: ['console'] }")?;
//! let running = histd::start(config).await?;
//! println!("statsd on {:?}", running.bound.listening.udp);
//! running.stop().await;
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

pub mod alerts;
pub mod api_client;
pub mod bench;
pub mod config;
mod config_reader;
pub mod contract;
#[doc(hidden)]
pub mod fuzzing;
pub mod health_cli;
pub mod malloc;
pub mod proxy;
pub mod query_cli;
#[doc(hidden)]
pub mod query_params;
pub mod top;
pub mod upkeep_cli;

mod accept;
mod access;
mod admin;
mod aggregation;
mod backends;
mod backoff;
mod clock;
mod cross_protocol;
mod daemon;
pub mod exposition;
mod flush;
mod global;
mod http;
mod http_client;
mod ingest;
mod kafka_config;
mod placement;
pub mod printable;
pub mod reload;
use fleet::secret_file;
mod sinks;
mod telemetry;
mod timefmt;
mod tls;

pub use config::Config;

/// The HTTP API's answers without the server (what every handler runs), for tests and fuzzing.
pub mod api {
    pub use crate::http::{answer, Context, Failure, Route, StoreAnswer};
    pub use crate::query_params as params;
}
/// The prometheus backend's parts without the daemon (the cumulative registry, the
/// remote-write encoder, the exposition), for benchmarks.
pub mod prometheus {
    pub use crate::sinks::prometheus::{config, encode, exposition, mapping, samples, state};
}
/// The otlp backend's parts without the daemon: what it reads from a receiver (for the fuzz
/// target) and its encoder (for benchmarks).
pub mod otlp {
    pub use crate::http_client::Answer;
    pub use crate::sinks::otlp::{config, encode, judge, partial_success, state};
}
/// The circonus, influx and file backends' encoders (for benchmarks) and InfluxDB's answers
/// as the influx backend reads them (for fuzzing).
pub mod exports {
    pub use crate::sinks::circonus::{config as circonus_config, encode as circonus};
    pub use crate::sinks::file::{config as file_config, encode as file};
    pub use crate::sinks::influx::encode as influx;
    pub use crate::sinks::influx::{judge as influx_judge, partial_write as influx_partial_write};
}
pub use daemon::{run, start, start_reloadable, Bound, Listening, Running};
