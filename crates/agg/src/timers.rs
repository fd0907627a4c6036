//! A reader's timers (and `h`/`d` histograms), kept across intervals: the keys and their slots
//! stay, and taking an interval moves out only the states touched in it.
//!
//! Rebuilding the map every interval cost more than the lines themselves at 100k timer names:
//! every key inserted again, the slots grown again (each growth moving every ~200-byte slot),
//! and a fresh table of pages for the kernel to zero (10% of a timer-heavy load's CPU in
//! `clear_page_erms`). Like the counters' readers ([`crate::counters`]), a reader whose keys
//! outnumber twice those it saw in the interval plus [`CHURN_SLACK`] starts over, so names
//! that churn cannot grow memory without bound.

use compact_str::CompactString;

use crate::counters::CHURN_SLACK;
use crate::series::SeriesMap;
use crate::table::TimerSamples;

/// A reader's timers: every key seen (until it starts over), this interval's samples of each.
#[derive(Debug, Default)]
pub struct ReaderTimers {
    map: SeriesMap<TimerSamples>,
    /// The slots whose state received a value this interval.
    touched: Vec<u32>,
}

impl ReaderTimers {
    /// Starts loading the slot where the key with `hash` is looked for first.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        self.map.prefetch(hash);
    }

    /// Second stage, after [`ReaderTimers::prefetch`]: starts loading where the next value of
    /// the timer in the first probed slot goes.
    #[inline]
    pub fn prefetch_next_value(&self, hash: u64) {
        if let Some(timer) = self.map.likely_value(hash) {
            timer.prefetch_next_value();
        }
    }

    /// The samples of `key` (whose hash is `hash`) this interval, ready for one more value.
    #[inline]
    pub fn samples(&mut self, hash: u64, key: &str) -> &mut TimerSamples {
        let slots = self.map.slot_count();
        let index = self.map.index_or_insert(hash, key, TimerSamples::default);
        if self.map.slot_count() != slots {
            self.touched = self.map.indexes_where(|samples| samples.received > 0);
        }
        let (_, samples) = self.map.at_mut(index);
        if samples.received == 0 {
            self.touched.push(index as u32);
        }
        samples
    }

    /// The interval so far, leaving the keys (or none, when most of them were idle).
    pub fn take(&mut self) -> Vec<(CompactString, TimerSamples)> {
        let taken = self
            .touched
            .iter()
            .map(|&index| {
                let (key, samples) = self.map.at_mut(index as usize);
                let expected_values = samples.values.len() as u32;
                let taken = std::mem::take(samples);
                samples.expected_values = expected_values;
                (key.clone(), taken)
            })
            .collect();
        if self.map.key_count() > 2 * self.touched.len() + CHURN_SLACK {
            self.map = SeriesMap::default();
        }
        self.touched.clear();
        taken
    }

    /// This interval's samples of `key`, if any arrived.
    #[cfg(test)]
    pub fn get(&self, key: &str) -> Option<&TimerSamples> {
        self.map.get(key).filter(|samples| samples.received > 0)
    }
}

impl std::ops::Index<&str> for ReaderTimers {
    type Output = TimerSamples;

    /// This interval's samples of `key`; panics when none arrived.
    fn index(&self, key: &str) -> &TimerSamples {
        self.map.get(key).filter(|samples| samples.received > 0).unwrap_or_else(|| panic!("no timer {key:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::series::hash_key;

    fn add(timers: &mut ReaderTimers, key: &str, value: f64) {
        timers.samples(hash_key(key), key).add(value, 1.0, 100);
    }

    #[test]
    fn takes_only_the_interval_and_keeps_the_keys() {
        let mut timers = ReaderTimers::default();
        let keys: Vec<String> = (0..5000).map(|i| format!("timer.{i}")).collect();
        keys.iter().enumerate().for_each(|(i, key)| add(&mut timers, key, i as f64));
        add(&mut timers, "timer.7", 1.5);
        let mut first = timers.take();
        first.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(first.len(), 5000);
        let seven = first.iter().find(|(key, _)| key == "timer.7").unwrap();
        assert_eq!(seven.1.values, [7.0, 1.5]);
        assert!(timers.get("timer.7").is_none(), "taken");
        assert_eq!(timers.map.key_count(), 5000, "keys stay");
        add(&mut timers, "timer.9", 2.0);
        add(&mut timers, "new", 3.0);
        let second: Vec<_> =
            timers.take().into_iter().map(|(key, samples)| (key.to_string(), samples.values)).collect();
        assert_eq!(second, [("timer.9".to_string(), vec![2.0]), ("new".to_string(), vec![3.0])]);
        assert!(timers.take().is_empty());
    }

    #[test]
    fn a_reader_whose_keys_went_idle_starts_over() {
        let mut timers = ReaderTimers::default();
        (0..CHURN_SLACK + 10).for_each(|i| add(&mut timers, &format!("t{i}"), 1.0));
        assert_eq!(timers.take().len(), CHURN_SLACK + 10);
        add(&mut timers, "t1", 1.0);
        assert_eq!(timers.take().len(), 1);
        assert_eq!(timers.map.key_count(), 0, "started over");
        add(&mut timers, "t2", 2.0);
        assert_eq!(timers.take()[0].1.values, [2.0]);
    }
}
