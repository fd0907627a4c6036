//! Damaged blocks found while the daemon runs (by the HTTP API's reads, by the paced scrub):
//! each logged and counted once, the latest kept to be shown.

use std::collections::{HashSet, VecDeque};

/// The blocks a finder has met, each once.
#[derive(Debug)]
pub struct DamagedBlocks {
    /// Who finds them, in the log (`the HTTP API's reads`, `the store scrub`).
    finder: &'static str,
    known: HashSet<store::DamagedBlock>,
    latest: VecDeque<store::DamagedBlock>,
    shown: usize,
}

impl DamagedBlocks {
    /// A record for `finder`, keeping the latest `shown` to show.
    pub fn new(finder: &'static str, shown: usize) -> DamagedBlocks {
        DamagedBlocks { finder, known: HashSet::new(), latest: VecDeque::new(), shown }
    }

    /// Takes note of `block`; true (and logged once) when it was not known.
    pub fn note(&mut self, block: store::DamagedBlock) -> bool {
        if !self.known.insert(block.clone()) {
            return false;
        }
        tracing::error!(
            finder = self.finder,
            resolution = ?block.resolution,
            group = block.grp,
            start = block.start,
            span_s = block.resolution.block_span(),
            reason = block.reason,
            "a stored block is damaged: its rows are left out of every answer"
        );
        self.latest.push_back(block);
        while self.latest.len() > self.shown {
            self.latest.pop_front();
        }
        true
    }

    /// The latest ones found, oldest first.
    pub fn latest(&self) -> impl Iterator<Item = &store::DamagedBlock> {
        self.latest.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_block_is_new_once_even_past_the_ones_shown() {
        let block = |start| store::DamagedBlock { resolution: store::Resolution::Raw, grp: 1, start, reason: "x" };
        let mut record = DamagedBlocks::new("test", 2);
        let firsts: Vec<bool> = [10, 20, 30, 10, 30].into_iter().map(|s| record.note(block(s))).collect();
        assert_eq!(firsts, [true, true, true, false, false]);
        assert_eq!(record.latest().map(|b| b.start).collect::<Vec<_>>(), [20, 30]);
        let mut none_shown = DamagedBlocks::new("test", 0);
        assert!(none_shown.note(block(1)) && none_shown.latest().next().is_none());
    }
}
