//! The graphite sink: Etsy's names and value formatting over carbon's plaintext or pickle
//! protocol, one persistent connection, and a bounded retry buffer so that a carbon restart loses nothing.

pub mod config;
mod encode;
mod pickle;
mod sink;
#[cfg(test)]
mod tests;
mod window;

pub use config::{GraphiteConfig, GraphiteProtocol};
pub use encode::{Chunked, GraphiteNames};

use serde_json::Value;

use super::{Backend, Context, Shared, Started};
use crate::config_reader::keys::KeyDoc;
use crate::config_reader::{ConfigError, Reader};
use crate::telemetry::EtsyStatus;

/// The graphite backend: Graphite/carbon, plaintext or pickle.
pub struct Graphite;

impl Backend for Graphite {
    const NAME: &'static str = "graphite";
    const KEYS: &'static [KeyDoc] = config::KEYS;
    const ETSY: EtsyStatus = EtsyStatus::Graphite;
    type Settings = GraphiteConfig;

    fn read(top: &Reader<'_>, _listed: bool) -> Result<GraphiteConfig, ConfigError> {
        config::graphite(top)
    }

    fn effective(settings: &GraphiteConfig) -> Value {
        settings.effective()
    }

    /// Its settings, `prefixStats` and `keyNameSanitize` (its queue is bounded by its own
    /// `retryBufferBytes`).
    type Identity = (GraphiteConfig, String, bool);

    fn identity(settings: &GraphiteConfig, shared: &Shared) -> Self::Identity {
        (settings.clone(), shared.prefix_stats.clone(), shared.key_name_sanitize)
    }

    /// `graphite.retryBufferBytes` bounds what graphite holds: flushes waiting and lines to
    /// resend.
    fn queue_limit(settings: &GraphiteConfig, _shared: &Shared) -> u64 {
        settings.retry_buffer_bytes
    }

    fn start(settings: &GraphiteConfig, context: Context) -> anyhow::Result<Started> {
        let names = GraphiteNames::new(settings, &context.shared.prefix_stats, context.shared.key_name_sanitize);
        Ok(Started::task(sink::spawn(settings.clone(), names, context)))
    }
}
