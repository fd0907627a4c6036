//! A reader's timers (and `h`/`d` histograms): keys numbered like the counters' and kept across
//! intervals, and the interval's values in one log, in arrival order.
//!
//! A timer line touches three things: its key's slot in the index (a `u32`), its id's entry
//! in an array of `u32` states (how many values it received, whether one came as `ms` or at a
//! sample rate), and the end of the log, where the id and the value are appended. No per-timer
//! list of values and no per-timer state of ~100 bytes: at 100k timer names those were two or
//! three cache misses to memory per line (15 MB of slots and 100k lists of values), where the
//! index, the states and the log's end stay in cache like a counter's.
//!
//! Taking an interval is a swap; the flusher then groups the log by timer ([`TimerDelta`]):
//! one pass that moves each value into its timer's list (with room for all of them, from the
//! states), then each timer's totals in arrival order. The grouping is the same work the reader
//! did before, one push per value, done where it costs the reader nothing.
//!
//! Values within `timerSampleLimit` go to the log, whatever their sample rate (a rate is kept
//! beside its value's place, rare enough not to cost the common line anything); a value past
//! the limit is binned on arrival into its timer's circllhist, so memory stays bounded by the
//! limit however many values arrive. A timer grouped from the log is the one adding its values
//! one by one in arrival order gives ([`TimerSamples::add`], tested below).
//!
//! Like the counters' readers ([`crate::counters`]), a reader whose keys outnumber twice those
//! it saw in the interval plus [`CHURN_SLACK`] starts over, so names that churn cannot grow
//! memory without bound.

use compact_str::CompactString;
use hashbrown::HashMap;

use crate::counters::CHURN_SLACK;
use crate::key_index::{KeyIndex, KeyList};
use crate::table::TimerSamples;

/// A state's count of values received this interval (saturating: past `timerSampleLimit`
/// only "past it" matters, and the limit is at most 1e9).
const RECEIVED: u32 = (1 << 30) - 1;
/// A state's flag: a value came as a statsd timer (`ms`), not an `h`/`d` histogram.
const MILLISECONDS: u32 = 1 << 31;
/// A state's flag: a logged value came at a sample rate other than 1.
const RATED: u32 = 1 << 30;

/// A reader's timers: every key seen (until it starts over), this interval's values of each.
#[derive(Debug, Default)]
pub struct ReaderTimers {
    index: KeyIndex,
    /// By id: values received this interval ([`RECEIVED`]) and the flags.
    states: Vec<u32>,
    /// Values within the limit, in arrival order.
    log: ValueLog,
    /// Values past the limit, binned on arrival, by id.
    past_limit: HashMap<u32, TimerSamples>,
    /// The ids that received a value this interval, in order of their first.
    touched: Vec<u32>,
}

/// Values in arrival order and whose they are; the few at a sample rate other than 1 have
/// their rate noted by place.
#[derive(Debug, Default)]
struct ValueLog {
    ids: Vec<u32>,
    values: Vec<f64>,
    /// (place in the log, rate), in order of place.
    rates: Vec<(usize, f64)>,
}

impl ValueLog {
    /// The log so far, leaving an empty one with room for as many values (address space
    /// only: pages are mapped as they are written).
    fn take(&mut self) -> ValueLog {
        let room = self.ids.len();
        let ids: Vec<u32> = Vec::with_capacity(room);
        let values: Vec<f64> = Vec::with_capacity(room);
        crate::series::advise_huge_pages(ids.as_ptr().cast(), room * std::mem::size_of::<u32>());
        crate::series::advise_huge_pages(values.as_ptr().cast(), room * std::mem::size_of::<f64>());
        ValueLog {
            ids: std::mem::replace(&mut self.ids, ids),
            values: std::mem::replace(&mut self.values, values),
            rates: std::mem::take(&mut self.rates),
        }
    }
}

impl ReaderTimers {
    /// Starts loading the slot where the key with `hash` is looked for first.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        self.index.prefetch(hash);
    }

    /// Second stage, after [`ReaderTimers::prefetch`]: starts loading the key and the state
    /// the first probed slot points at.
    #[inline]
    pub fn prefetch_entry(&self, hash: u64) {
        if let Some(id) = self.index.likely_id(hash) {
            self.index.prefetch_key(id);
            if let Some(state) = self.states.get(id as usize) {
                crate::series::prefetch_read(state);
            }
        }
    }

    /// Adds `value`, sampled at `rate`, to the timer `key` (whose hash is `hash`); a value
    /// past the first `limit` of the interval is binned at once. `milliseconds`: it came as a
    /// statsd timer (`ms`).
    #[inline]
    pub fn add(&mut self, hash: u64, key: &str, value: f64, rate: f64, limit: usize, milliseconds: bool) {
        let id = self.index.id_or_insert(hash, key);
        let index = id as usize;
        if index >= self.states.len() {
            self.states.resize(index + 1, 0);
        }
        let state = self.states[index];
        let received = state & RECEIVED;
        if received == 0 {
            self.touched.push(id);
        }
        let mut flags = (state & !RECEIVED) | if milliseconds { MILLISECONDS } else { 0 };
        if (received as usize) < limit {
            if rate != 1.0 {
                flags |= RATED;
                self.log.rates.push((self.log.ids.len(), rate));
            }
            self.log.ids.push(id);
            self.log.values.push(value);
        } else {
            self.past_limit.entry(id).or_default().add(value, rate, 0);
        }
        self.states[index] = flags | (received + 1).min(RECEIVED);
    }

    /// The interval so far, leaving the keys (or none, when most of them were idle).
    pub fn take(&mut self) -> TimerDelta {
        let keys = self.index.keys().clone();
        if self.index.len() > 2 * self.touched.len() + CHURN_SLACK {
            self.index = KeyIndex::default();
        }
        let room = self.touched.len();
        TimerDelta {
            keys,
            touched: std::mem::replace(&mut self.touched, Vec::with_capacity(room)),
            states: std::mem::replace(&mut self.states, vec![0; self.index.len()]),
            log: self.log.take(),
            past_limit: std::mem::take(&mut self.past_limit),
        }
    }

    /// The number of keys held.
    #[cfg(test)]
    fn key_count(&self) -> usize {
        self.index.len()
    }
}

/// One reader's interval of timers, as taken: grouped by timer when iterated (on the
/// flusher's thread, not the reader's).
#[derive(Debug, Default)]
pub struct TimerDelta {
    keys: KeyList,
    touched: Vec<u32>,
    states: Vec<u32>,
    log: ValueLog,
    past_limit: HashMap<u32, TimerSamples>,
}

impl TimerDelta {
    /// The number of timers that received a value.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.touched.len()
    }

    /// True when no timer received a value.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.touched.is_empty()
    }

    /// Each touched timer's key and samples, in order of first arrival.
    fn group(self) -> Vec<(CompactString, TimerSamples)> {
        let TimerDelta { keys, touched, mut states, log, mut past_limit } = self;
        let flags: Vec<u32> = touched.iter().map(|&id| states[id as usize] & !RECEIVED).collect();
        let mut lists: Vec<Vec<f64>> = Vec::with_capacity(touched.len());
        for (place, &id) in touched.iter().enumerate() {
            let received = u64::from(states[id as usize] & RECEIVED);
            let past = past_limit.get(&id).map_or(0, |samples| samples.received);
            lists.push(Vec::with_capacity(received.saturating_sub(past) as usize));
            states[id as usize] = place as u32; // from here on, where the id's list is
        }
        let rated = scatter(&log, &states, &mut lists);
        touched
            .iter()
            .zip(lists)
            .zip(flags)
            .map(|((&id, values), flags)| {
                let mut samples = match flags & RATED {
                    0 => TimerSamples::waiting(values),
                    _ => replayed(&values, rated.get(&id).map_or(&[][..], Vec::as_slice)),
                };
                if let Some(past) = past_limit.remove(&id) {
                    samples.merge(past, usize::MAX);
                }
                samples.milliseconds = flags & MILLISECONDS != 0;
                (keys[id as usize].clone(), samples)
            })
            .collect()
    }
}

/// Moves each logged value to the end of its timer's list (`places`: an id's list), and
/// returns the rates of the values at one, by id: (place in the timer's list, rate).
fn scatter(log: &ValueLog, places: &[u32], lists: &mut [Vec<f64>]) -> HashMap<u32, Vec<(usize, f64)>> {
    let mut rated: HashMap<u32, Vec<(usize, f64)>> = HashMap::new();
    let mut rates = log.rates.iter().copied().peekable();
    let mut next_rated = rates.peek().map_or(usize::MAX, |&(place, _)| place);
    for (place, (&id, &value)) in log.ids.iter().zip(&log.values).enumerate() {
        let list = &mut lists[places[id as usize] as usize];
        list.push(value);
        if place == next_rated {
            let (_, rate) = rates.next().expect("peeked");
            rated.entry(id).or_default().push((list.len() - 1, rate));
            next_rated = rates.peek().map_or(usize::MAX, |&(place, _)| place);
        }
    }
    rated
}

/// The samples of values added one by one, in order, those at `rated` places with their rate
/// and the others at 1.
fn replayed(values: &[f64], rated: &[(usize, f64)]) -> TimerSamples {
    let mut samples = TimerSamples::default();
    let mut rates = rated.iter().copied().peekable();
    for (place, &value) in values.iter().enumerate() {
        let rate = match rates.peek() {
            Some(&(at, rate)) if at == place => {
                rates.next();
                rate
            }
            _ => 1.0,
        };
        samples.add(value, rate, usize::MAX);
    }
    samples
}

impl IntoIterator for TimerDelta {
    type Item = (CompactString, TimerSamples);
    type IntoIter = std::vec::IntoIter<(CompactString, TimerSamples)>;

    /// Groups the log by timer: each touched timer's key and samples, in order of first arrival.
    fn into_iter(self) -> Self::IntoIter {
        self.group().into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::series::hash_key;

    fn add(timers: &mut ReaderTimers, key: &str, value: f64) {
        timers.add(hash_key(key), key, value, 1.0, 100, true);
    }

    fn values_of(delta: TimerDelta) -> Vec<(String, Vec<f64>)> {
        delta.into_iter().map(|(key, samples)| (key.to_string(), samples.values)).collect()
    }

    #[test]
    fn takes_only_the_interval_and_keeps_the_keys() {
        let mut timers = ReaderTimers::default();
        let keys: Vec<String> = (0..5000).map(|i| format!("timer.{i}")).collect();
        keys.iter().enumerate().for_each(|(i, key)| add(&mut timers, key, i as f64));
        add(&mut timers, "timer.7", 1.5);
        let first = values_of(timers.take());
        assert_eq!(first.len(), 5000);
        assert_eq!(first[7], ("timer.7".to_string(), vec![7.0, 1.5]), "in order of first arrival");
        assert_eq!(timers.key_count(), 5000, "keys stay");
        add(&mut timers, "timer.9", 2.0);
        add(&mut timers, "new", 3.0);
        let second = values_of(timers.take());
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
        assert_eq!(timers.key_count(), 0, "started over");
        add(&mut timers, "t2", 2.0);
        assert_eq!(values_of(timers.take()), [("t2".to_string(), vec![2.0])]);
    }

    /// Lines of three timers interleaved, each (value, rate, is `ms`), against a limit: the
    /// grouped samples are those of adding each timer's values one by one in arrival order,
    /// settled (past the limit the histogram is compared, as the values are dropped).
    #[test]
    fn grouped_samples_are_those_of_adding_in_arrival_order() {
        type Lines = &'static [(&'static str, f64, f64, bool)];
        let cases: &[(&str, usize, Lines)] = &[
            ("rate 1, within the limit", 10, &[("a", 3.0, 1.0, true), ("b", 1.5, 1.0, false), ("a", 1.0, 1.0, true)]),
            (
                "a sample rate among rate-1 values",
                10,
                &[("a", 3.0, 1.0, true), ("a", 2.0, 0.5, true), ("b", 7.0, 0.1, true), ("a", 5.0, 1.0, true)],
            ),
            (
                "rates that carry fractions",
                10,
                &[("a", 1.0, 0.3, true), ("a", 2.0, 0.3, true), ("a", 3.0, 0.3, true), ("a", 4.0, 1.0, true)],
            ),
            (
                "past the limit",
                2,
                &[("a", 1.0, 1.0, true), ("b", 9.0, 1.0, false), ("a", 2.0, 1.0, true), ("a", 3.0, 1.0, true)],
            ),
            (
                "past the limit at a rate",
                2,
                &[("a", 1.0, 0.5, true), ("a", 2.0, 1.0, true), ("a", 3.0, 0.25, true), ("a", 0.5, 1.0, true)],
            ),
            ("zero limit", 0, &[("a", 1.0, 1.0, false), ("a", 2.0, 0.5, false)]),
            ("ms and h under one name", 10, &[("a", 1.0, 1.0, false), ("a", 2.0, 1.0, true)]),
        ];
        for &(case, limit, lines) in cases {
            let mut timers = ReaderTimers::default();
            let mut expected: Vec<(&str, TimerSamples)> = Vec::new();
            for &(key, value, rate, milliseconds) in lines {
                timers.add(hash_key(key), key, value, rate, limit, milliseconds);
                let place = match expected.iter().position(|(k, _)| *k == key) {
                    Some(place) => place,
                    None => {
                        expected.push((key, TimerSamples::default()));
                        expected.len() - 1
                    }
                };
                let samples = &mut expected[place].1;
                samples.add(value, rate, limit);
                samples.milliseconds |= milliseconds;
            }
            let grouped: Vec<_> = timers.take().into_iter().collect();
            assert_eq!(grouped.len(), expected.len(), "{case}");
            for ((key, mut got), (want_key, mut want)) in grouped.into_iter().zip(expected) {
                assert_eq!(key, want_key, "{case}");
                assert_eq!(got.is_complete(), want.is_complete(), "{case}: {key}");
                got.settle();
                want.settle();
                assert_eq!(got, want, "{case}: {key}");
            }
        }
    }

    #[test]
    fn the_log_starts_each_interval_empty() {
        let mut timers = ReaderTimers::default();
        (0..1000).for_each(|i| add(&mut timers, "a", f64::from(i)));
        let (_, busy) = timers.take().into_iter().next().unwrap();
        assert_eq!((busy.received, busy.values.len(), busy.histogram.count()), (1000, 0, 1000), "past the limit");
        add(&mut timers, "a", 5.0);
        let (_, samples) = timers.take().into_iter().next().unwrap();
        assert_eq!((samples.values, samples.received), (vec![5.0], 1));
    }
}
