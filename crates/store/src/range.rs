//! Which rows a range holds: the one rule every reader of the store follows.
//!
//! A range `[from, to)` holds the flushes whose stored time `t` (the flush time, unix seconds)
//! has `from ≤ t < to`, and nothing else. A range is cut into steps on a grid of `step`
//! seconds aligned to multiples of the step (so that a chart's columns line up whatever the
//! range); the first and last steps are clipped to the range, and a step holds the flushes of
//! its clipped part only.
//!
//! Rollups stand for the flushes they merged: a minute row stored at `T` holds the flushes
//! stored in `[T, T + 60)`, an hour row those in `[T, T + 3600)`. A rollup is read only when its
//! whole span lies inside the range and inside one step, and only where that resolution is
//! complete (before its group's watermark); every other part of the range is read at the next
//! finer resolution, down to the flushes themselves. So the answer is exactly the merge of the
//! flushes inside the range while they are kept (`store.retention.raw`); past that, where only
//! rollups remain, a range's ends are rounded *inward* to whole rollups: an answer may leave out
//! up to one rollup's flushes at either end, and never holds a flush from outside.

use crate::{Resolution, Row, Store, StoreError};

/// The steps of a range: `[from, to)` cut at multiples of `step` counted from `first`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    /// The range's start (inclusive), unix seconds.
    pub from: i64,
    /// The range's end (exclusive), unix seconds.
    pub to: i64,
    /// The first step's aligned start (≤ `from`): the time the first step is labelled with.
    pub first: i64,
    /// The width of a step, seconds (≥ 1).
    pub step: i64,
}

impl Grid {
    /// Steps of `step` seconds aligned to multiples of `step` (as a chart wants them).
    pub fn aligned(from: i64, to: i64, step: i64) -> Grid {
        let step = step.max(1);
        Grid { from, to, first: from.div_euclid(step) * step, step }
    }

    /// The whole range as one step.
    pub fn whole(from: i64, to: i64) -> Grid {
        Grid { from, to, first: from, step: (to - from).max(1) }
    }

    /// How many steps the range has (none when `to ≤ from`).
    pub fn len(&self) -> usize {
        if self.to <= self.from {
            return 0;
        }
        ((self.to - self.first) + self.step - 1).div_euclid(self.step) as usize
    }

    /// Whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The label of step `index`: its aligned start.
    pub fn label(&self, index: usize) -> i64 {
        self.first + index as i64 * self.step
    }

    /// The step a flush stored at `ts` (inside the range) belongs to.
    pub fn index(&self, ts: i64) -> usize {
        (ts - self.first).div_euclid(self.step) as usize
    }

    /// Whether a row holding the flushes of `[start, end)` lies inside the range and inside
    /// one step.
    fn fits(&self, start: i64, end: i64) -> bool {
        self.from <= start && end <= self.to && self.index(start) == self.index(end - 1)
    }

    /// The coarsest resolution worth reading for this grid's steps.
    fn coarsest(&self) -> Resolution {
        match self.step {
            s if s >= 3600 => Resolution::Hour,
            s if s >= 60 => Resolution::Minute,
            _ => Resolution::Raw,
        }
    }
}

/// Spans `[start, end)` already answered by coarser rows, sorted and apart.
#[derive(Debug, Default)]
struct Covered(Vec<(i64, i64)>);

impl Covered {
    fn contains(&self, ts: i64) -> bool {
        let after = self.0.partition_point(|&(start, _)| start <= ts);
        after > 0 && ts < self.0[after - 1].1
    }

    fn add(&mut self, spans: &mut Vec<(i64, i64)>) {
        self.0.append(spans);
        self.0.sort_unstable();
    }

    /// The parts of `[from, to)` not covered, as few reads: parts closer than `join` apart are
    /// read as one (a block holds `join` seconds, so reading the span between costs little).
    fn gaps(&self, from: i64, to: i64, join: i64) -> Vec<(i64, i64)> {
        let mut gaps: Vec<(i64, i64)> = Vec::new();
        let mut cursor = from;
        for &(start, end) in self.0.iter().chain(std::iter::once(&(to, to))) {
            if start > cursor {
                match gaps.last_mut() {
                    Some(last) if cursor - last.1 < join => last.1 = start.min(to),
                    _ => gaps.push((cursor, start.min(to))),
                }
            }
            cursor = cursor.max(end);
            if cursor >= to {
                break;
            }
        }
        gaps
    }
}

impl Store {
    /// The rows of one series that `grid` holds, by time: the coarsest rows that fit, finer
    /// ones for the rest (the module's rule). Rows never overlap in the flushes they hold.
    pub(crate) fn rows_within(&self, series: i64, grid: &Grid) -> Result<Vec<Row>, StoreError> {
        let mut held: Vec<Row> = Vec::new();
        let mut covered = Covered::default();
        for resolution in Resolution::ALL.into_iter().rev().filter(|r| *r <= grid.coarsest()) {
            let gaps = covered.gaps(grid.from, grid.to, resolution.block_span());
            if gaps.is_empty() {
                break;
            }
            let width = resolution.seconds();
            let complete_until = self.rolled_until(series, resolution)?;
            let mut claimed = Vec::new();
            for (start, end) in gaps {
                for row in self.rows(series, resolution, start, end)? {
                    let usable = if width == 0 {
                        grid.from <= row.ts && row.ts < grid.to
                    } else {
                        row.ts + width <= complete_until && grid.fits(row.ts, row.ts + width)
                    };
                    if usable && !covered.contains(row.ts) {
                        if width > 0 {
                            claimed.push((row.ts, row.ts + width));
                        }
                        held.push(row);
                    }
                }
            }
            covered.add(&mut claimed);
        }
        held.sort_by_key(|row| row.ts);
        Ok(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grid_clips_its_first_and_last_steps() {
        let cases = [
            // (from, to, step) → steps, first label, last label
            ((100, 200, 60), 3, 60, 180),
            ((120, 240, 60), 2, 120, 180),
            ((0, 1, 10), 1, 0, 0),
            ((5, 5, 10), 0, 0, 0),
            ((-30, 30, 60), 2, -60, 0),
        ];
        for ((from, to, step), count, first, last) in cases {
            let grid = Grid::aligned(from, to, step);
            assert_eq!(grid.len(), count, "{from}..{to} by {step}");
            if count > 0 {
                assert_eq!((grid.label(0), grid.label(count - 1)), (first, last), "{from}..{to} by {step}");
            }
        }
        let whole = Grid::whole(581, 631);
        assert_eq!((whole.len(), whole.label(0), whole.index(630)), (1, 581, 0));
    }

    #[test]
    fn a_row_fits_only_inside_the_range_and_one_step() {
        let grid = Grid::aligned(90, 400, 120);
        let cases = [
            ((60, 120), false), // starts before the range
            ((120, 180), true),
            ((180, 240), true),
            ((210, 270), false), // crosses the step edge at 240
            ((360, 420), false), // ends after the range
            ((300, 360), true),
            ((340, 400), false), // crosses the step edge at 360
        ];
        for ((start, end), fits) in cases {
            assert_eq!(grid.fits(start, end), fits, "[{start}, {end})");
        }
    }

    #[test]
    fn gaps_are_what_coarser_rows_left() {
        let mut covered = Covered::default();
        covered.add(&mut vec![(120, 180), (60, 120), (300, 360)]);
        let cases = [
            ((0, 400, 0), vec![(0, 60), (180, 300), (360, 400)]),
            ((60, 180, 0), vec![]),
            ((70, 170, 0), vec![]),
            ((0, 400, 1000), vec![(0, 400)]),
            ((100, 320, 0), vec![(180, 300)]),
        ];
        for ((from, to, join), want) in cases {
            assert_eq!(covered.gaps(from, to, join), want, "{from}..{to} joined within {join}");
        }
        assert!(covered.contains(60) && covered.contains(179) && !covered.contains(180) && !covered.contains(59));
    }
}
