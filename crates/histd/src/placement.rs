//! Where a global puts a forwarded batch on its own flush grid: in the flush of the interval
//! the batch belongs to, not whichever interval is open when it comes.
//!
//! A batch whose interval ends at `e` belongs to the global's flush at the first grid point at
//! or after `e + global.batchWaitMs` (the grid is `start + k × flushInterval`, as every flush
//! is). Batches come a little after their interval ends; the wait lets the usual ones reach
//! the flush they belong to even when the local's grid runs just ahead of the global's:
//!
//! - its flush is the one open now: merged into the current interval;
//! - a later one (it came within the wait, before the global's next grid point): held, and
//!   merged into the interval that flush takes as soon as the one before it is done;
//! - an earlier one, already flushed (a local's spool replayed after an outage, a partition
//!   read again by the member that took it over): **late**. Late batches of one interval are
//!   merged into an interval of their own, flushed with the next regular flush as a
//!   [`Snapshot`] marked `late`, stamped with the time of the flush they belong to (or at
//!   once, when `global.maxLateIntervals` are held or in the sinks' hands). The
//!   store merges it into the points already written there, so a range's answer holds
//!   exactly the samples of that range; see [`Snapshot::late`] for the other sinks.
//!
//! Where each batch came from ([`Receipt`]) travels with it, and a flush lets go only of what
//! it carried. A Kafka offset is committed as "everything before it": a flush never lets go of
//! an offset past one still held for a later flush (it is held with that one instead).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use agg::{Absorbing, Aggregator, Distinct, ForwardedGauge, Mergeable, Snapshot, TimerPart, TimerSamples};

/// Where a forwarded batch came from, when its source must know once a flush carried it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receipt {
    /// The file of `global.journalDir` it was written to, removed then.
    Journal(u64),
    /// A Kafka message: its offset is committed then (`generation`: the consumer's assignment
    /// it was read under; an older one's offsets were committed when it ended).
    Log {
        /// Its partition.
        partition: i32,
        /// Its offset.
        offset: i64,
        /// The assignment it was read under.
        generation: u64,
    },
}

/// A global's flush grid and how long it waits for batches past their interval's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    /// Unix milliseconds of the grid's origin (the daemon's start).
    pub start_ms: u64,
    /// `flushInterval`, in milliseconds.
    pub interval_ms: u64,
    /// `global.batchWaitMs`.
    pub wait_ms: u64,
}

impl Grid {
    /// The flush (a grid point, unix milliseconds) that a batch whose interval ends at
    /// `end_ms` belongs to: the first at or after `end_ms + wait`, before the origin too.
    pub fn home(&self, end_ms: u64) -> u64 {
        let due = end_ms.saturating_add(self.wait_ms);
        let interval = self.interval_ms.max(1);
        if due <= self.start_ms {
            self.start_ms - (self.start_ms - due) / interval * interval
        } else {
            self.start_ms + (due - self.start_ms).div_ceil(interval) * interval
        }
    }

    /// The flush that takes the interval open at `now_ms`: the first grid point after it.
    pub fn next_after(&self, now_ms: u64) -> u64 {
        crate::clock::next_grid_point(self.start_ms, self.interval_ms.max(1), now_ms)
    }
}

/// The second a flush at `home_ms` is stamped with (rounded, as every flush's), in
/// milliseconds: late intervals are kept per second, so that a sub-second `flushInterval`
/// never gives two of them the same second (Graphite keeps one value a second).
fn stamped_ms(home_ms: u64) -> u64 {
    home_ms.saturating_add(500) / 1000 * 1000
}

/// Where a batch went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The interval open now.
    Current,
    /// Held for the later flush at this grid point.
    Ahead(u64),
    /// A late interval of its own: the flush at this grid point was done before it came.
    Late(u64),
}

/// Where a forwarded batch's series go ([`Placement::keep`]).
#[derive(Debug)]
pub enum Destination<'a> {
    /// Merged into the interval open now, or into one held for a later flush.
    Merge(Absorbing<'a>),
    /// Merged into a late interval; a gauge into the current one too (a gauge is a state,
    /// and the newest one stays whatever interval its batch belongs to).
    Late {
        /// The late interval's.
        late: Absorbing<'a>,
        /// The current interval's.
        current: Absorbing<'a>,
    },
}

impl Destination<'_> {
    /// Takes a counter's interval sum.
    pub fn counter(&mut self, key: &str, value: f64) {
        match self {
            Destination::Merge(into) | Destination::Late { late: into, .. } => into.counter(key, value),
        }
    }

    /// Takes a timer's forwarded part.
    pub fn timer(&mut self, key: &str, part: &TimerPart<'_>) {
        match self {
            Destination::Merge(into) | Destination::Late { late: into, .. } => into.timer(key, part),
        }
    }

    /// Takes a timer's samples.
    pub fn timer_samples(&mut self, key: &str, samples: TimerSamples) {
        match self {
            Destination::Merge(into) | Destination::Late { late: into, .. } => into.timer_samples(key, samples),
        }
    }

    /// Takes a gauge's latest value.
    pub fn gauge(&mut self, key: &str, gauge: ForwardedGauge) {
        match self {
            Destination::Merge(into) => into.gauge(key, gauge),
            Destination::Late { late, current } => {
                current.gauge(key, gauge);
                late.gauge(key, gauge);
            }
        }
    }

    /// Takes a set.
    pub fn set(&mut self, key: &str, distinct: Distinct) {
        match self {
            Destination::Merge(into) | Destination::Late { late: into, .. } => into.set(key, distinct),
        }
    }

    /// Takes a whole batch.
    pub fn take(mut self, batch: Mergeable) {
        batch.counters.into_iter().for_each(|(key, value)| self.counter(&key, value));
        batch.timers.into_iter().for_each(|(key, samples)| self.timer_samples(&key, samples));
        batch.gauges.into_iter().for_each(|(key, gauge)| self.gauge(&key, gauge));
        batch.sets.into_iter().for_each(|(key, distinct)| self.set(&key, distinct));
    }
}

/// Batches held for a later flush, merged into an interval of their own: what they hold
/// grows with their series, not with how many came (each local's batch of the same series).
#[derive(Debug)]
struct Held {
    interval: Aggregator,
    receipts: Vec<Receipt>,
}

/// Late batches of one flush that was done before they came.
#[derive(Debug)]
struct LateInterval {
    aggregator: Aggregator,
    receipts: Vec<Receipt>,
}

/// What a global holds of forwarded batches outside its current interval.
#[derive(Debug)]
pub struct Placement {
    grid: Option<Grid>,
    /// The grid point of the flush that takes the current interval.
    current: u64,
    ahead: BTreeMap<u64, Held>,
    late: BTreeMap<u64, LateInterval>,
    /// `global.maxLateIntervals`: late intervals held and in the sinks' hands at once.
    max_late: usize,
    /// Late intervals handed to the sinks that not every sink has taken yet.
    late_in_flight: Arc<AtomicUsize>,
}

impl Default for Placement {
    fn default() -> Self {
        Placement {
            grid: None,
            current: 0,
            ahead: BTreeMap::new(),
            late: BTreeMap::new(),
            max_late: usize::MAX,
            late_in_flight: Arc::default(),
        }
    }
}

/// What one flush gives the sinks besides its own snapshot.
#[derive(Debug, Default)]
pub struct Flushed {
    /// The late intervals, oldest first, each stamped with its own flush's time.
    pub late: Vec<Snapshot>,
    /// Where what this flush carried (its own interval's batches and the late ones) came
    /// from, less what must wait for a later flush.
    pub receipts: Vec<Receipt>,
}

impl Placement {
    /// Places batches on `grid`, at most `max_late` late intervals held or in the sinks'
    /// hands at once; the interval open at `now_ms` is the current one.
    pub fn set_grid(&mut self, grid: Grid, max_late: usize, now_ms: u64) {
        self.current = grid.next_after(now_ms);
        self.grid = Some(grid);
        self.max_late = max_late.max(1);
    }

    /// Where a batch whose interval ends at `end_ms` goes (the current interval when no grid
    /// was set).
    pub fn place(&self, end_ms: u64) -> Place {
        let Some(grid) = self.grid else { return Place::Current };
        let home = grid.home(end_ms);
        match home.cmp(&self.current) {
            std::cmp::Ordering::Equal => Place::Current,
            std::cmp::Ordering::Greater => Place::Ahead(home),
            std::cmp::Ordering::Less => Place::Late(home),
        }
    }

    /// Late intervals held now and handed to sinks that have not all taken them.
    fn late_taken(&self) -> usize {
        self.late.len() + self.late_in_flight.load(Ordering::Relaxed)
    }

    /// True while no late interval can start: `global.maxLateIntervals` are held or in the
    /// sinks' hands.
    pub fn late_full(&self) -> bool {
        self.late_taken() >= self.max_late
    }

    /// True when a batch ending at `end_ms` would start a late interval past the bound.
    pub fn would_pass(&self, end_ms: u64) -> bool {
        match self.place(end_ms) {
            Place::Late(home) => !self.late.contains_key(&stamped_ms(home)) && self.late_full(),
            _ => false,
        }
    }

    /// True when the late intervals held should go to the sinks now rather than at the next
    /// flush: with those in the sinks' hands they fill the bound (a replayed backlog then
    /// goes as fast as the slowest sink takes it, not one bound's worth a flush).
    pub fn late_due(&self) -> bool {
        !self.late.is_empty() && self.late_full()
    }

    /// Counts `count` late intervals handed to the sinks; the counter returned is what each
    /// counts itself out of once every sink has taken it.
    pub fn hand_over(&self, count: usize) -> Arc<AtomicUsize> {
        self.late_in_flight.fetch_add(count, Ordering::Relaxed);
        self.late_in_flight.clone()
    }

    /// Hands where `place` says a batch's series go to `read` (which reads them into it),
    /// and notes the batch's receipt there (`open`: the current interval's receipts).
    pub fn keep<R>(
        &mut self,
        place: Place,
        receipt: Option<Receipt>,
        current: &mut Aggregator,
        open: &mut Vec<Receipt>,
        read: impl FnOnce(Destination<'_>) -> R,
    ) -> R {
        match place {
            Place::Current => {
                open.extend(receipt);
                read(Destination::Merge(current.absorbing()))
            }
            Place::Ahead(home) => {
                let held = self.ahead.entry(home).or_insert_with(|| Held {
                    interval: Aggregator::for_forwarded(current.config().clone()),
                    receipts: Vec::new(),
                });
                held.receipts.extend(receipt);
                read(Destination::Merge(held.interval.absorbing()))
            }
            Place::Late(home) => {
                let home = stamped_ms(home);
                let late = self.late.entry(home).or_insert_with(|| LateInterval {
                    aggregator: Aggregator::for_forwarded(current.config().clone()),
                    receipts: Vec::new(),
                });
                late.receipts.extend(receipt);
                read(Destination::Late { late: late.aggregator.absorbing(), current: current.absorbing() })
            }
        }
    }
    /// Before the final flush: what is held for later flushes goes into the current interval
    /// (those flushes will not come); their receipts into `receipts`.
    pub fn bring_forward(&mut self, current: &mut Aggregator, receipts: &mut Vec<Receipt>) {
        for (_, held) in std::mem::take(&mut self.ahead) {
            current.absorb_mergeable(held.interval.into_mergeable());
            receipts.extend(held.receipts);
        }
    }

    /// Right after the flush at `now_ms` took `carried` (its interval's receipts): the late
    /// intervals flushed, the batches held for the interval now open merged into `current`
    /// (their receipts into `receipts`, what the open interval carries), and what this flush
    /// lets go of.
    pub fn after_flush(
        &mut self,
        now_ms: u64,
        mut carried: Vec<Receipt>,
        current: &mut Aggregator,
        receipts: &mut Vec<Receipt>,
    ) -> Flushed {
        let late = self.flush_late(&mut carried);
        if let Some(grid) = self.grid {
            self.current = grid.next_after(now_ms);
        }
        while let Some(entry) = self.ahead.first_entry().filter(|entry| *entry.key() <= self.current) {
            let held = entry.remove();
            current.absorb_mergeable(held.interval.into_mergeable());
            receipts.extend(held.receipts);
        }
        self.hold_back(&mut carried, receipts);
        Flushed { late, receipts: carried }
    }

    /// The late intervals flushed now, between two flushes ([`Placement::late_due`]): what
    /// they carried, less what must wait for the open interval's flush or a later one
    /// (`open`: the open interval's receipts).
    pub fn take_late(&mut self, open: &mut Vec<Receipt>) -> Flushed {
        let mut carried = Vec::new();
        let late = self.flush_late(&mut carried);
        self.hold_back(&mut carried, open);
        Flushed { late, receipts: carried }
    }

    /// Every late interval held, flushed at its own time, oldest first; their receipts into
    /// `carried`.
    fn flush_late(&mut self, carried: &mut Vec<Receipt>) -> Vec<Snapshot> {
        let mut late = Vec::with_capacity(self.late.len());
        for (home, mut interval) in std::mem::take(&mut self.late) {
            let mut snapshot = interval.aggregator.flush(home);
            snapshot.late = true;
            snapshot.log_positions.offsets = offsets_of(&interval.receipts);
            late.push(snapshot);
            carried.append(&mut interval.receipts);
        }
        late
    }

    /// Moves the Kafka receipts of `carried` past the lowest offset of their partition still
    /// held (in `open`, the interval now open, or for a later flush) to where that one is:
    /// committing them now would commit it too, and a global killed before its flush would
    /// lose it.
    fn hold_back(&mut self, carried: &mut Vec<Receipt>, open: &mut Vec<Receipt>) {
        let mut lowest: HashMap<i32, (i64, Option<u64>)> = HashMap::new();
        let held = open.iter().map(|receipt| (receipt, None));
        let ahead = self.ahead.iter().flat_map(|(&home, held)| held.receipts.iter().map(move |r| (r, Some(home))));
        for (receipt, place) in held.chain(ahead) {
            if let Receipt::Log { partition, offset, .. } = *receipt {
                let entry = lowest.entry(partition).or_insert((offset, place));
                if offset < entry.0 {
                    *entry = (offset, place);
                }
            }
        }
        if lowest.is_empty() {
            return;
        }
        let mut kept = Vec::with_capacity(carried.len());
        for receipt in carried.drain(..) {
            let wait = match receipt {
                Receipt::Log { partition, offset, .. } => lowest.get(&partition).filter(|(low, _)| offset > *low),
                Receipt::Journal(_) => None,
            };
            match wait {
                None => kept.push(receipt),
                Some((_, None)) => open.push(receipt),
                Some((_, Some(home))) => {
                    let held = self.ahead.get_mut(home).unwrap_or_else(|| unreachable!("found in ahead above"));
                    held.receipts.push(receipt);
                }
            }
        }
        *carried = kept;
    }
}

/// The Kafka messages `receipts` name: `(partition, offset)`.
pub fn offsets_of(receipts: &[Receipt]) -> Vec<(i32, i64)> {
    let offsets = receipts.iter().filter_map(|receipt| match *receipt {
        Receipt::Log { partition, offset, .. } => Some((partition, offset)),
        Receipt::Journal(_) => None,
    });
    offsets.collect()
}

/// The highest offset of each partition `receipts` name (what a flush lets go of: every
/// message of the partition up to it is flushed, see [`Placement::after_flush`]).
pub fn marks_of(receipts: &[Receipt]) -> Vec<(i32, i64)> {
    let mut marks: BTreeMap<i32, i64> = BTreeMap::new();
    for (partition, offset) in offsets_of(receipts) {
        let mark = marks.entry(partition).or_insert(offset);
        *mark = (*mark).max(offset);
    }
    marks.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agg::AggConfig;

    const GRID: Grid = Grid { start_ms: 1_000_000, interval_ms: 10_000, wait_ms: 2_000 };

    #[test]
    fn a_batch_belongs_to_the_first_grid_point_after_its_end_and_the_wait() {
        let cases = [
            // (end of the batch's interval, its flush)
            (1_000_000, 1_010_000),
            (1_007_999, 1_010_000),
            (1_008_000, 1_010_000),
            (1_008_001, 1_020_000),
            (1_015_000, 1_020_000),
            (990_000, 1_000_000),
            (988_000, 990_000),
            (987_999, 990_000),
            (977_999, 980_000),
        ];
        for (end, home) in cases {
            assert_eq!(GRID.home(end), home, "end {end}");
        }
        assert_eq!(Grid { wait_ms: 0, ..GRID }.home(1_010_000), 1_010_000, "a grid point is its own flush");
    }

    fn counter(key: &str, value: f64) -> Mergeable {
        Mergeable { counters: vec![(key.into(), value)], ..Mergeable::default() }
    }

    fn log(partition: i32, offset: i64) -> Receipt {
        Receipt::Log { partition, offset, generation: 1 }
    }

    fn count(snapshot: &Snapshot, key: &str) -> Option<f64> {
        snapshot.counters.iter().find(|counter| counter.key == key).map(|counter| counter.count)
    }

    #[test]
    fn batches_go_to_the_flush_they_belong_to() {
        let mut placement = Placement::default();
        placement.set_grid(GRID, 16, 1_013_000); // the interval open is the one flushed at 1_020_000
        let cases = [
            (1_016_000, Place::Current),
            (1_018_000, Place::Current),
            (1_018_001, Place::Ahead(1_030_000)),
            (1_007_000, Place::Late(1_010_000)),
            (985_000, Place::Late(990_000)),
        ];
        for (end, want) in cases {
            assert_eq!(placement.place(end), want, "end {end}");
        }
        assert_eq!(Placement::default().place(0), Place::Current, "no grid: the current interval");
    }

    /// A late batch is flushed on its own, stamped with its flush's time, and one held ahead
    /// is in the flush after: neither is in the current one.
    #[test]
    fn late_and_early_batches_are_flushed_at_their_own_time() {
        let mut current = Aggregator::new(AggConfig::default());
        let mut placement = Placement::default();
        placement.set_grid(GRID, 16, 1_013_000);
        let (mut open, carried) = (Vec::new(), Vec::new());
        for (end, key) in [(1_016_000, "now"), (1_019_000, "early"), (1_005_000, "late"), (1_004_000, "late")] {
            let place = placement.place(end);
            placement.keep(place, None, &mut current, &mut Vec::new(), |into| into.take(counter(key, 1.0)));
        }
        assert_eq!(placement.late.len(), 1);
        let snapshot = current.flush(1_020_000);
        let flushed = placement.after_flush(1_020_000, carried, &mut current, &mut open);
        assert_eq!(
            (count(&snapshot, "now"), count(&snapshot, "early"), count(&snapshot, "late")),
            (Some(1.0), None, None)
        );
        let [late] = &flushed.late[..] else { panic!("one late interval: {:?}", flushed.late.len()) };
        assert!(late.late);
        assert_eq!(
            (late.timestamp, count(late, "late"), late.counters.len()),
            (1_010, Some(2.0), 1),
            "its series alone"
        );
        let next = current.flush(1_030_000);
        assert_eq!(count(&next, "early"), Some(1.0), "merged into the interval it belongs to");
    }

    /// At most `max_late` late intervals are held or in the sinks' hands: past it a batch
    /// that would start one more waits; with some held, they are due to the sinks at once;
    /// each one a sink has taken makes room again.
    #[test]
    fn late_intervals_are_bounded_with_those_the_sinks_have_not_taken() {
        let mut current = Aggregator::new(AggConfig::default());
        let mut placement = Placement::default();
        placement.set_grid(GRID, 2, 1_013_000);
        for end in [995_000, 985_000] {
            assert!(!placement.would_pass(end) && !placement.late_due());
            placement.keep(placement.place(end), None, &mut current, &mut Vec::new(), |into| {
                into.take(counter("late", 1.0))
            });
        }
        assert!(placement.would_pass(975_000), "a third interval waits");
        assert!(!placement.would_pass(985_500), "one held takes more batches");
        assert!(placement.late_due(), "the two held go to the sinks now");
        let mut open = vec![log(0, 1)];
        let flushed = placement.take_late(&mut open);
        assert_eq!(flushed.late.len(), 2);
        let in_flight = placement.hand_over(2);
        assert!(placement.would_pass(975_000) && !placement.late_due(), "still in the sinks' hands");
        in_flight.fetch_sub(1, Ordering::Relaxed);
        assert!(!placement.would_pass(975_000), "a sink took one");
    }

    #[test]
    fn a_flush_never_lets_go_of_an_offset_past_one_still_held() {
        let mut current = Aggregator::new(AggConfig::default());
        let mut placement = Placement::default();
        placement.set_grid(GRID, 16, 1_013_000);
        // Partition 0: offset 5 held two flushes ahead; partition 1: nothing held.
        placement.keep(Place::Ahead(1_040_000), Some(log(0, 5)), &mut current, &mut Vec::new(), |into| {
            into.take(counter("a", 1.0))
        });
        placement.keep(Place::Late(1_000_000), Some(log(0, 7)), &mut current, &mut Vec::new(), |into| {
            into.take(counter("b", 1.0))
        });
        let carried = vec![log(0, 4), log(0, 6), log(1, 9), Receipt::Journal(3)];
        let mut open = Vec::new();
        let flushed = placement.after_flush(1_020_000, carried, &mut current, &mut open);
        assert_eq!(flushed.receipts, vec![log(0, 4), log(1, 9), Receipt::Journal(3)]);
        // At the next flush the interval 5 belongs to opens: it joins it, with 6 and 7.
        let flushed = placement.after_flush(1_030_000, Vec::new(), &mut current, &mut open);
        assert!(flushed.receipts.is_empty());
        open.sort_by_key(|receipt| format!("{receipt:?}"));
        assert_eq!(open, vec![log(0, 5), log(0, 6), log(0, 7)]);
    }

    #[test]
    fn the_final_flush_takes_what_was_held_for_later() {
        let mut current = Aggregator::new(AggConfig::default());
        let mut placement = Placement::default();
        placement.set_grid(GRID, 16, 1_013_000);
        let early = |into: Destination<'_>| into.take(counter("early", 2.0));
        placement.keep(Place::Ahead(1_030_000), Some(Receipt::Journal(1)), &mut current, &mut Vec::new(), early);
        let mut receipts = Vec::new();
        placement.bring_forward(&mut current, &mut receipts);
        assert_eq!(receipts, vec![Receipt::Journal(1)]);
        assert_eq!(count(&current.flush(1_014_000), "early"), Some(2.0));
    }

    /// Batches held for a later flush merge into one interval of their own as they come (a
    /// timer's values and counts of every local in it, a gauge the newest), which joins the
    /// interval its flush takes when that one opens.
    #[test]
    fn batches_held_for_later_merge_into_one_interval_as_they_come() {
        let mut current = Aggregator::new(AggConfig::default());
        let mut placement = Placement::default();
        placement.set_grid(GRID, 16, 1_013_000);
        for (local, values) in [(1u32, [5.0, 7.0]), (2, [1.0, 2.0])] {
            let mut batch = counter("held", 1.0);
            let mut samples = TimerSamples::default();
            values.iter().for_each(|&value| samples.add(value, 1.0, 100));
            batch.timers.push(("t".into(), samples));
            batch.gauges.push(("g".into(), ForwardedGauge { value: f64::from(local), updated_unix_s: local.into() }));
            let receipt = Some(Receipt::Journal(local.into()));
            placement.keep(Place::Ahead(1_030_000), receipt, &mut current, &mut Vec::new(), |into| into.take(batch));
        }
        assert_eq!(placement.ahead.len(), 1, "one interval held");
        let before = current.flush(1_020_000);
        assert_eq!(count(&before, "held"), None, "not in the flush before its own");
        let mut open = Vec::new();
        let flushed = placement.after_flush(1_020_000, Vec::new(), &mut current, &mut open);
        assert!(flushed.receipts.is_empty());
        assert_eq!(open, vec![Receipt::Journal(1), Receipt::Journal(2)], "its interval opened");
        let snapshot = current.flush(1_030_000);
        assert_eq!(count(&snapshot, "held"), Some(2.0));
        let timer = snapshot.timers.iter().find(|timer| timer.key == "t").expect("the timer");
        let totals = &timer.totals;
        assert_eq!((totals.received, totals.sum, totals.min, totals.max), (4, 15.0, 1.0, 7.0), "every local's values");
        let gauge = snapshot.gauges.iter().find(|gauge| gauge.key == "g").expect("the gauge");
        assert_eq!(gauge.value, 2.0, "the newest");
    }
}
