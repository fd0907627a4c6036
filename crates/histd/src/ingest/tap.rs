//! The repeater's tap: raw packets offered by readers, dropped (and counted) when it lags.
//! A reload can add or remove the repeater while readers run: they hold a [`TapView`] of the
//! daemon's one [`TapSwitch`] (switch.rs) and look again only when a reload switched it.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::telemetry::SinkTelemetry;

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

/// The tap in force, shared by every reader: set when the repeater starts, cleared when a
/// reload retires it.
pub type TapSwitch = super::switch::Switch<Option<Tap>>;

/// One reader's copy of the tap in force.
pub type TapView = super::switch::View<Option<Tap>>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::EtsyStatus;

    #[test]
    fn a_view_follows_the_switch() {
        let switch = Arc::new(TapSwitch::default());
        let mut view = switch.view();
        assert!(view.current().is_none());
        let telemetry = Arc::new(SinkTelemetry::new("repeater", EtsyStatus::None, 0));
        let (sender, mut receiver) = mpsc::channel(4);
        switch.set(Some(Tap::new(sender, telemetry)));
        view.current().as_ref().expect("switched on").offer(b"a:1|c");
        assert_eq!(receiver.try_recv().unwrap(), b"a:1|c");
        switch.set(None);
        assert!(view.current().is_none());
    }
}
