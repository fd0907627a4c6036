//! Timers' value lists handed back from the flusher to the readers once flushed, so that a
//! timer's list is not allocated by a reader and freed by the flusher every interval.
//!
//! A list freed on another thread than the one that allocated it goes back to its arena under
//! that arena's lock and is coalesced with its neighbours: at 100k timers that was ~9% of the
//! flusher's time, and the readers paid again to allocate the next interval's lists (measured
//! in BENCHMARKS.md). Lists are kept by capacity class, eight classes per doubling, so a timer
//! that expects `n` values gets a list with room for at least `n` and at most 12.5% more.

/// The largest list kept: a busier timer's list is freed (a reader reserves at most this many
/// values for a timer, see `timers.rs`).
pub(crate) const MOST_VALUES_KEPT: usize = 1024;
/// Capacities up to this are classes of their own.
const EXACT_UP_TO: usize = 16;
/// Classes per doubling above [`EXACT_UP_TO`].
const STEPS: usize = 8;
/// How many classes there are up to [`MOST_VALUES_KEPT`].
const CLASSES: usize = class_of(MOST_VALUES_KEPT) + 1;

/// Emptied value lists by capacity class.
#[derive(Debug, Default)]
pub struct SpareLists {
    classes: Vec<Vec<Vec<f64>>>,
    len: usize,
}

/// The class of a list that must hold `values` (at least 1): the smallest whose capacity is
/// at least that.
const fn class_of(values: usize) -> usize {
    if values <= EXACT_UP_TO {
        return values - 1;
    }
    let last = values - 1;
    let shift = usize::BITS as usize - last.leading_zeros() as usize - 4;
    EXACT_UP_TO + (shift - 1) * STEPS + ((last >> shift) - STEPS)
}

/// The capacity of `class`.
const fn capacity_of(class: usize) -> usize {
    if class < EXACT_UP_TO {
        return class + 1;
    }
    let shift = (class - EXACT_UP_TO) / STEPS + 1;
    let step = (class - EXACT_UP_TO) % STEPS + STEPS;
    (step + 1) << shift
}

impl SpareLists {
    /// The number of lists kept.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no list is kept.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Keeps `list` emptied, under the largest class it has room for; a list with no room, or
    /// with room for more than [`MOST_VALUES_KEPT`], is freed.
    pub(crate) fn put(&mut self, mut list: Vec<f64>) {
        let room = list.capacity();
        if room == 0 || room > MOST_VALUES_KEPT {
            return;
        }
        let class = match class_of(room) {
            class if capacity_of(class) > room => class - 1,
            class => class,
        };
        list.clear();
        if self.classes.is_empty() {
            self.classes.resize_with(CLASSES, Vec::new);
        }
        self.classes[class].push(list);
        self.len += 1;
    }

    /// An empty list with room for at least `values` (a kept one when its class has one),
    /// none for none.
    pub(crate) fn take(&mut self, values: usize) -> Vec<f64> {
        if values == 0 {
            return Vec::new();
        }
        let class = class_of(values.min(MOST_VALUES_KEPT));
        match self.classes.get_mut(class).and_then(Vec::pop) {
            Some(list) => {
                self.len -= 1;
                list
            }
            None => Vec::with_capacity(capacity_of(class)),
        }
    }

    /// Moves lists from `other` into these until these are `most` (or `other` is empty).
    pub(crate) fn fill_from(&mut self, other: &mut SpareLists, most: usize) {
        for class in 0..other.classes.len() {
            while self.len < most {
                let Some(list) = other.classes[class].pop() else { break };
                other.len -= 1;
                self.put(list);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_up_by_at_most_an_eighth() {
        for values in 1..=MOST_VALUES_KEPT {
            let class = class_of(values);
            let room = capacity_of(class);
            assert!(room >= values && (room - values) * 8 <= values, "{values} values: room {room}");
            assert!(class == 0 || capacity_of(class - 1) < values, "{values}: the smallest class");
        }
        assert_eq!(capacity_of(CLASSES - 1), MOST_VALUES_KEPT);
    }

    #[test]
    fn a_list_is_reused_for_what_it_has_room_for() {
        // (capacity put back, values asked for, reused)
        let cases = [(72, 72, true), (72, 70, true), (72, 73, false), (80, 73, true), (150, 140, true), (9, 9, true)];
        for (capacity, values, reused) in cases {
            let mut spares = SpareLists::default();
            let mut list = Vec::with_capacity(capacity);
            list.push(1.0);
            let address = list.as_ptr();
            spares.put(list);
            let got = spares.take(values);
            assert!(got.is_empty() && got.capacity() >= values, "{capacity} for {values}");
            assert_eq!(got.as_ptr() == address, reused, "{capacity} for {values}");
            assert_eq!(spares.len(), usize::from(!reused));
        }
    }

    #[test]
    fn lists_without_room_or_with_too_much_are_freed() {
        let mut spares = SpareLists::default();
        spares.put(Vec::new());
        spares.put(Vec::with_capacity(MOST_VALUES_KEPT + 1));
        assert!(spares.is_empty());
        assert_eq!(spares.take(0).capacity(), 0);
        assert!(spares.take(5000).capacity() >= MOST_VALUES_KEPT, "a busier timer grows from the most kept");
    }

    #[test]
    fn filling_stops_at_the_most_asked() {
        let mut flushed = SpareLists::default();
        (1..=10).for_each(|n| flushed.put(Vec::with_capacity(n * 10)));
        let mut reader = SpareLists::default();
        reader.fill_from(&mut flushed, 4);
        assert_eq!((reader.len(), flushed.len()), (4, 6));
        reader.fill_from(&mut flushed, 100);
        assert_eq!((reader.len(), flushed.len()), (10, 0));
    }
}
