//! `histd proxy`'s config: Etsy's `proxyConfig.js` keys (`nodes`, `host`, `port`,
//! `address_ipv6`, `udp_version`, `server`, `mgmt_address`, `mgmt_port`, `checkInterval`;
//! `cacheSize` and `forkCount` accepted and unused), histd's ingest keys for the readers
//! (`udpReaders`, `udpReceiveBufferBytes`, ...), `keyNameSanitize`, and
//! `proxyDatagramBytes`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::config_reader::{ConfigError, KeysRead, Reader};
use crate::ingest::IngestConfig;

/// The default `proxyDatagramBytes`: lines for one aggregator are packed into datagrams of at
/// most this many bytes (a 1500-byte Ethernet frame less the IPv4 and UDP headers).
pub const DEFAULT_DATAGRAM_BYTES: usize = 1472;

/// One aggregator behind the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyNode {
    /// `host:port` as configured: its name in the hash and in `stats`.
    pub name: String,
    /// Where its statsd lines go (UDP).
    pub address: SocketAddr,
    /// Its management port (`adminport`), asked `health` every `checkInterval`.
    pub admin: SocketAddr,
}

/// The proxy's settings.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// `host` (0.0.0.0, `::` with `address_ipv6` or `udp_version: 'udp6'`) and `port` (8125).
    pub listen: SocketAddr,
    /// `server: './servers/tcp'` also listens for newline-framed lines on TCP at `listen`.
    pub tcp: bool,
    /// `mgmt_address` (127.0.0.1) and `mgmt_port` (8126): `health`, `stats`, `hashring`.
    pub mgmt: SocketAddr,
    /// `nodes` (required): the aggregators.
    pub nodes: Vec<ProxyNode>,
    /// `checkInterval` (10000 ms).
    pub check_interval: Duration,
    /// The readers' settings (histd's ingest keys).
    pub ingest: IngestConfig,
    /// `keyNameSanitize` (true): keys hashed as the aggregators build them.
    pub sanitize: bool,
    /// `proxyDatagramBytes` (1472).
    pub datagram_bytes: usize,
    /// Keys the file has that the proxy did not read.
    pub ignored_keys: Vec<String>,
}

impl ProxyConfig {
    /// Reads and validates a proxy config file.
    pub fn from_file(path: &Path) -> anyhow::Result<ProxyConfig> {
        crate::config_reader::read_file(path, ProxyConfig::from_text)
    }

    /// Reads and validates a proxy config from its text (a JavaScript object literal).
    pub fn from_text(text: &str) -> anyhow::Result<ProxyConfig> {
        Ok(ProxyConfig::from_object(&crate::config_reader::object_literal(text)?)?)
    }

    /// Validates a config object.
    pub fn from_object(raw: &Map<String, Value>) -> Result<ProxyConfig, ConfigError> {
        let read = KeysRead::default();
        let top = Reader::root(raw, &read);
        for unused in ["cacheSize", "forkCount"] {
            let _ = top.raw(unused); // Etsy's: no cache is needed; `udpReaders` sets the threads
        }
        let ipv6 = top.bool("address_ipv6", false)? || udp_version(&top)?;
        let listen_ip = match top.string("host")? {
            None if ipv6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            None => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            Some(text) => crate::ingest::servers::parse_ip(&text)
                .ok_or_else(|| top.error("host", format!("'{text}' is not an IP address")))?,
        };
        let mgmt_ip = match top.string("mgmt_address")? {
            None => IpAddr::V4(Ipv4Addr::LOCALHOST),
            Some(text) => crate::ingest::servers::parse_ip(&text)
                .ok_or_else(|| top.error("mgmt_address", format!("'{text}' is not an IP address")))?,
        };
        let tcp = match top.string("server")?.as_deref() {
            None | Some("./servers/udp") | Some("udp") => false,
            Some("./servers/tcp") | Some("tcp") => true,
            Some(other) => {
                return Err(top.error("server", format!("'{other}' is neither ./servers/udp nor ./servers/tcp")))
            }
        };
        let check_interval = match top.number("checkInterval")? {
            None => Duration::from_secs(10),
            Some(ms) if (1.0..=86_400_000.0).contains(&ms) => Duration::from_millis(ms as u64),
            Some(ms) => {
                return Err(top.error("checkInterval", format!("expected milliseconds from 1 to 86400000, got {ms}")))
            }
        };
        let datagram_bytes = match top.number("proxyDatagramBytes")? {
            None => DEFAULT_DATAGRAM_BYTES,
            Some(n) if n.fract() == 0.0 && (512.0..=65_507.0).contains(&n) => n as usize,
            Some(n) => return Err(top.error("proxyDatagramBytes", format!("expected 512 to 65507 bytes, got {n}"))),
        };
        let config = ProxyConfig {
            listen: SocketAddr::new(listen_ip, top.port("port", 8125)?),
            tcp,
            mgmt: SocketAddr::new(mgmt_ip, top.port("mgmt_port", crate::config::DEFAULT_MGMT_PORT)?),
            nodes: nodes(&top)?,
            check_interval,
            ingest: crate::ingest::settings::ingest(&top)?,
            sanitize: top.bool("keyNameSanitize", true)?,
            datagram_bytes,
            ignored_keys: Vec::new(),
        };
        Ok(ProxyConfig { ignored_keys: crate::config::keys::unread_keys(raw, &read), ..config })
    }
}

/// `udp_version` (older Etsy proxies): `udp4` or `udp6`; true for IPv6.
fn udp_version(top: &Reader<'_>) -> Result<bool, ConfigError> {
    match top.string("udp_version")?.as_deref() {
        None | Some("udp4") => Ok(false),
        Some("udp6") => Ok(true),
        Some(other) => Err(top.error("udp_version", format!("'{other}' is neither udp4 nor udp6"))),
    }
}

/// `nodes`: `[{host, port, adminport}]`, at least one, each `host:port` once.
fn nodes(top: &Reader<'_>) -> Result<Vec<ProxyNode>, ConfigError> {
    let mut nodes: Vec<ProxyNode> = Vec::new();
    for (index, node) in top.array("nodes")?.iter().enumerate() {
        let key = top.key_path(&format!("nodes[{index}]"));
        let Value::Object(object) = node else {
            return Err(ConfigError { key, message: format!("expected {{host, port, adminport}}, got {node}") });
        };
        let node = top.element(object, key.clone());
        let host = node.string("host")?.ok_or_else(|| node.error("host", "is missing"))?;
        let port = node.port("port", 8125)?;
        let adminport = node.port("adminport", crate::config::DEFAULT_MGMT_PORT)?;
        let resolve = |port: u16, what: &str| {
            (host.as_str(), port)
                .to_socket_addrs()
                .ok()
                .and_then(|mut addresses| addresses.next())
                .ok_or_else(|| node.error(what, format!("cannot resolve '{host}'")))
        };
        let name = format!("{host}:{port}");
        if nodes.iter().any(|other| other.name == name) {
            return Err(ConfigError { key, message: format!("'{name}' is listed twice") });
        }
        nodes.push(ProxyNode { name, address: resolve(port, "host")?, admin: resolve(adminport, "adminport")? });
    }
    if nodes.is_empty() {
        return Err(top.error("nodes", "the proxy needs at least one node: [{host, port, adminport}]"));
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_etsys_example_proxy_config() {
        let config = ProxyConfig::from_text(
            "{ nodes: [ {host: '127.0.0.1', port: 8127, adminport: 8128}, {host: '127.0.0.1', port: 8129, adminport: 8130} ],
               server: './servers/udp', host: '0.0.0.0', port: 8125, mgmt_port: 8126, forkCount: 0,
               checkInterval: 1000, cacheSize: 10000 }",
        )
        .unwrap();
        assert_eq!(config.listen, "0.0.0.0:8125".parse().unwrap());
        assert_eq!(config.mgmt, "127.0.0.1:8126".parse().unwrap());
        assert_eq!(config.check_interval, Duration::from_secs(1));
        let names: Vec<&str> = config.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["127.0.0.1:8127", "127.0.0.1:8129"]);
        assert_eq!(config.nodes[1].admin, "127.0.0.1:8130".parse().unwrap());
        assert!(config.ignored_keys.is_empty(), "{:?}", config.ignored_keys);
        assert!(!config.tcp);
    }

    #[test]
    fn bad_configs_name_the_key() {
        let cases = [
            ("{ nodes: [] }", "nodes"),
            ("{ nodes: [ {port: 1} ] }", "nodes[0].host"),
            ("{ nodes: [ {host: '127.0.0.1', port: 1}, {host: '127.0.0.1', port: 1} ] }", "nodes[1]"),
            ("{ nodes: [ {host: 'no-such-host.invalid'} ] }", "nodes[0].host"),
            ("{ nodes: [ {host: '127.0.0.1'} ], udp_version: 'udp5' }", "udp_version"),
            ("{ nodes: [ {host: '127.0.0.1'} ], server: './servers/http' }", "server"),
            ("{ nodes: [ {host: '127.0.0.1'} ], proxyDatagramBytes: 10 }", "proxyDatagramBytes"),
        ];
        for (text, key) in cases {
            let error = ProxyConfig::from_text(text).unwrap_err().to_string();
            assert!(error.contains(key), "{text}: {error}");
        }
        let ipv6 = ProxyConfig::from_text("{ nodes: [ {host: '::1'} ], udp_version: 'udp6' }").unwrap();
        assert_eq!(ipv6.listen, "[::]:8125".parse().unwrap());
    }
}
