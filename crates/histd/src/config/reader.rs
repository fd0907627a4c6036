//! Typed reads of one object of the raw config, with errors that name the key.

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

/// Reads keys of one JSON object; `path` prefixes the keys named in errors.
pub struct Reader<'a> {
    object: &'a Map<String, Value>,
    path: String,
}

static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

impl<'a> Reader<'a> {
    /// Reads `object`, whose keys are named `path.key` in errors (`path` may be empty).
    pub fn new(object: &'a Map<String, Value>, path: impl Into<String>) -> Self {
        Reader { object, path: path.into() }
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
        self.object.get(key).filter(|value| !value.is_null())
    }

    /// A nested object (absent = empty).
    pub fn object(&self, key: &str) -> Result<Reader<'a>, ConfigError> {
        match self.raw(key) {
            None => Ok(Reader::new(&EMPTY, self.key_path(key))),
            Some(Value::Object(object)) => Ok(Reader::new(object, self.key_path(key))),
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
