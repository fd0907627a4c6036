//! The `file` section: where each flush is appended, in which format, and how the file is
//! rotated.

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::config_reader::keys::{histd, KeyDoc};
use crate::config_reader::{ConfigError, Reader};

/// The default `file.maxBytes`: 100 MiB, then the file is rotated.
pub const DEFAULT_MAX_BYTES: u64 = 100 * 1024 * 1024;
/// The default `file.keep`: rotated files kept.
pub const DEFAULT_KEEP: u32 = 3;

/// How a flush is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// Net::Statsd::Server's File backend: `c<TAB>name<TAB>count`, `g`, `s` with the members
    /// joined by `;`, and `t<TAB>name.<stat><TAB>value` for each of a timer's Etsy statistics.
    Statsd,
    /// One JSON object per series per flush, a timer's circllhist in base64 among its fields.
    Jsonl,
}

/// The file backend's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct FileConfig {
    /// `file.name` (required with the backend): the file appended to.
    pub path: PathBuf,
    /// `file.format` (`statsd`).
    pub format: FileFormat,
    /// `file.maxBytes` (100 MiB; 0: never rotated by histd): past it the file is rotated
    /// before the next flush is written.
    pub max_bytes: u64,
    /// `file.keep` (3): rotated files kept (`name.1` the newest); 0 removes the old file.
    pub keep: u32,
}

impl FileConfig {
    /// The settings as `histd check-config` prints them.
    pub fn effective(&self) -> Value {
        json!({
            "name": self.path,
            "format": match self.format { FileFormat::Statsd => "statsd", FileFormat::Jsonl => "jsonl" },
            "maxBytes": self.max_bytes,
            "keep": self.keep,
        })
    }
}

/// Reads `file.*`; `required` (the backend is on) makes `name` mandatory.
pub fn file(top: &Reader<'_>, required: bool) -> Result<Option<FileConfig>, ConfigError> {
    let section = top.object("file")?;
    let Some(name) = section.string("name")? else {
        return match required {
            true => Err(section.error(
                "name",
                "the file backend needs the file to write: file: { name: \"/var/log/histd/flush.log\" }",
            )),
            false => Ok(None),
        };
    };
    if name.is_empty() {
        return Err(section.error("name", "expected a file path, got an empty string"));
    }
    let format = match section.string("format")?.as_deref() {
        None | Some("statsd") => FileFormat::Statsd,
        Some("jsonl") => FileFormat::Jsonl,
        Some(other) => return Err(section.error("format", format!("expected statsd or jsonl, got '{other}'"))),
    };
    let max_bytes = match section.number("maxBytes")? {
        None => DEFAULT_MAX_BYTES,
        Some(n) if n == 0.0 || (n.fract() == 0.0 && (4096.0..1e18).contains(&n)) => n as u64,
        Some(n) => {
            return Err(section.error(
                "maxBytes",
                format!("expected 0 (no rotation) or a whole number of bytes of at least 4096, got {n}"),
            ))
        }
    };
    let keep = match section.number("keep")? {
        None => DEFAULT_KEEP,
        Some(n) if n.fract() == 0.0 && (0.0..=1000.0).contains(&n) => n as u32,
        Some(n) => return Err(section.error("keep", format!("expected a whole number from 0 to 1000, got {n}"))),
    };
    Ok(Some(FileConfig { path: PathBuf::from(name), format, max_bytes, keep }))
}

/// Its keys, for README's table (`config/keys.rs`).
pub const KEYS: &[KeyDoc] = &[
    histd(&["file.name"], "required with the `file` backend", "the file each flush is appended to (its directory is created), in one write per flush"),
    histd(&["file.format"], "`statsd`", "`statsd`: Net::Statsd::Server's File lines, `c<TAB>name<TAB>count`, `g`, `s` with the members joined by `;`, `t<TAB>name.<stat><TAB>value` per Etsy statistic (histd's own series left out); `jsonl`: one JSON object per series with its time, type, key, name, tags and values, a timer's circllhist in base64"),
    histd(&["file.maxBytes"], "104857600 (100 MiB)", "past it the file is rotated before the next flush (`name.1` the newest); 0: never (leave it to logrotate: a file moved or removed is reopened at the next flush)"),
    histd(&["file.keep"], "3", "rotated files kept; 0 removes the full file"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn settings_are_read_or_refused_naming_the_key() {
        let read =
            |text: &str| Config::from_text(text).map(|config| config.settings::<crate::sinks::file::File>().clone());
        let file = read("{ backends: ['file'], file: { name: '/tmp/f.log' } }").unwrap().unwrap();
        assert_eq!((file.format, file.max_bytes, file.keep), (FileFormat::Statsd, DEFAULT_MAX_BYTES, DEFAULT_KEEP));
        let file = read("{ file: { name: 'f.jsonl', format: 'jsonl', maxBytes: 0, keep: 0 } }").unwrap().unwrap();
        assert_eq!((file.format, file.max_bytes, file.keep), (FileFormat::Jsonl, 0, 0));
        assert_eq!(read("{ backends: ['graphite'] }").unwrap(), None);
        for (text, key) in [
            ("{ backends: ['file'] }", "file.name"),
            ("{ file: { name: '' } }", "file.name"),
            ("{ file: { name: 'f', format: 'csv' } }", "file.format"),
            ("{ file: { name: 'f', maxBytes: 100 } }", "file.maxBytes"),
            ("{ file: { name: 'f', keep: -1 } }", "file.keep"),
        ] {
            let error = read(text).unwrap_err().to_string();
            assert!(error.contains(key), "{text}: {error}");
        }
        // The backend keeps sets' members in the flush.
        assert!(Config::from_text("{ backends: ['file'], file: { name: 'f' } }").unwrap().agg.keep_mergeable);
    }
}
