//! A run: up to [`RUN`] scanned lines waiting to be applied to a reader's table. Each line's
//! series slot is prefetched when the line is scanned; applying the run after the whole run is
//! scanned lets those cache misses overlap.

use std::mem::MaybeUninit;

use proto::SimpleMetric;

/// Lines scanned and prefetched before they are applied.
pub(crate) const RUN: usize = 32;

/// A scanned line waiting in a [`Run`]: the metric, its key's hash, and where its key was
/// built in the run's `keys` when it has tags.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pending<'a> {
    pub(crate) metric: SimpleMetric<'a>,
    pub(crate) hash: u64,
    pub(crate) built: Option<(u32, u32)>,
}

/// Up to [`RUN`] scanned lines with their key hashes, waiting to be applied. Left
/// uninitialised until written: a single-line datagram should not pay for 32 blank entries.
pub(crate) struct Run<'a> {
    lines: [MaybeUninit<Pending<'a>>; RUN],
    len: usize,
    /// Keys of this run's tagged lines, one after another (the table's buffer, reused).
    keys: String,
}

impl<'a> Run<'a> {
    /// An empty run whose tagged keys are built in `keys` (a buffer reused across runs).
    pub(crate) fn new(keys: String) -> Self {
        Run { lines: [const { MaybeUninit::uninit() }; RUN], len: 0, keys }
    }

    /// Builds the series key of a tagged line in `keys`; where it is.
    #[inline]
    pub(crate) fn build_key(&mut self, metric: &SimpleMetric<'_>) -> (u32, u32) {
        let start = self.keys.len();
        metric.push_key(&mut self.keys);
        (start as u32, self.keys.len() as u32)
    }

    /// A line's series key: its name, or the key built for it.
    #[inline]
    pub(crate) fn key_of<'k>(&'k self, name: &'k str, built: Option<(u32, u32)>) -> &'k str {
        match built {
            Some((start, end)) => &self.keys[start as usize..end as usize],
            None => name,
        }
    }

    /// Adds a line; true when the run is now full.
    #[inline]
    pub(crate) fn push(&mut self, pending: Pending<'a>) -> bool {
        self.lines[self.len].write(pending);
        self.len += 1;
        self.len == RUN
    }

    /// The lines pushed since the last clear, in order.
    #[inline]
    pub(crate) fn lines(&self) -> &[Pending<'a>] {
        // SAFETY: the first `len` entries were written by `push` (`len` never exceeds RUN: a
        // full run is applied and cleared before the next push), and the type is `Copy`.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast(), self.len) }
    }

    /// Empties the run for the next lines, keeping the key buffer's capacity.
    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.keys.clear();
    }

    /// The key buffer, to keep its capacity for the next packet.
    pub(crate) fn into_keys(self) -> String {
        self.keys
    }
}
