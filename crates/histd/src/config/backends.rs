//! `backends`: every backend histd has, one line each in [`LIST`], and the entries of a
//! config's `backends` resolved against it. A backend is a type in its folder under `sinks/`
//! (it implements [`crate::sinks::Backend`]: its name, its keys, how it reads and prints its
//! section, how its sink starts); its line here is all the rest of histd needs. Every
//! backend's settings are read, listed or not (so a misspelt key is named either way), and
//! kept in [`BackendSettings`], found by the backend's type.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;

use serde_json::{Map, Value};

use super::Config;
use crate::config_reader::keys::KeyDoc;
use crate::config_reader::{ConfigError, Reader};
use crate::sinks::{circonus, console, file, forward, graphite, otlp, prometheus, repeater, store};
use crate::sinks::{Backend as Kind, Context, Offered, Reload, Started};
use crate::telemetry::EtsyStatus;

/// Every backend, in the order `backends`' error lists them.
static LIST: &[&dyn Listed] = &[
    &Entry::<graphite::Graphite>::NEW,
    &Entry::<console::Console>::NEW,
    &Entry::<repeater::Repeater>::NEW,
    &Entry::<store::Store>::NEW,
    &Entry::<prometheus::Prometheus>::NEW,
    &Entry::<forward::Forward>::NEW,
    &Entry::<otlp::Otlp>::NEW,
    &Entry::<file::File>::NEW,
    &Entry::<circonus::Circonus>::NEW,
    &Entry::<crate::sinks::influx::Influx>::NEW,
];

/// Every backend's settings, as its own code read them, found by its type.
#[derive(Clone)]
pub struct BackendSettings(Vec<(&'static str, Box<dyn Held>)>);

impl BackendSettings {
    /// Reads every backend's section; `listed` tells whether `backends` names a backend.
    pub(super) fn read(top: &Reader<'_>, listed: impl Fn(&str) -> bool) -> Result<BackendSettings, ConfigError> {
        let read = LIST.iter().map(|entry| Ok((entry.name(), entry.read(top, listed(entry.name()))?)));
        Ok(BackendSettings(read.collect::<Result<_, ConfigError>>()?))
    }

    /// The settings of backend `B`.
    pub fn of<B: Kind>(&self) -> &B::Settings {
        let held = self.0.iter().find(|(name, _)| *name == B::NAME).map(|(_, held)| held.as_any());
        held.and_then(|any| any.downcast_ref())
            .unwrap_or_else(|| unreachable!("{} is in LIST: its settings are read", B::NAME))
    }

    /// The settings of backend `B`, to change (`--data-dir`).
    pub fn of_mut<B: Kind>(&mut self) -> &mut B::Settings {
        let held = self.0.iter_mut().find(|(name, _)| *name == B::NAME).map(|(_, held)| held.as_any_mut());
        held.and_then(|any| any.downcast_mut())
            .unwrap_or_else(|| unreachable!("{} is in LIST: its settings are read", B::NAME))
    }

    /// Each backend's settings as `check-config` prints them, under its name.
    pub fn effective(&self) -> Map<String, Value> {
        LIST.iter().map(|entry| (entry.name().to_string(), entry.effective(self))).collect()
    }

    /// What the backends in `listed` find wrong with the files their settings name.
    pub fn check_files(&self, listed: &[Backend]) -> Vec<String> {
        listed.iter().flat_map(|backend| backend.0.check_files(self)).collect()
    }

    /// Every backend's name, the ones a reload applies by restarting their sinks.
    pub fn names() -> impl Iterator<Item = &'static str> {
        LIST.iter().map(|entry| entry.name())
    }
}

impl fmt::Debug for BackendSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.0.iter().map(|(name, held)| (name, held.as_debug()))).finish()
    }
}

/// One backend's settings, their type put aside.
trait Held: Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn as_debug(&self) -> &dyn fmt::Debug;
    fn boxed(&self) -> Box<dyn Held>;
}

impl<T: Clone + fmt::Debug + Send + Sync + 'static> Held for T {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn as_debug(&self) -> &dyn fmt::Debug {
        self
    }

    fn boxed(&self) -> Box<dyn Held> {
        Box::new(self.clone())
    }
}

impl Clone for Box<dyn Held> {
    fn clone(&self) -> Self {
        self.boxed()
    }
}

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

    /// Its keys (`config/keys.rs`).
    pub fn keys(self) -> &'static [KeyDoc] {
        self.0.keys()
    }

    /// Whether it needs the HTTP port.
    pub fn serves_http(self) -> bool {
        self.0.serves_http()
    }

    /// What of `config` its sink starts with: a reload acts when this changes.
    pub fn identity(self, config: &Config) -> SinkIdentity {
        self.0.identity(config)
    }

    /// What a reload does with its sink started with `old` when `config`'s identity differs
    /// (`running`: what the sink offered).
    pub fn reload(self, old: &SinkIdentity, config: &Config, running: &Offered) -> Reload {
        self.0.reload(old, config, running)
    }

    /// The bytes its queue of flushes may hold.
    pub fn queue_limit(self, config: &Config) -> u64 {
        self.0.queue_limit(config)
    }

    /// Starts its sink with the settings `identity` was made of.
    pub fn start(self, identity: &SinkIdentity, context: Context) -> anyhow::Result<Started> {
        self.0.start(identity, context)
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

/// A backend type, as [`LIST`] names it.
struct Entry<B: Kind>(PhantomData<fn() -> B>);

impl<B: Kind> Entry<B> {
    const NEW: Entry<B> = Entry(PhantomData);
}

/// A backend without its types, as [`LIST`] holds it.
trait Listed: Sync {
    fn name(&self) -> &'static str;
    fn read(&self, top: &Reader<'_>, listed: bool) -> Result<Box<dyn Held>, ConfigError>;
    fn effective(&self, settings: &BackendSettings) -> Value;
    fn check_files(&self, settings: &BackendSettings) -> Vec<String>;
    fn keys(&self) -> &'static [KeyDoc];
    fn etsy(&self) -> EtsyStatus;
    fn serves_http(&self) -> bool;
    fn identity(&self, config: &Config) -> SinkIdentity;
    fn reload(&self, old: &SinkIdentity, config: &Config, running: &Offered) -> Reload;
    fn queue_limit(&self, config: &Config) -> u64;
    fn start(&self, identity: &SinkIdentity, context: Context) -> anyhow::Result<Started>;
}

impl<B: Kind> Listed for Entry<B> {
    fn name(&self) -> &'static str {
        B::NAME
    }

    fn keys(&self) -> &'static [KeyDoc] {
        B::KEYS
    }

    fn read(&self, top: &Reader<'_>, listed: bool) -> Result<Box<dyn Held>, ConfigError> {
        Ok(Box::new(B::read(top, listed)?))
    }

    fn effective(&self, settings: &BackendSettings) -> Value {
        B::effective(settings.of::<B>())
    }

    fn check_files(&self, settings: &BackendSettings) -> Vec<String> {
        B::check_files(settings.of::<B>())
    }

    fn etsy(&self) -> EtsyStatus {
        B::ETSY
    }

    fn serves_http(&self) -> bool {
        B::SERVES_HTTP
    }

    fn identity(&self, config: &Config) -> SinkIdentity {
        let settings = config.backend_settings.of::<B>().clone();
        let identity = B::identity(&settings, &config.shared());
        SinkIdentity { held: std::sync::Arc::new(Was::<B> { identity, settings }), same: same_as::<B> }
    }

    fn reload(&self, old: &SinkIdentity, config: &Config, running: &Offered) -> Reload {
        match old.held.downcast_ref::<Was<B>>() {
            Some(was) => B::reload(&was.settings, config.backend_settings.of::<B>(), running),
            None => Reload::Restart,
        }
    }

    fn queue_limit(&self, config: &Config) -> u64 {
        B::queue_limit(config.backend_settings.of::<B>(), &config.shared())
    }

    fn start(&self, identity: &SinkIdentity, context: Context) -> anyhow::Result<Started> {
        match identity.held.downcast_ref::<Was<B>>() {
            Some(was) => B::start(&was.settings, context),
            None => Err(anyhow::anyhow!("{}: started with another backend's settings", B::NAME)),
        }
    }
}

/// A sink's identity ([`Kind::Identity`]) with the settings it was started with, its type put
/// aside: a reload compares two of one backend. Never printed (it holds credentials).
#[derive(Clone)]
pub struct SinkIdentity {
    held: std::sync::Arc<dyn Any + Send + Sync>,
    same: fn(&SinkIdentity, &SinkIdentity) -> bool,
}

impl PartialEq for SinkIdentity {
    fn eq(&self, other: &SinkIdentity) -> bool {
        (self.same)(self, other)
    }
}

impl fmt::Debug for SinkIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SinkIdentity(..)")
    }
}

/// What a sink of backend `B` was started with.
struct Was<B: Kind> {
    identity: B::Identity,
    settings: B::Settings,
}

/// Whether two identities are of backend `B` and equal.
fn same_as<B: Kind>(a: &SinkIdentity, b: &SinkIdentity) -> bool {
    match (a.held.downcast_ref::<Was<B>>(), b.held.downcast_ref::<Was<B>>()) {
        (Some(a), Some(b)) => a.identity == b.identity,
        _ => false,
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
            let meant = known
                .iter()
                .map(|known| (crate::config_reader::edit_distance(&name.to_ascii_lowercase(), known), known))
                .filter(|(distance, _)| *distance <= 2)
                .min_by_key(|(distance, _)| *distance)
                .map_or(String::new(), |(_, known)| format!("did you mean '{known}'? "));
            let message = format!("unknown backend '{name}' ({meant}histd has {})", known.join(", "));
            return Err(ConfigError { key, message });
        };
        if !backends.contains(&backend) {
            backends.push(backend);
        }
    }
    Ok(backends)
}
