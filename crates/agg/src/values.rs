//! A timer's raw values in arrival order, 4 bytes a value while every value is a whole number
//! of thousandths between 0 and 4,294,967.295 (whole milliseconds, and fractions to the
//! microsecond: what statsd clients send), 8 bytes from the first one that is not.
//!
//! A value is kept in 4 bytes only when it reads back exactly: `thousandths / 1000.0` (one
//! correctly rounded division) is the very double that arrived, so every statistic computed
//! from the values is the one the doubles give. The order of the thousandths is the order of
//! the values (the mapping is monotonic), so sorting them sorts the values.

use std::borrow::Cow;

/// A timer's raw values, compact while they allow it (see the module's documentation).
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// Every value is `thousandths / 1000.0`.
    Thousandths(Vec<u32>),
    /// The values as they arrived.
    Doubles(Vec<f64>),
}

impl Default for Values {
    fn default() -> Self {
        Values::Thousandths(Vec::new())
    }
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
        Values::Thousandths(Vec::with_capacity(capacity))
    }

    /// Compact when every value allows it.
    pub fn from_doubles(values: Vec<f64>) -> Values {
        match values.iter().map(|&value| thousandths(value)).collect::<Option<Vec<u32>>>() {
            Some(compact) => Values::Thousandths(compact),
            None => Values::Doubles(values),
        }
    }

    /// Appends `value`.
    #[inline]
    pub fn push(&mut self, value: f64) {
        match self {
            Values::Thousandths(list) => match thousandths(value) {
                Some(compact) => list.push(compact),
                None => self.widen().push(value),
            },
            Values::Doubles(list) => list.push(value),
        }
    }

    /// The values as doubles from now on (the first that does not fit arrived).
    #[cold]
    fn widen(&mut self) -> &mut Vec<f64> {
        if let Values::Thousandths(list) = self {
            let mut doubles = Vec::with_capacity(list.capacity().max(list.len() + 1));
            doubles.extend(list.iter().map(|&compact| value_of(compact)));
            *self = Values::Doubles(doubles);
        }
        match self {
            Values::Doubles(list) => list,
            Values::Thousandths(_) => unreachable!("widened above"),
        }
    }

    /// How many values.
    pub fn len(&self) -> usize {
        match self {
            Values::Thousandths(list) => list.len(),
            Values::Doubles(list) => list.len(),
        }
    }

    /// True without values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many values fit without growing.
    pub fn capacity(&self) -> usize {
        match self {
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
                Values::Thousandths(list) => list.shrink_to_fit(),
                Values::Doubles(list) => list.shrink_to_fit(),
            }
        }
    }

    /// The address just past the last value (where the next one goes), to prefetch.
    #[inline]
    pub fn end_address(&self) -> *const u8 {
        match self {
            Values::Thousandths(list) => list.as_ptr().wrapping_add(list.len()).cast(),
            Values::Doubles(list) => list.as_ptr().wrapping_add(list.len()).cast(),
        }
    }

    /// The values in order.
    pub fn iter(&self) -> impl Iterator<Item = f64> + '_ {
        let (compact, doubles): (&[u32], &[f64]) = match self {
            Values::Thousandths(list) => (list, &[]),
            Values::Doubles(list) => (&[], list),
        };
        compact.iter().map(|&compact| value_of(compact)).chain(doubles.iter().copied())
    }

    /// The first `count` values in order.
    pub fn prefix(&self, count: usize) -> impl Iterator<Item = f64> + '_ {
        self.iter().take(count)
    }

    /// The values as doubles: borrowed when they are.
    pub fn doubles(&self) -> Cow<'_, [f64]> {
        match self {
            Values::Thousandths(list) => Cow::Owned(list.iter().map(|&compact| value_of(compact)).collect()),
            Values::Doubles(list) => Cow::Borrowed(list),
        }
    }

    /// The values as doubles.
    pub fn into_doubles(self) -> Vec<f64> {
        match self {
            Values::Thousandths(list) => list.into_iter().map(value_of).collect(),
            Values::Doubles(list) => list,
        }
    }

    /// Appends `other`'s values after these.
    pub fn extend(&mut self, other: Values) {
        match (&mut *self, other) {
            (Values::Thousandths(list), Values::Thousandths(more)) => list.extend(more),
            (Values::Doubles(list), more) => list.extend(more.iter()),
            (Values::Thousandths(_), Values::Doubles(more)) => {
                let list = self.widen();
                list.extend(more);
            }
        }
    }

    /// Sorts the first `count` values as Etsy's statsd sorts them: ascending, equal values in
    /// arrival order.
    pub fn sort_prefix_like_etsy(&mut self, count: usize) {
        match self {
            Values::Thousandths(list) => list[..count].sort_unstable(),
            Values::Doubles(list) => sort_doubles_like_etsy(&mut list[..count]),
        }
    }
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
        let cases: [(f64, Option<u32>); 14] = [
            (0.0, Some(0)),
            (1.0, Some(1000)),
            (12.345, Some(12345)),
            (0.001, Some(1)),
            (997.0, Some(997_000)),
            (4_294_967.295, Some(u32::MAX)),
            (4_294_967.296, None),
            (0.0005, None),
            (1.0 / 3.0, None),
            (12.3456, None),
            (-1.0, None),
            (-0.0, None),
            (f64::NAN, None),
            (f64::INFINITY, None),
        ];
        for (value, want) in cases {
            assert_eq!(thousandths(value), want, "{value}");
            if let Some(compact) = want {
                assert_eq!(value_of(compact).to_bits(), value.to_bits(), "{value} reads back");
            }
        }
    }

    #[test]
    fn the_first_value_that_does_not_fit_widens_the_list_and_keeps_every_value() {
        let arrivals: &[&[f64]] =
            &[&[1.0, 2.5, 3.0], &[1.0, 2.5, 0.1 + 0.2, 4.0], &[-1.0, 7.0], &[5.0, 1e300, 0.0], &[]];
        for arrival in arrivals {
            let mut values = Values::with_capacity(2);
            arrival.iter().for_each(|&value| values.push(value));
            let compact = arrival.iter().all(|&value| thousandths(value).is_some());
            assert_eq!(matches!(values, Values::Thousandths(_)), compact, "{arrival:?}");
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
    fn lists_extend_and_sort_as_doubles_would() {
        let (first, second): (&[f64], &[f64]) = (&[3.0, 1.5, 2.0], &[0.25, 3.0]);
        for widen_second in [false, true] {
            let mut values = Values::from_doubles(first.to_vec());
            let mut more = Values::from_doubles(second.to_vec());
            if widen_second {
                more.push(1.0 / 3.0);
            }
            let mut want: Vec<f64> = first.iter().chain(second).copied().collect();
            if widen_second {
                want.push(1.0 / 3.0);
            }
            values.extend(more);
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
