//! A value that a reload replaces while reader threads use it: each reader holds a [`View`]
//! and takes the new value with one atomic load per batch (no lock shared between readers on
//! the way of a packet; the lock is taken only after a change). The repeater's tap and each
//! listener's allow list are switches.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The value in force, shared by every reader.
#[derive(Debug, Default)]
pub struct Switch<T> {
    /// Bumped after every change, so readers notice with one atomic load.
    generation: AtomicU64,
    value: Mutex<T>,
}

impl<T: Clone> Switch<T> {
    /// A switch holding `value`.
    pub fn new(value: T) -> Arc<Switch<T>> {
        Arc::new(Switch { generation: AtomicU64::new(0), value: Mutex::new(value) })
    }

    /// Puts `value` in force.
    pub fn set(&self, value: T) {
        *crate::clock::lock(&self.value) = value;
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// A reader's view, holding the value in force now.
    pub fn view(self: &Arc<Self>) -> View<T> {
        let seen = self.generation.load(Ordering::Acquire);
        View { switch: self.clone(), seen, value: crate::clock::lock(&self.value).clone() }
    }
}

/// One reader's copy of the value in force.
#[derive(Debug)]
pub struct View<T> {
    switch: Arc<Switch<T>>,
    seen: u64,
    value: T,
}

impl<T: Clone> View<T> {
    /// The value in force: the reader's copy, taken again only after a change.
    pub fn current(&mut self) -> &T {
        let generation = self.switch.generation.load(Ordering::Acquire);
        if generation != self.seen {
            self.value = crate::clock::lock(&self.switch.value).clone();
            self.seen = generation;
        }
        &self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_follows_its_switch() {
        let switch = Switch::new(1);
        let mut view = switch.view();
        assert_eq!(*view.current(), 1);
        switch.set(2);
        assert_eq!(*view.current(), 2);
        let mut late = switch.view();
        assert_eq!(*late.current(), 2, "a view made later starts with the value in force");
    }
}
