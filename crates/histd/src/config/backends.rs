//! `backends`: every backend histd has, one line each in [`LIST`], and the entries of a
//! config's `backends` resolved against it. A backend is a type in its folder under `sinks/`
//! (it implements [`crate::sinks::Backend`]); its line here names the type and the field of
//! [`Config`] that keeps its settings.

use std::fmt;
use std::marker::PhantomData;

use serde_json::Value;

use super::Config;
use crate::config_reader::keys::KeyDoc;
use crate::config_reader::{ConfigError, Reader};
use crate::sinks::{circonus, console, file, forward, graphite, otlp, prometheus, repeater, store};
use crate::sinks::{Backend as Kind, Context, Started};
use crate::telemetry::EtsyStatus;

/// Every backend, in the order `backends`' error lists them.
static LIST: &[&dyn Listed] = &[
    &Entry::<graphite::Graphite>::new(|config| &config.graphite),
    &Entry::<console::Console>::new(|config| &config.console),
    &Entry::<repeater::Repeater>::new(|config| &config.repeater),
    &Entry::<store::Store>::new(|config| &config.store),
    &Entry::<prometheus::Prometheus>::new(|config| &config.prometheus),
    &Entry::<forward::Forward>::new(|config| &config.forward),
    &Entry::<otlp::Otlp>::new(|config| &config.otlp),
    &Entry::<file::File>::new(|config| &config.file),
    &Entry::<circonus::Circonus>::new(|config| &config.circonus),
];

/// A backend flushes go to: one of [`LIST`].
#[derive(Clone, Copy)]
pub struct Backend(&'static dyn Listed);

impl Backend {
    /// The backend named `name` (`graphite`), if histd has one.
    pub fn named(name: &str) -> Option<Backend> {
        LIST.iter().find(|listed| listed.name() == name).map(|listed| Backend(*listed))
    }

    /// Its name in `backends` (`graphite`).
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// How Etsy's `stats` names its status lines.
    pub fn etsy(self) -> EtsyStatus {
        self.0.etsy()
    }

    /// Whether it needs the HTTP port.
    pub fn serves_http(self) -> bool {
        self.0.serves_http()
    }

    /// What of `config` its sink starts with: a reload restarts it when this changes.
    pub fn identity(self, config: &Config) -> Value {
        self.0.identity(config)
    }

    /// The bytes its queue of flushes may hold.
    pub fn queue_limit(self, config: &Config) -> u64 {
        self.0.queue_limit(config)
    }

    /// Starts its sink with `config`'s settings.
    pub fn start(self, config: &Config, context: Context) -> anyhow::Result<Started> {
        self.0.start(config, context)
    }
}

impl PartialEq for Backend {
    fn eq(&self, other: &Backend) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Backend {}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A backend type with the field of [`Config`] that keeps its settings.
struct Entry<B: Kind> {
    settings: fn(&Config) -> &B::Settings,
    kind: PhantomData<fn() -> B>,
}

impl<B: Kind> Entry<B> {
    const fn new(settings: fn(&Config) -> &B::Settings) -> Entry<B> {
        Entry { settings, kind: PhantomData }
    }
}

/// A backend without its types, as [`LIST`] holds it.
trait Listed: Sync {
    fn name(&self) -> &'static str;
    fn keys(&self) -> &'static [KeyDoc];
    fn etsy(&self) -> EtsyStatus;
    fn serves_http(&self) -> bool;
    fn identity(&self, config: &Config) -> Value;
    fn queue_limit(&self, config: &Config) -> u64;
    fn start(&self, config: &Config, context: Context) -> anyhow::Result<Started>;
}

impl<B: Kind> Listed for Entry<B> {
    fn name(&self) -> &'static str {
        B::NAME
    }

    fn keys(&self) -> &'static [KeyDoc] {
        B::KEYS
    }

    fn etsy(&self) -> EtsyStatus {
        B::ETSY
    }

    fn serves_http(&self) -> bool {
        B::SERVES_HTTP
    }

    fn identity(&self, config: &Config) -> Value {
        B::identity((self.settings)(config), &config.shared())
    }

    fn queue_limit(&self, config: &Config) -> u64 {
        B::queue_limit((self.settings)(config), &config.shared())
    }

    fn start(&self, config: &Config, context: Context) -> anyhow::Result<Started> {
        B::start((self.settings)(config), context)
    }
}

/// Every backend's keys, in [`LIST`]'s order.
pub fn keys() -> impl Iterator<Item = &'static KeyDoc> {
    LIST.iter().flat_map(|listed| listed.keys())
}

/// `backends`: Etsy module paths (`./backends/graphite`) or short names. Default: graphite.
pub fn backends(top: &Reader<'_>) -> Result<Vec<Backend>, ConfigError> {
    if top.raw("backends").is_none() {
        return Ok(vec![Backend(LIST[0])]);
    }
    let mut backends = Vec::new();
    for (index, name) in top.array("backends")?.iter().enumerate() {
        let key = format!("backends[{index}]");
        let text = name
            .as_str()
            .ok_or_else(|| ConfigError { key: key.clone(), message: format!("expected a backend name, got {name}") })?;
        let name = text.trim_start_matches("./backends/");
        let Some(backend) = Backend::named(name) else {
            let known: Vec<&str> = LIST.iter().map(|listed| listed.name()).collect();
            let message = format!("unknown backend '{name}' (histd has {})", known.join(", "));
            return Err(ConfigError { key, message });
        };
        if !backends.contains(&backend) {
            backends.push(backend);
        }
    }
    Ok(backends)
}
