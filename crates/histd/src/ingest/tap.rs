//! The repeater's tap: raw packets offered by readers, dropped (and counted) when it lags.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::sinks::SinkTelemetry;

/// The raw-packet queue to the repeater.
#[derive(Debug, Clone)]
pub struct Tap {
    sender: mpsc::Sender<Vec<u8>>,
    telemetry: Arc<SinkTelemetry>,
}

impl Tap {
    /// A tap sending into `sender`; packets that do not fit are counted in the repeater's
    /// `queue_full_drops`.
    pub fn new(sender: mpsc::Sender<Vec<u8>>, telemetry: Arc<SinkTelemetry>) -> Self {
        Tap { sender, telemetry }
    }

    /// Offers a copy of `packet`, never waiting.
    pub fn offer(&self, packet: &[u8]) {
        if self.sender.try_send(packet.to_vec()).is_err() {
            self.telemetry.queue_full_drops.add(1);
        }
    }
}
