//! Who may send statsd lines to a listener (`servers[].allow`): a list of networks (CIDRs);
//! datagrams and connections from anywhere else are dropped and counted. An empty list lets
//! everyone in, as Etsy does. A reload can change a running listener's list: its readers hold
//! an [`AllowView`] of the listener's [`AllowSwitch`] (switch.rs).

use std::net::IpAddr;

/// A network: an address and how many leading bits of it a source must share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The address as IPv6 (IPv4 mapped into `::ffff:0:0/96`).
    network: u128,
    /// Leading bits that must match, of the 128.
    bits: u8,
}

impl Cidr {
    /// Reads `10.0.0.0/8`, `2001:db8::/32`, or an address alone (that address only).
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let bad = || format!("'{text}' is not a network (10.0.0.0/8, 2001:db8::/32, or an address)");
        let (address, prefix) = match text.trim().split_once('/') {
            Some((address, prefix)) => (address, Some(prefix.parse::<u8>().map_err(|_| bad())?)),
            None => (text.trim(), None),
        };
        let address: IpAddr = address.trim_start_matches('[').trim_end_matches(']').parse().map_err(|_| bad())?;
        let (width, offset) = match address {
            IpAddr::V4(_) => (32, 96),
            IpAddr::V6(_) => (128, 0),
        };
        let prefix = prefix.unwrap_or(width);
        if prefix > width {
            return Err(format!("'{text}': a /{prefix} prefix is longer than the address ({width} bits)"));
        }
        let bits = offset + prefix;
        Ok(Cidr { network: as_u128(address) & mask(bits), bits })
    }

    /// Whether `source` is inside this network.
    pub fn contains(&self, source: IpAddr) -> bool {
        as_u128(source) & mask(self.bits) == self.network
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v6 = std::net::Ipv6Addr::from(self.network);
        match v6.to_ipv4_mapped().filter(|_| self.bits >= 96) {
            Some(v4) => write!(f, "{v4}/{}", self.bits - 96),
            None => write!(f, "{v6}/{}", self.bits),
        }
    }
}

fn as_u128(address: IpAddr) -> u128 {
    match address {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => u128::from(v4.to_ipv6_mapped()),
            None => u128::from(v6),
        },
    }
}

fn mask(bits: u8) -> u128 {
    match bits {
        0 => 0,
        bits => u128::MAX << (128 - u32::from(bits)),
    }
}

/// The networks a listener takes lines from; empty: every source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allow(pub Vec<Cidr>);

impl Allow {
    /// Whether every source is let in.
    pub fn is_open(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `source` may send.
    pub fn admits(&self, source: IpAddr) -> bool {
        self.is_open() || self.0.iter().any(|network| network.contains(source))
    }

    /// The list as the config writes it.
    pub fn effective(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }
}

/// A running listener's list in force, replaced by a reload.
pub type AllowSwitch = super::switch::Switch<Allow>;

/// One reader's copy of the list in force.
pub type AllowView = super::switch::View<Allow>;

impl AllowView {
    /// The list in force; `None` when every source is let in (nothing to check).
    pub fn checking(&mut self) -> Option<&Allow> {
        let allow = self.current();
        (!allow.is_open()).then_some(allow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_are_read_and_matched() {
        let cases: &[(&str, &[(&str, bool)])] = &[
            ("10.0.0.0/8", &[("10.1.2.3", true), ("11.0.0.1", false), ("::ffff:10.9.9.9", true)]),
            ("127.0.0.1", &[("127.0.0.1", true), ("127.0.0.2", false)]),
            ("192.168.1.77/24", &[("192.168.1.1", true), ("192.168.2.1", false)]),
            ("0.0.0.0/0", &[("8.8.8.8", true), ("2001:db8::1", false)]),
            ("2001:db8::/32", &[("2001:db8:ffff::1", true), ("2001:db9::1", false), ("10.0.0.1", false)]),
            ("::1", &[("::1", true), ("127.0.0.1", false)]),
            ("[::1]/128", &[("::1", true)]),
            ("::/0", &[("2001:db8::1", true), ("1.2.3.4", true)]),
        ];
        for (network, sources) in cases {
            let cidr = Cidr::parse(network).unwrap();
            for (source, inside) in *sources {
                assert_eq!(cidr.contains(source.parse().unwrap()), *inside, "{source} in {network}");
            }
        }
        for bad in ["10.0.0.0/33", "::/129", "10.0.0/8", "x", "10.0.0.0/-1", ""] {
            assert!(Cidr::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Cidr::parse("192.168.1.77/24").unwrap().to_string(), "192.168.1.0/24");
        assert_eq!(Cidr::parse("2001:db8::1/32").unwrap().to_string(), "2001:db8::/32");
    }

    #[test]
    fn a_view_follows_its_switch() {
        let switch = AllowSwitch::new(Allow::default());
        let mut view = switch.view();
        assert!(view.checking().is_none(), "open: nothing to check");
        switch.set(Allow(vec![Cidr::parse("10.0.0.0/8").unwrap()]));
        let allow = view.checking().expect("a list now");
        assert!(allow.admits("10.0.0.1".parse().unwrap()) && !allow.admits("127.0.0.1".parse().unwrap()));
        switch.set(Allow::default());
        assert!(view.checking().is_none());
    }
}
