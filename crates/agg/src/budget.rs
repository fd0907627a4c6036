//! Cardinality budgets: how many series the aggregator keeps of each type, how many tag sets
//! one name may have, how many values one tag key may take. A key new to the aggregator is
//! admitted while it fits; past a budget it is folded into an overflow series (its samples are
//! kept, counted, under another name), never dropped in silence:
//!
//! - past `maxSeriesPerName` or `maxTagValues`, into `<name>.__overflow__` (no tags);
//! - past `maxSeries` of its type, into [`OVERFLOW`].
//!
//! Overflow series are outside the budgets: there is at most one a name admitted, and one a
//! type. The ledger counts what is admitted; it is rebuilt from the keys held when the
//! aggregator deletes some (idle series, `del*`, forgets). Names that bring new series fastest
//! are kept in a small table of offenders, whatever the budgets.

use std::borrow::Cow;

use compact_str::CompactString;
use hashbrown::{HashMap, HashSet};
use proto::key::split_series_key;

use crate::metric_type::MetricType;

/// The series every key past `maxSeries` of its type is folded into.
pub const OVERFLOW: &str = "__overflow__";
/// The suffix of a name's overflow series.
pub const NAME_OVERFLOW_SUFFIX: &str = ".__overflow__";

/// The budgets (config keys in parentheses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    /// Series kept of each type: counters, timers, gauges, sets (`maxSeries`).
    pub max_series: [usize; 4],
    /// Tag sets one metric name may have (`maxSeriesPerName`).
    pub max_series_per_name: usize,
    /// Values one tag key may take, and tag keys one type may use (`maxTagValues`).
    pub max_tag_values: usize,
    /// Members a set keeps exactly in an interval; past it, a HyperLogLog sketch counts them
    /// (`maxSetMembers`).
    pub max_set_members: usize,
}

impl Default for Budgets {
    /// Sized so that a laptop survives a cardinality explosion: about 150 MB of counters,
    /// timers' histograms and sets' members at the worst.
    fn default() -> Self {
        Budgets {
            max_series: [1_000_000, 200_000, 1_000_000, 100_000],
            max_series_per_name: 10_000,
            max_tag_values: 10_000,
            max_set_members: 10_000,
        }
    }
}

/// Why a new series was folded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoldReason {
    /// Its type had `maxSeries` series.
    MaxSeries,
    /// Its name had `maxSeriesPerName` tag sets.
    SeriesPerName,
    /// One of its tags brought a value (or key) past `maxTagValues`.
    TagValues,
}

impl FoldReason {
    /// Every reason, in the order of [`Ledger::folded`].
    pub const ALL: [FoldReason; 3] = [FoldReason::MaxSeries, FoldReason::SeriesPerName, FoldReason::TagValues];

    /// As `stats` and `/metrics` write it.
    pub fn as_str(self) -> &'static str {
        match self {
            FoldReason::MaxSeries => "max_series",
            FoldReason::SeriesPerName => "series_per_name",
            FoldReason::TagValues => "tag_values",
        }
    }
}

/// True for the overflow series' keys (outside the budgets).
pub fn is_overflow(key: &str) -> bool {
    key == OVERFLOW || key.ends_with(NAME_OVERFLOW_SUFFIX)
}

/// What one type holds against the budgets.
#[derive(Debug, Default)]
struct TypeLedger {
    series: usize,
    /// Tag sets per tagged name (an untagged name is one series: not listed).
    per_name: HashMap<CompactString, u32>,
    /// Values seen per tag key (`k` of `k=v`; a bare tag is a key with the value "").
    tag_values: HashMap<CompactString, HashSet<CompactString>>,
}

impl TypeLedger {
    /// Why `key` may not be admitted, if it may not.
    fn refusal(&self, key: &str, budgets: &Budgets, max_series: usize) -> Option<FoldReason> {
        if self.series >= max_series {
            return Some(FoldReason::MaxSeries);
        }
        let (name, tags) = split_series_key(key);
        if name.len() == key.len() {
            return None; // no tags
        }
        if self.per_name.get(name).is_some_and(|&n| n as usize >= budgets.max_series_per_name) {
            return Some(FoldReason::SeriesPerName);
        }
        let mut new_keys = 0;
        for (tag, value) in tags {
            match self.tag_values.get(tag) {
                Some(values) if !values.contains(value) && values.len() >= budgets.max_tag_values => {
                    return Some(FoldReason::TagValues)
                }
                None => new_keys += 1,
                _ => {}
            }
        }
        (new_keys > 0 && self.tag_values.len() + new_keys > budgets.max_tag_values).then_some(FoldReason::TagValues)
    }

    fn count(&mut self, key: &str) {
        self.series += 1;
        let (name, tags) = split_series_key(key);
        if name.len() == key.len() {
            return; // no tags
        }
        *self.per_name.entry_ref(name).or_insert(0) += 1;
        for (tag, value) in tags {
            let values = self.tag_values.entry_ref(tag).or_default();
            if !values.contains(value) {
                values.insert(CompactString::from(value));
            }
        }
    }
}

/// The budgets, what each type holds against them, what was folded, and the offenders.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    budgets: Budgets,
    types: [TypeLedger; 4],
    /// New series folded, by [`FoldReason`], since start.
    folded: [u64; 3],
    /// Types whose keys were deleted since their ledger was built.
    stale: [bool; 4],
    offenders: Offenders,
}

impl Ledger {
    /// A ledger that holds nothing yet, keeping `budgets`.
    pub(crate) fn new(budgets: Budgets) -> Self {
        Ledger { budgets, ..Ledger::default() }
    }

    /// New budgets: every type is counted again before the next admission (series already
    /// held stay, even past a smaller budget).
    pub(crate) fn set_budgets(&mut self, budgets: Budgets) {
        self.budgets = budgets;
        self.stale = [true; 4];
    }

    /// The key a series new to `kind` is kept under: its own (admitted and counted) or an
    /// overflow series' (counted as folded).
    pub(crate) fn admit<'k>(&mut self, kind: MetricType, key: &'k str) -> Cow<'k, str> {
        if is_overflow(key) {
            return Cow::Borrowed(key);
        }
        let at = kind as usize;
        let refusal = self.types[at].refusal(key, &self.budgets, self.budgets.max_series[at]);
        self.offenders.record(split_series_key(key).0, refusal.is_some());
        match refusal {
            None => {
                self.types[at].count(key);
                Cow::Borrowed(key)
            }
            Some(reason) => {
                self.folded[reason as usize] += 1;
                match reason {
                    FoldReason::MaxSeries => Cow::Borrowed(OVERFLOW),
                    _ => Cow::Owned(format!("{}{NAME_OVERFLOW_SUFFIX}", split_series_key(key).0)),
                }
            }
        }
    }

    /// Marks `kind` for a rebuild: some of its keys were deleted.
    pub(crate) fn deleted(&mut self, kind: MetricType) {
        self.stale[kind as usize] = true;
    }

    /// True when `kind`'s ledger must be rebuilt before the next admission.
    pub(crate) fn is_stale(&self, kind: MetricType) -> bool {
        self.stale[kind as usize]
    }

    /// Counts `kind` again from the keys it holds.
    pub(crate) fn rebuild<'a>(&mut self, kind: MetricType, keys: impl Iterator<Item = &'a str>) {
        let ledger = &mut self.types[kind as usize];
        *ledger = TypeLedger::default();
        for key in keys.filter(|key| !is_overflow(key)) {
            ledger.count(key);
        }
        self.stale[kind as usize] = false;
    }

    /// At each flush: the offenders' rates move on by one interval.
    pub(crate) fn flushed(&mut self) {
        self.offenders.interval_ended();
    }

    /// What the budgets hold now.
    pub(crate) fn report(&self, interval_seconds: f64) -> BudgetReport {
        BudgetReport {
            budgets: self.budgets,
            series: std::array::from_fn(|at| self.types[at].series),
            names_at_budget: std::array::from_fn(|at| {
                let limit = self.budgets.max_series_per_name;
                self.types[at].per_name.values().filter(|&&n| n as usize >= limit).count()
            }),
            folded: self.folded,
            offenders: self.offenders.top(interval_seconds),
        }
    }
}

/// The budgets and what they hold, for `stats`, `/health`, `/metrics` and the web page.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetReport {
    /// The budgets.
    pub budgets: Budgets,
    /// Series admitted of each type (counters, timers, gauges, sets), overflow series aside.
    pub series: [usize; 4],
    /// Names at `maxSeriesPerName` of each type.
    pub names_at_budget: [usize; 4],
    /// New series folded since start, by [`FoldReason`].
    pub folded: [u64; 3],
    /// The names bringing new series fastest.
    pub offenders: Vec<Offender>,
}

/// A name pattern that brings new series.
#[derive(Debug, Clone, PartialEq)]
pub struct Offender {
    /// The metric name, its parts holding digits written `*` (`user.*.logins`): names that
    /// differ only by an id are one offender.
    pub pattern: String,
    /// New series per second, averaged over the last flushes (about a minute at 10 s).
    pub new_series_per_second: f64,
    /// New series since it entered the table.
    pub new_series: u64,
    /// Of them, folded into an overflow series.
    pub folded: u64,
}

/// Slots in the offenders' table: a space-saving summary, so a million new names take no
/// more room than a few.
const OFFENDER_SLOTS: usize = 32;
/// Offenders listed.
const OFFENDERS_LISTED: usize = 10;
/// The weight of the newest interval in an offender's average.
const RATE_WEIGHT: f64 = 0.2;

#[derive(Debug, Default)]
struct Offenders {
    slots: Vec<OffenderSlot>,
    /// The pattern being looked up (kept for its room: no allocation per new series).
    scratch: String,
    /// The slot found last (a burst of new names mostly repeats one pattern).
    last: usize,
}

#[derive(Debug)]
struct OffenderSlot {
    pattern: String,
    this_interval: u64,
    average: f64,
    new_series: u64,
    folded: u64,
}

impl OffenderSlot {
    fn weight(&self) -> f64 {
        self.average + self.this_interval as f64
    }
}

impl Offenders {
    fn record(&mut self, name: &str, folded: bool) {
        write_pattern(name, &mut self.scratch);
        let pattern = self.scratch.as_str();
        let found = match self.slots.get(self.last) {
            Some(slot) if slot.pattern == pattern => Some(self.last),
            _ => self.slots.iter().position(|slot| slot.pattern == pattern),
        };
        let at = match found {
            Some(at) => at,
            None if self.slots.len() < OFFENDER_SLOTS => {
                let pattern = pattern.to_string();
                self.slots.push(OffenderSlot { pattern, this_interval: 0, average: 0.0, new_series: 0, folded: 0 });
                self.slots.len() - 1
            }
            None => {
                // The lightest slot is taken over (space saving: its weight carries on).
                let (at, _) = self
                    .slots
                    .iter()
                    .enumerate()
                    .min_by(|a, b| a.1.weight().total_cmp(&b.1.weight()))
                    .unwrap_or((0, &self.slots[0]));
                let slot = &mut self.slots[at];
                slot.pattern.clear();
                slot.pattern.push_str(pattern);
                slot.new_series = 0;
                slot.folded = 0;
                at
            }
        };
        self.last = at;
        let slot = &mut self.slots[at];
        slot.this_interval += 1;
        slot.new_series += 1;
        slot.folded += u64::from(folded);
    }

    fn interval_ended(&mut self) {
        for slot in &mut self.slots {
            slot.average = RATE_WEIGHT * slot.this_interval as f64 + (1.0 - RATE_WEIGHT) * slot.average;
            slot.this_interval = 0;
        }
        self.slots.retain(|slot| slot.average >= 0.01);
    }

    fn top(&self, interval_seconds: f64) -> Vec<Offender> {
        let mut slots: Vec<&OffenderSlot> = self.slots.iter().collect();
        slots.sort_by(|a, b| b.weight().total_cmp(&a.weight()).then_with(|| a.pattern.cmp(&b.pattern)));
        slots
            .into_iter()
            .take(OFFENDERS_LISTED)
            .map(|slot| Offender {
                pattern: slot.pattern.clone(),
                new_series_per_second: slot.average.max(slot.this_interval as f64) / interval_seconds.max(0.001),
                new_series: slot.new_series,
                folded: slot.folded,
            })
            .collect()
    }
}

/// Writes `name` with each dot-separated part that holds a digit as `*` into `pattern`.
fn write_pattern(name: &str, pattern: &mut String) {
    pattern.clear();
    for (i, part) in name.split('.').enumerate() {
        if i > 0 {
            pattern.push('.');
        }
        pattern.push_str(if part.bytes().any(|b| b.is_ascii_digit()) { "*" } else { part });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(max_series: usize, per_name: usize, tag_values: usize) -> Ledger {
        Ledger::new(Budgets {
            max_series: [max_series; 4],
            max_series_per_name: per_name,
            max_tag_values: tag_values,
            max_set_members: 10,
        })
    }

    #[test]
    fn keys_past_a_budget_fold_into_an_overflow_series() {
        // (budgets, keys admitted in order, the key each is kept under)
        type Case = ((usize, usize, usize), &'static [(&'static str, &'static str)]);
        let cases: &[Case] = &[
            ((2, 10, 10), &[("a", "a"), ("b", "b"), ("c", OVERFLOW), ("d", OVERFLOW)]),
            ((10, 2, 10), &[("r;x=1", "r;x=1"), ("r;x=2", "r;x=2"), ("r;x=3", "r.__overflow__"), ("s;x=3", "s;x=3")]),
            ((10, 10, 2), &[("r;u=1", "r;u=1"), ("q;u=2", "q;u=2"), ("q;u=3", "q.__overflow__"), ("q;u=1", "q;u=1")]),
            (
                (10, 10, 2),
                &[("r;a=1", "r;a=1"), ("r;b=1", "r;b=1"), ("r;c=1", "r.__overflow__"), ("r;a=1;b=1", "r;a=1;b=1")],
            ),
            ((1, 10, 10), &[("x.__overflow__", "x.__overflow__"), ("a", "a"), (OVERFLOW, OVERFLOW)]),
        ];
        for ((max, per_name, values), keys) in cases {
            let mut ledger = ledger(*max, *per_name, *values);
            for (key, kept) in keys.iter() {
                assert_eq!(
                    ledger.admit(MetricType::Counters, key),
                    *kept,
                    "{key} with budgets {max} {per_name} {values}"
                );
            }
        }
    }

    #[test]
    fn folds_are_counted_and_a_rebuild_makes_room() {
        let mut ledger = ledger(2, 10, 10);
        for key in ["a", "b", "c", "d"] {
            ledger.admit(MetricType::Timers, key);
        }
        assert_eq!(ledger.admit(MetricType::Gauges, "c"), "c", "budgets are per type");
        let report = ledger.report(10.0);
        assert_eq!(report.series, [0, 2, 1, 0]);
        assert_eq!(report.folded, [2, 0, 0]);
        ledger.deleted(MetricType::Timers);
        assert!(ledger.is_stale(MetricType::Timers));
        ledger.rebuild(MetricType::Timers, ["a", OVERFLOW].into_iter());
        assert_eq!(ledger.admit(MetricType::Timers, "c"), "c", "b was deleted: room for one");
        assert_eq!(ledger.admit(MetricType::Timers, "d"), OVERFLOW);
    }

    #[test]
    fn offenders_are_name_patterns_by_rate() {
        let mut ledger = ledger(1000, 1000, 1000);
        for i in 0..300 {
            ledger.admit(MetricType::Counters, &format!("user.{i}.logins"));
        }
        for i in 0..5 {
            ledger.admit(MetricType::Counters, &format!("api;route=/r{i}"));
        }
        // More patterns than slots, each bringing one series: the table keeps its size.
        let letters = |i: usize| (0..3).map(|d| (b'a' + (i / 26usize.pow(d) % 26) as u8) as char).collect::<String>();
        for i in 0..2000 {
            ledger.admit(MetricType::Counters, &format!("noise.{}", letters(i)));
        }
        assert_eq!(ledger.offenders.slots.len(), OFFENDER_SLOTS);
        ledger.flushed();
        let top = ledger.report(10.0).offenders;
        assert_eq!(top[0].pattern, "user.*.logins");
        assert_eq!((top[0].new_series, top[0].folded), (300, 0));
        assert!((top[0].new_series_per_second - 300.0 * RATE_WEIGHT / 10.0).abs() < 1e-9, "{top:?}");
        assert!(top.len() <= OFFENDERS_LISTED);
        let mut pattern = String::new();
        write_pattern("a.b2.c", &mut pattern);
        assert_eq!(pattern, "a.*.c");
    }
}
