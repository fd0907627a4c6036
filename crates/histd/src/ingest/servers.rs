//! Where histd listens: Etsy's `servers: [...]` array or its top-level `server`/`port`/`address`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;

use serde_json::Value;

use super::allow::{Allow, Cidr};
use crate::config_reader::{ConfigError, Reader};

/// The statsd port when none is given.
pub const DEFAULT_PORT: u16 = 8125;

/// One listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listener {
    /// UDP datagrams, one packet each; the receive buffer when this server sets its own
    /// (`recvBufferSize`, Node's name for it); the sources it takes (`allow`).
    Udp(SocketAddr, Option<usize>, Allow),
    /// TCP, newline framed; the sources it takes (`allow`).
    Tcp(SocketAddr, Allow),
    /// A Unix stream socket, newline framed (Etsy's `./servers/tcp` with `socket`).
    UnixStream(UnixPath),
    /// A Unix datagram socket (`./servers/udp` with `socket`).
    UnixDatagram(UnixPath),
}

impl Listener {
    /// The sources it takes (`allow`; every source for a Unix socket).
    pub fn allow(&self) -> &Allow {
        static OPEN: Allow = Allow(Vec::new());
        match self {
            Listener::Udp(_, _, allow) | Listener::Tcp(_, allow) => allow,
            Listener::UnixStream(_) | Listener::UnixDatagram(_) => &OPEN,
        }
    }

    /// The listener as an Etsy `servers` entry (for `check-config`): the user's terms.
    pub fn effective(&self) -> Value {
        let network = |server: &str, address: &SocketAddr| serde_json::json!({ "server": server, "address": address.ip().to_string(), "port": address.port() });
        let unix = |server: &str, socket: &UnixPath| {
            let mut entry = serde_json::json!({ "server": server, "socket": socket.path.display().to_string() });
            if let Some(mode) = socket.mode {
                entry["socket_mod"] = Value::String(format!("{mode:04o}"));
            }
            entry
        };
        match self {
            Listener::Udp(address, buffer, allow) => {
                let mut entry = network("./servers/udp", address);
                if let Some(bytes) = buffer {
                    entry["recvBufferSize"] = Value::from(*bytes);
                }
                with_allow(entry, allow)
            }
            Listener::Tcp(address, allow) => with_allow(network("./servers/tcp", address), allow),
            Listener::UnixStream(socket) => unix("./servers/tcp", socket),
            Listener::UnixDatagram(socket) => unix("./servers/udp", socket),
        }
    }
}

/// A listener's entry with its `allow` list, when it has one.
fn with_allow(mut entry: Value, allow: &Allow) -> Value {
    if !allow.is_open() {
        entry["allow"] = Value::from(allow.effective());
    }
    entry
}

/// A Unix socket path and the mode to give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnixPath {
    /// The socket file; replaced if it exists, removed at exit.
    pub path: PathBuf,
    /// `socket_mod`: permissions set after binding.
    pub mode: Option<u32>,
}

/// The listeners of a config: `servers` when present, else the top-level keys.
pub fn listeners(top: &Reader<'_>) -> Result<Vec<Listener>, ConfigError> {
    if top.raw("servers").is_none() {
        return Ok(vec![listener(top)?]);
    }
    let servers = top.array("servers")?;
    if servers.is_empty() {
        return Err(top.error("servers", "is empty: histd would receive nothing"));
    }
    servers
        .iter()
        .enumerate()
        .map(|(index, server)| match server {
            Value::Object(object) => listener(&top.element(object, format!("servers[{index}]"))),
            other => Err(ConfigError {
                key: format!("servers[{index}]"),
                message: format!("expected an object, got {other}"),
            }),
        })
        .collect()
}

fn listener(server: &Reader<'_>) -> Result<Listener, ConfigError> {
    let module = server.string("server")?.unwrap_or_else(|| "udp".to_string());
    let stream = match module.trim_start_matches("./servers/") {
        "udp" => false,
        "tcp" => true,
        other => {
            return Err(
                server.error("server", format!("unknown server '{other}' (histd has ./servers/udp and ./servers/tcp)"))
            )
        }
    };
    let allow = allow(server)?;
    if let Some(path) = server.string("socket")? {
        if !allow.is_open() {
            return Err(server.error(
                "allow",
                "a Unix socket has no network sources: its file's mode (socket_mod) decides who may send",
            ));
        }
        let unix = UnixPath { path: path.into(), mode: socket_mode(server)? };
        return Ok(if stream { Listener::UnixStream(unix) } else { Listener::UnixDatagram(unix) });
    }
    let address = socket_address(server)?;
    if stream {
        return Ok(Listener::Tcp(address, allow));
    }
    let receive_buffer = match server.number("recvBufferSize")? {
        None => None,
        Some(bytes) if (1.0..=2_147_483_647.0).contains(&bytes) => Some(bytes as usize),
        Some(bytes) => return Err(server.error("recvBufferSize", format!("expected a byte count, got {bytes}"))),
    };
    Ok(Listener::Udp(address, receive_buffer, allow))
}

/// `allow`: the networks a listener takes lines from (`["10.0.0.0/8", "::1"]`; absent: all).
fn allow(server: &Reader<'_>) -> Result<Allow, ConfigError> {
    let mut networks = Vec::new();
    for (index, entry) in server.array("allow")?.iter().enumerate() {
        let key = format!("allow[{index}]");
        let text =
            entry.as_str().ok_or_else(|| server.error(&key, format!("expected a network string, got {entry}")))?;
        networks.push(Cidr::parse(text).map_err(|message| server.error(&key, message))?);
    }
    Ok(Allow(networks))
}

fn socket_address(server: &Reader<'_>) -> Result<SocketAddr, ConfigError> {
    let ipv6 = server.bool("address_ipv6", false)?;
    let any: IpAddr = if ipv6 { Ipv6Addr::UNSPECIFIED.into() } else { Ipv4Addr::UNSPECIFIED.into() };
    let ip = match server.string("address")? {
        None => any,
        Some(text) => {
            parse_ip(&text).ok_or_else(|| server.error("address", format!("'{text}' is not an IP address")))?
        }
    };
    Ok(SocketAddr::new(ip, server.port("port", DEFAULT_PORT)?))
}

/// An IP address; `localhost` is 127.0.0.1 and `[::1]` may keep its brackets.
pub fn parse_ip(text: &str) -> Option<IpAddr> {
    if text == "localhost" {
        return Some(Ipv4Addr::LOCALHOST.into());
    }
    text.trim_start_matches('[').trim_end_matches(']').parse().ok()
}

/// `socket_mod`: a number (the mode's value) or a string of octal digits (`"660"`, `"0o660"`).
fn socket_mode(server: &Reader<'_>) -> Result<Option<u32>, ConfigError> {
    match server.raw("socket_mod") {
        None => Ok(None),
        Some(Value::Number(number)) => number
            .as_u64()
            .map(|mode| Some(mode as u32))
            .ok_or_else(|| server.error("socket_mod", "expected a file mode")),
        Some(Value::String(text)) => {
            let digits = text.trim_start_matches("0o");
            u32::from_str_radix(digits, 8)
                .map(Some)
                .map_err(|_| server.error("socket_mod", format!("'{text}' is not an octal file mode")))
        }
        Some(other) => Err(server.error("socket_mod", format!("expected a file mode, got {other}"))),
    }
}
