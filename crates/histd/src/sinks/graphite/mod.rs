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
pub use sink::spawn;
