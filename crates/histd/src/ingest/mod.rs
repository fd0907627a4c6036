//! Ingest: listeners that read packets and aggregate them into tables they own.
//!
//! Each datagram socket has a reader thread, each stream connection a task; every one of them
//! owns a [`Shard`] (a table only it writes; the flusher takes it whole once per flush), so no
//! lock is shared between readers. Raw packets are also offered to the repeater through a
//! [`Tap`] when that backend is on.

pub mod allow;
mod datagram;
pub(crate) mod framer;
mod listeners;
pub mod recv;
pub mod servers;
pub mod settings;
mod shards;
mod stream;
mod switch;
mod tap;
mod udp;

pub use datagram::{spawn_datagram_reader, BatchShape, DatagramSocket, DatagramSource, Stopping};
pub use framer::PendingBudget;
pub use listeners::{Ingress, Listening, Opened};
pub use servers::{Listener, UnixPath};
pub use settings::{IngestConfig, DEFAULT_MAX_STREAM_LINE_BYTES};
pub use shards::{Shard, Shards, Taken};
pub use stream::{serve_streams, StreamContext};
pub use tap::{Tap, TapSwitch, TapView};
pub use udp::{open_udp, report_receive_buffer, ReaderMode, UdpSettings};
