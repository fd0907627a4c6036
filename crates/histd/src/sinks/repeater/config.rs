//! The repeater backend's settings: `repeater` and `repeaterProtocol`.

use serde_json::{json, Value};

use crate::config_reader::keys::{etsy, KeyDoc};
use crate::config_reader::{ConfigError, Reader};

/// How the repeater sends packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepeaterProtocol {
    /// One UDP datagram per packet, over IPv4.
    Udp4,
    /// One UDP datagram per packet, over IPv6.
    Udp6,
    /// The packet and a newline on a TCP connection kept open per target.
    Tcp,
}

/// The repeater backend's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct RepeaterConfig {
    /// `repeater`: `[{host, port}]`.
    pub targets: Vec<(String, u16)>,
    /// `repeaterProtocol` (`udp4`).
    pub protocol: RepeaterProtocol,
}

impl RepeaterConfig {
    /// The settings as `histd check-config` prints them.
    pub fn effective(&self) -> Value {
        json!({
            "targets": self.targets.iter().map(|(h, p)| format!("{h}:{p}")).collect::<Vec<_>>(),
            "protocol": format!("{:?}", self.protocol).to_lowercase(),
        })
    }
}

/// Reads `repeater` and `repeaterProtocol`.
pub fn repeater(top: &Reader<'_>) -> Result<RepeaterConfig, ConfigError> {
    let protocol = match top.string("repeaterProtocol")?.as_deref() {
        None | Some("udp4") => RepeaterProtocol::Udp4,
        Some("udp6") => RepeaterProtocol::Udp6,
        Some("tcp") => RepeaterProtocol::Tcp,
        Some(other) => return Err(top.error("repeaterProtocol", format!("'{other}' is not udp4, udp6 or tcp"))),
    };
    let mut targets = Vec::new();
    for (index, target) in top.array("repeater")?.iter().enumerate() {
        let key = format!("repeater[{index}]");
        let Value::Object(object) = target else {
            return Err(ConfigError { key, message: format!("expected {{host, port}}, got {target}") });
        };
        let target = top.element(object, key);
        let host = target.string("host")?.ok_or_else(|| target.error("host", "is missing"))?;
        targets.push((host, target.port("port", crate::ingest::servers::DEFAULT_PORT)?));
    }
    Ok(RepeaterConfig { targets, protocol })
}

/// Its keys, for README's table (`config/keys.rs`).
pub const KEYS: &[KeyDoc] = &[
    etsy(&["repeater"], "none", "`[{host, port}]`: where the repeater backend sends every packet"),
    etsy(&["repeater[].host"], "", "a repeater target's host"),
    etsy(&["repeater[].port"], "8125", "a repeater target's port"),
    etsy(&["repeaterProtocol"], "`udp4`", "`udp4`, `udp6` or `tcp`"),
];
