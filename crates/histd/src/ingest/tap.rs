//! The repeater's tap: raw packets offered by readers, dropped (and counted) when it lags.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;

/// The raw-packet queue to the repeater.
#[derive(Debug, Clone)]
pub struct Tap {
    sender: mpsc::Sender<Vec<u8>>,
    dropped: Arc<AtomicU64>,
}

impl Tap {
    /// A tap sending into `sender`; packets that do not fit are counted in `dropped`.
    pub fn new(sender: mpsc::Sender<Vec<u8>>, dropped: Arc<AtomicU64>) -> Self {
        Tap { sender, dropped }
    }

    /// Offers a copy of `packet`, never waiting.
    pub fn offer(&self, packet: &[u8]) {
        if self.sender.try_send(packet.to_vec()).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}
