//! A timer's raw values in arrival order, as compact as they allow: 2 bytes a value while every
//! value is a whole number of milliseconds below 65,536 (what most statsd clients send), 4
//! bytes while every value is a whole number of thousandths between 0 and 4,294,967.295
//! (fractions to the microsecond), 8 bytes from the first one that is neither.
//!
//! A value is kept compact only when it reads back exactly: `milliseconds as f64`, or
//! `thousandths / 1000.0` (one correctly rounded division), is the very double that arrived,
//! so every statistic computed from the values is the one the doubles give. Both mappings are
//! monotonic, so sorting the compact values sorts the values; a list moves to a wider form
//! once, at the first value its form cannot hold, keeping every value it had.

use std::borrow::Cow;

/// A timer's raw values, compact while they allow it (see the module's documentation).
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// Every value is a whole number of milliseconds.
    Milliseconds(Vec<u16>),
    /// Every value is `thousandths / 1000.0`.
    Thousandths(Vec<u32>),
    /// The values as they arrived.
    Doubles(Vec<f64>),
}

impl Default for Values {
    fn default() -> Self {
        Values::Milliseconds(Vec::new())
    }
}

/// `value` as whole milliseconds, when it is one between 0 and 65,535 (not -0.0).
#[inline]
fn milliseconds(value: f64) -> Option<u16> {
    if !(value >= 0.0 && value <= f64::from(u16::MAX)) || value.is_sign_negative() {
        return None;
    }
    let candidate = value as u16;
    (f64::from(candidate) == value).then_some(candidate)
}

/// `value` as a whole number of thousandths, when it reads back exactly as `value` (and is
/// neither negative, nor -0.0, nor past `u32::MAX` thousandths).
#[inline]
fn thousandths(value: f64) -> Option<u32> {
    let scaled = value * 1000.0;
    if !(scaled >= 0.0 && scaled <= f64::from(u32::MAX)) || value.is_sign_negative() {
        return None;
    }
    // Rounded to the nearest (`round` would be a library call without SSE4.1).
    let candidate = (scaled + 0.5) as u32;
    (f64::from(candidate) / 1000.0 == value).then_some(candidate)
}

/// The value `thousandths` stands for.
#[inline]
fn value_of(thousandths: u32) -> f64 {
    f64::from(thousandths) / 1000.0
}

impl Values {
    /// Empty, with room for `capacity` compact values.
    pub fn with_capacity(capacity: usize) -> Values {
        Values::Milliseconds(Vec::with_capacity(capacity))
    }

    /// As compact as every value allows.
    pub fn from_doubles(values: Vec<f64>) -> Values {
        if let Some(compact) = values.iter().map(|&value| milliseconds(value)).collect::<Option<Vec<u16>>>() {
            return Values::Milliseconds(compact);
        }
        match values.iter().map(|&value| thousandths(value)).collect::<Option<Vec<u32>>>() {
            Some(compact) => Values::Thousandths(compact),
            None => Values::Doubles(values),
        }
    }

    /// Appends `value`.
    #[inline]
    pub fn push(&mut self, value: f64) {
        match self {
            Values::Milliseconds(list) => match milliseconds(value) {
                Some(compact) => list.push(compact),
                None => self.push_widened(value),
            },
            Values::Thousandths(list) => match thousandths(value) {
                Some(compact) => list.push(compact),
                None => self.widen_to_doubles().push(value),
            },
            Values::Doubles(list) => list.push(value),
        }
    }

    /// Appends `value`, which whole milliseconds cannot hold, to a list of them made wider.
    #[cold]
    fn push_widened(&mut self, value: f64) {
        match thousandths(value) {
            Some(compact) => self.widen_to_thousandths().push(compact),
            None => self.widen_to_doubles().push(value),
        }
    }

    /// Whole milliseconds as thousandths from now on (with the room they had).
    fn widen_to_thousandths(&mut self) -> &mut Vec<u32> {
        if let Values::Milliseconds(list) = self {
            let mut wider = Vec::with_capacity(list.capacity().max(list.len() + 1));
            wider.extend(list.iter().map(|&ms| u32::from(ms) * 1000));
            *self = Values::Thousandths(wider);
        }
        match self {
            Values::Thousandths(list) => list,
            _ => unreachable!("widen_to_thousandths is only asked of whole milliseconds"),
        }
    }

    /// The values as doubles from now on (with the room they had): the first that does not
    /// fit the compact form arrived.
    #[cold]
    fn widen_to_doubles(&mut self) -> &mut Vec<f64> {
        if !matches!(self, Values::Doubles(_)) {
            let mut doubles = Vec::with_capacity(self.capacity().max(self.len() + 1));
            doubles.extend(self.iter());
            *self = Values::Doubles(doubles);
        }
        match self {
            Values::Doubles(list) => list,
            _ => unreachable!("made doubles above"),
        }
    }

    /// How many values.
    pub fn len(&self) -> usize {
        match self {
            Values::Milliseconds(list) => list.len(),
            Values::Thousandths(list) => list.len(),
            Values::Doubles(list) => list.len(),
        }
    }

    /// Bytes the values take as they are held (2, 4 or 8 each).
    pub fn bytes(&self) -> usize {
        match self {
            Values::Milliseconds(list) => list.len() * 2,
            Values::Thousandths(list) => list.len() * 4,
            Values::Doubles(list) => list.len() * 8,
        }
    }

    /// True without values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many values fit without growing.
    pub fn capacity(&self) -> usize {
        match self {
            Values::Milliseconds(list) => list.capacity(),
            Values::Thousandths(list) => list.capacity(),
            Values::Doubles(list) => list.capacity(),
        }
    }

    /// Gives back the room past the values when it is more than a quarter of them (a list
    /// that grew by doubling); `realloc` shrinks in place.
    pub fn shrink_spare(&mut self) {
        let (len, capacity) = (self.len(), self.capacity());
        if capacity > len + len / 4 + 4 {
            match self {
                Values::Milliseconds(list) => list.shrink_to_fit(),
                Values::Thousandths(list) => list.shrink_to_fit(),
                Values::Doubles(list) => list.shrink_to_fit(),
            }
        }
    }

    /// The address just past the last value (where the next one goes), to prefetch.
    #[inline]
    pub fn end_address(&self) -> *const u8 {
        match self {
            Values::Milliseconds(list) => list.as_ptr().wrapping_add(list.len()).cast(),
            Values::Thousandths(list) => list.as_ptr().wrapping_add(list.len()).cast(),
            Values::Doubles(list) => list.as_ptr().wrapping_add(list.len()).cast(),
        }
    }

    /// The values in order.
    pub fn iter(&self) -> impl Iterator<Item = f64> + '_ {
        let (milliseconds, thousandths, doubles): (&[u16], &[u32], &[f64]) = match self {
            Values::Milliseconds(list) => (list, &[], &[]),
            Values::Thousandths(list) => (&[], list, &[]),
            Values::Doubles(list) => (&[], &[], list),
        };
        let milliseconds = milliseconds.iter().map(|&ms| f64::from(ms));
        milliseconds.chain(thousandths.iter().map(|&compact| value_of(compact))).chain(doubles.iter().copied())
    }

    /// The first `count` values in order.
    pub fn prefix(&self, count: usize) -> impl Iterator<Item = f64> + '_ {
        self.iter().take(count)
    }

    /// The values as doubles: borrowed when they are.
    pub fn doubles(&self) -> Cow<'_, [f64]> {
        match self {
            Values::Doubles(list) => Cow::Borrowed(list),
            compact => Cow::Owned(compact.iter().collect()),
        }
    }

    /// The values as doubles.
    pub fn into_doubles(self) -> Vec<f64> {
        match self {
            Values::Doubles(list) => list,
            compact => compact.iter().collect(),
        }
    }

    /// Appends `other`'s values after these (made as wide as `other`'s need).
    pub fn extend(&mut self, other: Values) {
        match (&mut *self, other) {
            (Values::Milliseconds(list), Values::Milliseconds(more)) => list.extend(more),
            (Values::Thousandths(list), Values::Thousandths(more)) => list.extend(more),
            (Values::Doubles(list), more) => list.extend(more.iter()),
            (_, more) => {
                self.reserve(more.len());
                more.iter().for_each(|value| self.push(value));
            }
        }
    }

    /// Room for `more` values past these.
    pub fn reserve(&mut self, more: usize) {
        match self {
            Values::Milliseconds(list) => list.reserve(more),
            Values::Thousandths(list) => list.reserve(more),
            Values::Doubles(list) => list.reserve(more),
        }
    }

    /// Sorts the first `count` values as Etsy's statsd sorts them: ascending, equal values in
    /// arrival order.
    pub fn sort_prefix_like_etsy(&mut self, count: usize) {
        match self {
            Values::Milliseconds(list) => sort_compact(&mut list[..count]),
            Values::Thousandths(list) => sort_compact(&mut list[..count]),
            Values::Doubles(list) => sort_doubles_like_etsy(&mut list[..count]),
        }
    }
}

/// Lists at least this long are sorted by radix (a pass a byte that varies) rather than by
/// comparisons: a timer at the sample limit (8192 values) sorts in under a third of the time
/// (`cargo bench -p agg --bench table -- "sort 8192"`).
const RADIX_SORT_FROM: usize = 256;

/// Whole milliseconds or thousandths: sorted by their bytes.
trait RadixKey: Copy + Default + Ord {
    /// How many bytes a value has.
    const BYTES: u32;
    /// The value's byte at `index` (0 the lowest).
    fn byte(self, index: u32) -> usize;
}

impl RadixKey for u16 {
    const BYTES: u32 = 2;
    #[inline]
    fn byte(self, index: u32) -> usize {
        usize::from((self >> (8 * index)) as u8)
    }
}

impl RadixKey for u32 {
    const BYTES: u32 = 4;
    #[inline]
    fn byte(self, index: u32) -> usize {
        usize::from((self >> (8 * index)) as u8)
    }
}

/// Sorts compact values ascending: by comparisons when few, else by each byte from the lowest
/// (a byte every value shares, as the high bytes of small values, is skipped).
fn sort_compact<T: RadixKey>(list: &mut [T]) {
    if list.len() < RADIX_SORT_FROM {
        list.sort_unstable();
        return;
    }
    let mut scratch = vec![T::default(); list.len()];
    for index in 0..T::BYTES {
        if sort_by_byte(list, &mut scratch, index) {
            list.copy_from_slice(&scratch);
        }
    }
}

/// One pass of a radix sort: `from`'s values into `to`, in order of their byte `index`
/// (stable). False, leaving `to` as it was, when every value has the same byte there.
fn sort_by_byte<T: RadixKey>(from: &[T], to: &mut [T], index: u32) -> bool {
    let mut starts = [0usize; 256];
    from.iter().for_each(|&value| starts[value.byte(index)] += 1);
    if starts.contains(&from.len()) {
        return false;
    }
    let mut next = 0;
    for start in starts.iter_mut() {
        (*start, next) = (next, next + *start);
    }
    for &value in from {
        let slot = &mut starts[value.byte(index)];
        to[*slot] = value;
        *slot += 1;
    }
    true
}

/// Etsy's order (`values.sort((a, b) => a - b)`, a stable sort): ascending, equal values (0 and
/// -0) in arrival order. Values without a sign bit (no negative value, no -0: most timers)
/// are ordered by their bits, which for them is their numeric order, by an unstable sort:
/// equal values are then the same bits, so no order among them shows.
pub(crate) fn sort_doubles_like_etsy(values: &mut [f64]) {
    if values.iter().all(|value| value.is_sign_positive()) {
        values.sort_unstable_by_key(|value| value.to_bits());
    } else {
        values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_compact_only_when_it_reads_back_exactly() {
        // (value, as whole milliseconds, as thousandths)
        let cases: [(f64, Option<u16>, Option<u32>); 17] = [
            (0.0, Some(0), Some(0)),
            (1.0, Some(1), Some(1000)),
            (12.345, None, Some(12345)),
            (0.001, None, Some(1)),
            (997.0, Some(997), Some(997_000)),
            (65_535.0, Some(u16::MAX), Some(65_535_000)),
            (65_536.0, None, Some(65_536_000)),
            (65_535.5, None, Some(65_535_500)),
            (4_294_967.295, None, Some(u32::MAX)),
            (4_294_967.296, None, None),
            (0.0005, None, None),
            (1.0 / 3.0, None, None),
            (12.3456, None, None),
            (-1.0, None, None),
            (-0.0, None, None),
            (f64::NAN, None, None),
            (f64::INFINITY, None, None),
        ];
        for (value, want_ms, want_thousandths) in cases {
            assert_eq!(milliseconds(value), want_ms, "{value}");
            assert_eq!(thousandths(value), want_thousandths, "{value}");
            if let Some(compact) = want_ms {
                assert_eq!(f64::from(compact).to_bits(), value.to_bits(), "{value} reads back");
            }
            if let Some(compact) = want_thousandths {
                assert_eq!(value_of(compact).to_bits(), value.to_bits(), "{value} reads back");
            }
        }
    }

    /// The form a list of `arrival` takes: 0 whole milliseconds, 1 thousandths, 2 doubles.
    fn form(values: &Values) -> u8 {
        match values {
            Values::Milliseconds(_) => 0,
            Values::Thousandths(_) => 1,
            Values::Doubles(_) => 2,
        }
    }

    #[test]
    fn the_first_value_that_does_not_fit_widens_the_list_and_keeps_every_value() {
        // (values in arrival order, the form they end in)
        let arrivals: &[(&[f64], u8)] = &[
            (&[1.0, 2.0, 65_535.0], 0),
            (&[1.0, 2.5, 3.0], 1),
            (&[1.0, 70_000.0, 3.0], 1),
            (&[1.0, 2.5, 0.1 + 0.2, 4.0], 2),
            (&[1.0, 0.1 + 0.2, 2.5], 2),
            (&[-1.0, 7.0], 2),
            (&[5.0, 1e300, 0.0], 2),
            (&[], 0),
        ];
        for &(arrival, want) in arrivals {
            let mut values = Values::with_capacity(2);
            arrival.iter().for_each(|&value| values.push(value));
            assert_eq!(form(&values), want, "{arrival:?}");
            let bits = |list: &[f64]| list.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&values.iter().collect::<Vec<_>>()), bits(arrival), "{arrival:?}");
            assert_eq!(bits(&values.doubles()), bits(arrival), "{arrival:?}");
            assert_eq!(Values::from_doubles(arrival.to_vec()), values, "{arrival:?}");
        }
    }

    #[test]
    fn only_room_past_a_quarter_more_than_the_values_is_given_back() {
        // (capacity, values pushed, capacity after)
        let cases =
            [(128, 72, 72), (128, 100, 128), (8, 3, 3), (7, 3, 7), (0, 0, 0), (1024, 0, 0), (94, 72, 94), (95, 72, 72)];
        for (capacity, pushed, want) in cases {
            let mut values = Values::with_capacity(capacity);
            (0..pushed).for_each(|i| values.push(f64::from(i)));
            values.shrink_spare();
            assert_eq!((values.len(), values.capacity()), (pushed as usize, want), "{capacity} room, {pushed} values");
        }
        let mut wide = Values::Doubles(Vec::with_capacity(64));
        wide.push(0.5);
        wide.shrink_spare();
        assert_eq!(wide.capacity(), 1);
    }

    #[test]
    fn compact_values_sort_ascending_whatever_their_spread() {
        // (length, largest value): short lists by comparisons, long ones by radix, with bytes
        // that all values share (their passes skipped) or not.
        let cases = [
            (0, 10),
            (5, 10),
            (255, 65_535),
            (256, 200),
            (1000, 255),
            (1000, 65_535),
            (8192, 997),
            (3000, 0),
            (4000, 997_000),
            (4000, u32::MAX),
        ];
        let mut seed = 0x9e37_79b9_u64;
        let mut next = |largest: u32| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((seed >> 20) % (u64::from(largest) + 1)) as u32
        };
        for (length, largest) in cases {
            let mut wide: Vec<u32> = (0..length).map(|_| next(largest)).collect();
            let mut narrow: Vec<u16> = wide.iter().map(|&value| value as u16).collect();
            let (mut want_wide, mut want_narrow) = (wide.clone(), narrow.clone());
            want_wide.sort_unstable();
            want_narrow.sort_unstable();
            sort_compact(&mut wide);
            sort_compact(&mut narrow);
            assert_eq!(wide, want_wide, "{length} values up to {largest}");
            assert_eq!(narrow, want_narrow, "{length} values up to {largest}, as u16");
        }
    }

    #[test]
    fn lists_extend_and_sort_as_doubles_would() {
        // Lists in each form; every pair is extended one by the other.
        let lists: [&[f64]; 3] = [&[3.0, 1.0, 2.0, 3.0], &[0.25, 3.0, 1.5], &[1.0 / 3.0, 2.0, 0.5]];
        for first in lists {
            for second in lists {
                let mut values = Values::from_doubles(first.to_vec());
                let more = Values::from_doubles(second.to_vec());
                let wider = form(&values).max(form(&more));
                let mut want: Vec<f64> = first.iter().chain(second).copied().collect();
                values.extend(more);
                assert_eq!(form(&values), wider, "{first:?} + {second:?}");
                assert_eq!(values.iter().collect::<Vec<_>>(), want);
                values.sort_prefix_like_etsy(3);
                want[..3].sort_by(f64::total_cmp);
                assert_eq!(values.iter().collect::<Vec<_>>(), want, "the first three sorted");
                values.sort_prefix_like_etsy(values.len());
                want.sort_by(f64::total_cmp);
                assert_eq!(values.into_doubles(), want);
            }
        }
    }
}
