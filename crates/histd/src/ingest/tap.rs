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

    /// Offers a copy of `packet`, never waiting: dropped (and counted) when the repeater's
    /// queue is full by count or by bytes.
    pub fn offer(&self, packet: &[u8]) {
        let bytes = packet.len() as u64;
        if self.telemetry.may_queue(bytes) && self.sender.try_send(packet.to_vec()).is_ok() {
            self.telemetry.queued_bytes.add(bytes);
        } else {
            self.telemetry.queue_full_drops.add(1);
        }
    }
}
