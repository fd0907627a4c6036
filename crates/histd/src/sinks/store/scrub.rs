//! The store's paced scrub (`store.scrubInterval`, daily by default): after each flush the
//! writer checks a slice of the blocks ([`SLICE`]), so a whole pass costs a little at every
//! flush instead of a stall; a new pass starts an interval after the last began. A damaged
//! block is logged once with its group and span, counted (`store_scrub_damaged_blocks`) and
//! kept in the store's record of damage;
//! its rows are left out of answers by the readers, and the next write at its place replaces it.

use std::time::{Duration, Instant};

use super::DamagedBlocks;
use crate::telemetry::Detail;

/// Blocks checked after each flush.
pub const SLICE: usize = 64;

/// Where the scrub is, and what it found.
#[derive(Debug)]
pub struct Scrubber {
    interval: Option<Duration>,
    /// The block after which the pass goes on (`None`: between passes).
    cursor: Option<i64>,
    /// When the next pass starts.
    next_pass: Instant,
    passes: u64,
    checked: u64,
    damaged: u64,
    found: DamagedBlocks,
}

impl Scrubber {
    /// A scrub every `interval` (`None`: never); the first pass starts with the first flush.
    pub fn new(interval: Option<Duration>) -> Scrubber {
        Scrubber {
            interval,
            cursor: None,
            next_pass: Instant::now(),
            passes: 0,
            checked: 0,
            damaged: 0,
            found: DamagedBlocks::new("the store scrub", 0),
        }
    }

    /// Takes a new interval (a reload); a pass under way goes on.
    pub fn set_interval(&mut self, interval: Option<Duration>) {
        if interval != self.interval {
            self.next_pass = Instant::now() + interval.unwrap_or_default();
        }
        self.interval = interval;
    }

    /// One slice of the pass under way, or the start of the next when it is due. An error
    /// when SQLite finds the file itself damaged (the writer salvages it).
    pub fn step(&mut self, store: &store::Store) -> Result<(), store::StoreError> {
        let Some(interval) = self.interval else { return Ok(()) };
        let after = match self.cursor {
            Some(after) => after,
            None if Instant::now() >= self.next_pass => {
                self.next_pass = Instant::now() + interval;
                0
            }
            None => return Ok(()),
        };
        match store.scrub_step(after, SLICE) {
            Ok(step) => {
                self.checked += step.checked;
                let new: Vec<store::DamagedBlock> =
                    step.damaged.into_iter().filter(|block| self.found.note(block.clone())).collect();
                self.damaged += new.len() as u64;
                if let Err(error) = store.record_damaged_blocks(crate::clock::unix_now_s() as i64, &new) {
                    tracing::warn!(%error, "store scrub: the damaged blocks found could not be recorded");
                }
                self.cursor = step.next;
                if step.next.is_none() {
                    self.passes += 1;
                }
            }
            Err(error) if error.is_damaged_file() => {
                self.cursor = None;
                return Err(error);
            }
            Err(error) => {
                tracing::warn!(%error, "store scrub: a step failed; the pass goes on at the next flush");
            }
        }
        Ok(())
    }

    /// Its counters, for the store sink's telemetry.
    pub fn details(&self) -> [Detail; 3] {
        let total = |name, value: u64| Detail { name, value: value as f64, level: false };
        [
            total("store_scrub_passes", self.passes),
            total("store_scrubbed_blocks", self.checked),
            total("store_scrub_damaged_blocks", self.damaged),
        ]
    }
}
