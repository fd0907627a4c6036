//! Typed reads of one object of the raw config, with errors that name the key. Every key a
//! reader looks at is recorded in the [`KeysRead`] its root was given, so the keys nobody read
//! (typos, other daemons' keys) are derived from the reads themselves.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

use serde_json::{Map, Value};

/// A config value that is missing where required, or of the wrong shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// The key, as a path (`graphite.globalPrefix`, `servers[1].port`).
    pub key: String,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "config key `{}`: {}", self.key, self.message)
    }
}

impl std::error::Error for ConfigError {}

/// The full paths (`graphite.globalPrefix`, `servers[1].port`) of every key read from one
/// config, present or not.
#[derive(Debug, Clone, Default)]
pub struct KeysRead(Rc<RefCell<BTreeSet<String>>>);

impl KeysRead {
    fn record(&self, path: String) {
        self.0.borrow_mut().insert(path);
    }

    /// Whether `path` was read.
    pub fn contains(&self, path: &str) -> bool {
        self.0.borrow().contains(path)
    }

    /// Whether some key below `path` (an object or an array element) was read.
    pub fn any_below(&self, path: &str) -> bool {
        let prefix = format!("{path}.");
        self.0.borrow().range(prefix.clone()..).next().is_some_and(|key| key.starts_with(&prefix))
    }

    /// Every path read, in order.
    #[cfg(test)]
    pub fn paths(&self) -> Vec<String> {
        self.0.borrow().iter().cloned().collect()
    }
}

/// Reads keys of one JSON object; `path` prefixes the keys named in errors.
pub struct Reader<'a> {
    object: &'a Map<String, Value>,
    path: String,
    read: KeysRead,
}

static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

impl<'a> Reader<'a> {
    /// Reads the config's top object, recording every key it (or a reader made from it) reads.
    pub fn root(object: &'a Map<String, Value>, read: &KeysRead) -> Self {
        Reader { object, path: String::new(), read: read.clone() }
    }

    /// Reads `object`, an element of one of this reader's arrays, whose keys are named
    /// `path.key` (`servers[1].port`).
    pub fn element(&self, object: &'a Map<String, Value>, path: impl Into<String>) -> Reader<'a> {
        Reader { object, path: path.into(), read: self.read.clone() }
    }

    /// The full name of `key`, for errors.
    pub fn key_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// An error about `key`.
    pub fn error(&self, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError { key: self.key_path(key), message: message.into() }
    }

    /// The raw value of `key`; `null` counts as absent.
    pub fn raw(&self, key: &str) -> Option<&'a Value> {
        self.read.record(self.key_path(key));
        self.object.get(key).filter(|value| !value.is_null())
    }

    /// A nested object (absent = empty).
    pub fn object(&self, key: &str) -> Result<Reader<'a>, ConfigError> {
        match self.raw(key) {
            None => Ok(self.element(&EMPTY, self.key_path(key))),
            Some(Value::Object(object)) => Ok(self.element(object, self.key_path(key))),
            Some(other) => Err(self.error(key, format!("expected an object, got {other}"))),
        }
    }

    /// A boolean.
    pub fn bool(&self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.raw(key) {
            None => Ok(default),
            Some(Value::Bool(value)) => Ok(*value),
            Some(other) => Err(self.error(key, format!("expected true or false, got {other}"))),
        }
    }

    /// A number; numeric strings are read as JavaScript's `Number()` reads them.
    pub fn number(&self, key: &str) -> Result<Option<f64>, ConfigError> {
        self.raw(key)
            .map(|value| number_of(value).ok_or_else(|| self.error(key, format!("expected a number, got {value}"))))
            .transpose()
    }

    /// A string.
    pub fn string(&self, key: &str) -> Result<Option<String>, ConfigError> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(other) => Err(self.error(key, format!("expected a string, got {other}"))),
        }
    }

    /// A whole number of at least `least`, `default` when absent.
    pub fn whole(&self, key: &str, default: u64, least: u64) -> Result<u64, ConfigError> {
        match self.number(key)? {
            None => Ok(default),
            Some(n) if n.fract() == 0.0 && n >= least as f64 && n < 1e18 => Ok(n as u64),
            Some(n) => Err(self.error(key, format!("expected a whole number of at least {least}, got {n}"))),
        }
    }

    /// Milliseconds from 1 to a day, `default` when absent.
    pub fn milliseconds(&self, key: &str, default: std::time::Duration) -> Result<std::time::Duration, ConfigError> {
        match self.number(key)? {
            None => Ok(default),
            Some(ms) if (1.0..=86_400_000.0).contains(&ms) => Ok(std::time::Duration::from_millis(ms as u64)),
            Some(ms) => Err(self.error(key, format!("expected milliseconds from 1 to 86400000, got {ms}"))),
        }
    }

    /// A TCP/UDP port number.
    pub fn port(&self, key: &str, default: u16) -> Result<u16, ConfigError> {
        match self.number(key)? {
            None => Ok(default),
            Some(port) if port.fract() == 0.0 && (0.0..=65535.0).contains(&port) => Ok(port as u16),
            Some(port) => Err(self.error(key, format!("expected a port from 0 to 65535, got {port}"))),
        }
    }

    /// An array (absent = empty).
    pub fn array(&self, key: &str) -> Result<&'a [Value], ConfigError> {
        match self.raw(key) {
            None => Ok(&[]),
            Some(Value::Array(items)) => Ok(items),
            Some(other) => Err(self.error(key, format!("expected an array, got {other}"))),
        }
    }
}

/// A JSON number, or a string JavaScript's `Number()` reads as one.
pub fn number_of(value: &Value) -> Option<f64> {
    match value {
        Value::Number(number) => number.as_f64(),
        Value::String(text) => proto::number::js_number(text.as_bytes()),
        _ => None,
    }
}

/// An object whose keys are the user's (header or label names), read whole: its keys are not
/// config keys.
pub fn string_object(reader: &Reader<'_>, key: &str) -> Result<Vec<(String, String)>, ConfigError> {
    match reader.raw(key) {
        None => Ok(Vec::new()),
        Some(Value::Object(object)) => object
            .iter()
            .map(|(name, value)| match value {
                Value::String(value) => Ok((name.clone(), value.clone())),
                other => Err(reader.error(key, format!("the value of '{name}' is not a string: {other}"))),
            })
            .collect(),
        Some(other) => Err(reader.error(key, format!("expected an object of strings, got {other}"))),
    }
}
