//! The repeater's tap: raw packets offered by readers, dropped (and counted) when it lags.
//! A reload can add or remove the repeater while readers run: they hold a [`TapView`] of the
//! daemon's one [`TapSwitch`] and look again only when a reload switched it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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

/// The tap in force, shared by every reader: set when the repeater starts, cleared when a
/// reload retires it.
#[derive(Debug, Default)]
pub struct TapSwitch {
    /// Bumped after every change, so readers notice with one atomic load.
    generation: AtomicU64,
    tap: Mutex<Option<Tap>>,
}

impl TapSwitch {
    /// Puts `tap` in force (`None`: no repeater).
    pub fn set(&self, tap: Option<Tap>) {
        *super::shards_lock(&self.tap) = tap;
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// A reader's view; it takes the tap in force at its first use.
    pub fn view(self: &Arc<Self>) -> TapView {
        TapView { switch: self.clone(), seen: u64::MAX, tap: None }
    }
}

/// One reader's copy of the tap in force.
#[derive(Debug)]
pub struct TapView {
    switch: Arc<TapSwitch>,
    seen: u64,
    tap: Option<Tap>,
}

impl TapView {
    /// The tap in force: the reader's copy, taken again only after a switch (no lock shared
    /// between readers on the way of a packet, only one read of the generation).
    pub fn current(&mut self) -> Option<&Tap> {
        let generation = self.switch.generation.load(Ordering::Acquire);
        if generation != self.seen {
            self.tap = super::shards_lock(&self.switch.tap).clone();
            self.seen = generation;
        }
        self.tap.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::EtsyStatus;

    #[test]
    fn a_view_follows_the_switch() {
        let switch = Arc::new(TapSwitch::default());
        let mut view = switch.view();
        assert!(view.current().is_none());
        let telemetry = Arc::new(SinkTelemetry::new("repeater", EtsyStatus::None, 0));
        let (sender, mut receiver) = mpsc::channel(4);
        switch.set(Some(Tap::new(sender, telemetry)));
        view.current().expect("switched on").offer(b"a:1|c");
        assert_eq!(receiver.try_recv().unwrap(), b"a:1|c");
        switch.set(None);
        assert!(view.current().is_none());
    }
}
