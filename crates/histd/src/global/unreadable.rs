//! Record batches the Kafka client cannot read (issue 48, P2). librdkafka stops at such a
//! batch and fetches it again and again: a codec it lacks is reported as an error that names
//! neither partition nor offset (the Rust client drops them), and a batch whose compressed
//! bytes are damaged is not reported at all (it takes it for a message cut short, and asks
//! for more bytes, forever). Before this, nothing said that the partition had stopped.
//!
//! [`Watcher`] finds such partitions by what it can see: a partition whose log holds records
//! past the next offset this member would read, none of which arrived for [`STUCK_AFTER`]
//! while fetching ran, is stuck there. It is held: counted once, logged, named in `/health`
//! (`degraded`). Once it has been stuck for `global.kafka.skipUnreadableAfterMs` (and no
//! error says a codec is missing: a newer histd could read that batch, so it is never
//! skipped) the record is read past: counted, logged, named among the skipped, its offset
//! committed with the next flush. A batch of several records is skipped a record at a time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long a partition behind its log's end must deliver nothing, fetching running, before
/// it is taken for stuck.
pub const STUCK_AFTER: Duration = fleet::kafka::UNREADABLE_AFTER;

/// How long after an error of the client's (a codec missing, a batch damaged) the stuck
/// partitions are put down to it.
const CODEC_ERROR_HOLDS: Duration = Duration::from_secs(60);

/// Why a partition is stuck, as far as can be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The client said a compression codec is missing (`NotImplemented`): a newer histd may
    /// read the batch, so it is never skipped.
    Codec,
    /// The client said a batch's compressed bytes do not decode (`BadCompression`).
    Damaged,
    /// The client said nothing: a batch it cannot parse (damaged, or past its size limits).
    Silent,
}

impl Cause {
    /// The cause a consumption error names; `None` for an error that is not a batch's (a
    /// broker down, a timeout).
    pub fn of(code: rdkafka::types::RDKafkaErrorCode) -> Option<Cause> {
        use rdkafka::types::RDKafkaErrorCode;
        match code {
            RDKafkaErrorCode::NotImplemented => Some(Cause::Codec),
            RDKafkaErrorCode::BadCompression => Some(Cause::Damaged),
            _ => None,
        }
    }

    /// How a person reads it.
    pub fn describe(self) -> &'static str {
        match self {
            Cause::Codec => "a record batch compressed with a codec this histd cannot read",
            Cause::Damaged => "a record batch whose compressed bytes do not decode (damaged)",
            Cause::Silent => {
                "a record batch the Kafka client reads nothing of (damaged, or larger than it takes), while the partition's leader answers"
            }
        }
    }
}

/// One assigned partition at a look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// The partition.
    pub partition: i32,
    /// The next offset this member would read of it.
    pub next: i64,
    /// The offset after its last record, as the last fetch from its leader said.
    pub end: i64,
}

/// What a look found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// `partition` newly stuck at `offset`: held there.
    Held {
        /// The partition.
        partition: i32,
        /// The offset of the record that is not read.
        offset: i64,
        /// Why, as far as can be told.
        cause: Cause,
    },
    /// The record at `offset` of `partition` is to be read past.
    Skip {
        /// The partition.
        partition: i32,
        /// The offset of the record that cannot be read.
        offset: i64,
        /// Why, as far as can be told.
        cause: Cause,
    },
}

#[derive(Debug, Clone, Copy)]
struct Stall {
    next: i64,
    since: Instant,
    held: Option<Cause>,
}

/// Watches the assigned partitions for ones that stopped at a batch.
#[derive(Debug, Default)]
pub struct Watcher {
    stalls: BTreeMap<i32, Stall>,
    /// When the client last said a codec is missing.
    codec_error_at: Option<Instant>,
    /// When the client last said a batch's compressed bytes do not decode.
    damaged_error_at: Option<Instant>,
}

impl Watcher {
    /// The client reported a batch it cannot decode (`cause`) at `now`.
    pub fn error(&mut self, cause: Cause, now: Instant) {
        match cause {
            Cause::Codec => self.codec_error_at = Some(now),
            Cause::Damaged => self.damaged_error_at = Some(now),
            Cause::Silent => {}
        }
    }

    /// A message of `partition` was read: it moves. True when it was held.
    pub fn read(&mut self, partition: i32) -> bool {
        self.stalls.remove(&partition).is_some_and(|stall| stall.held.is_some())
    }

    /// Fetching was paused on purpose: no partition is stuck for the time being.
    pub fn paused(&mut self) {
        self.stalls.retain(|_, stall| stall.held.is_some());
        for stall in self.stalls.values_mut() {
            stall.since = Instant::now();
        }
    }

    /// A look at the assigned partitions (`seen`) at `now`: the ones newly stuck, and those
    /// stuck for `skip_after` (`None`: never skipped).
    pub fn look(&mut self, seen: &[Seen], now: Instant, skip_after: Option<Duration>) -> Vec<Found> {
        let cause = self.cause(now);
        let mut found = Vec::new();
        for p in seen {
            if p.end <= p.next {
                self.stalls.remove(&p.partition);
                continue;
            }
            let stall = self.stalls.entry(p.partition).or_insert(Stall { next: p.next, since: now, held: None });
            if stall.next != p.next {
                *stall = Stall { next: p.next, since: now, held: None };
            }
            let stuck_for = now.duration_since(stall.since);
            if stuck_for < STUCK_AFTER {
                continue;
            }
            let (partition, offset) = (p.partition, p.next);
            if stall.held.is_none() {
                stall.held = Some(cause);
                found.push(Found::Held { partition, offset, cause });
            }
            if cause != Cause::Codec && skip_after.is_some_and(|after| stuck_for >= after.max(STUCK_AFTER)) {
                self.stalls.remove(&partition);
                found.push(Found::Skip { partition, offset, cause });
            }
        }
        found
    }

    /// Forgets partitions no longer assigned; true when a held one went.
    pub fn keep_assigned(&mut self, assigned: impl Fn(i32) -> bool) -> bool {
        let held = self.held().len();
        self.stalls.retain(|&partition, _| assigned(partition));
        self.held().len() != held
    }

    /// The partitions held now: (partition, offset, cause).
    pub fn held(&self) -> Vec<(i32, i64, Cause)> {
        self.stalls.iter().filter_map(|(&partition, stall)| Some((partition, stall.next, stall.held?))).collect()
    }

    /// What stuck partitions are put down to now: a missing codec if the client said so
    /// lately, else damage if it said that, else nothing it said.
    fn cause(&self, now: Instant) -> Cause {
        let lately = |at: Option<Instant>| at.is_some_and(|at| now.duration_since(at) < CODEC_ERROR_HOLDS);
        match (lately(self.codec_error_at), lately(self.damaged_error_at)) {
            (true, _) => Cause::Codec,
            (false, true) => Cause::Damaged,
            (false, false) => Cause::Silent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(partition: i32, next: i64, end: i64) -> Seen {
        Seen { partition, next, end }
    }

    /// Looks at 0, 10, 20 and 30 s with the partitions as given; what each found.
    fn looks(watcher: &mut Watcher, partitions: &[Seen], skip_after: Option<Duration>) -> Vec<Vec<Found>> {
        let start = Instant::now();
        [0, 10, 20, 30].map(|s| watcher.look(partitions, start + Duration::from_secs(s), skip_after)).to_vec()
    }

    fn held(partition: i32, offset: i64, cause: Cause) -> Found {
        Found::Held { partition, offset, cause }
    }

    fn skip(partition: i32, offset: i64, cause: Cause) -> Found {
        Found::Skip { partition, offset, cause }
    }

    /// The partitions at every look, `skipUnreadableAfterMs`, what the looks at 0, 10, 20 and
    /// 30 s found.
    type Case = (Vec<Seen>, Option<Duration>, Vec<Vec<Found>>);

    #[test]
    fn a_partition_behind_its_end_that_delivers_nothing_is_held_then_skipped() {
        let thirty = Some(Duration::from_secs(30));
        let cases: Vec<Case> = vec![
            // Behind its end for 20 s: held; for 30 s: skipped. The other, caught up, is not.
            (
                vec![seen(0, 5, 9), seen(1, 3, 3)],
                thirty,
                vec![vec![], vec![], vec![held(0, 5, Cause::Silent)], vec![skip(0, 5, Cause::Silent)]],
            ),
            // Two stuck at once: each found by its own stall.
            (
                vec![seen(0, 5, 9), seen(2, 7, 8)],
                thirty,
                vec![
                    vec![],
                    vec![],
                    vec![held(0, 5, Cause::Silent), held(2, 7, Cause::Silent)],
                    vec![skip(0, 5, Cause::Silent), skip(2, 7, Cause::Silent)],
                ],
            ),
            // Skipping off: held, never skipped.
            (vec![seen(0, 5, 9)], None, vec![vec![], vec![], vec![held(0, 5, Cause::Silent)], vec![]]),
            // Caught up: nothing.
            (vec![seen(0, 9, 9)], thirty, vec![vec![], vec![], vec![], vec![]]),
        ];
        for (partitions, skip_after, want) in cases {
            let mut watcher = Watcher::default();
            assert_eq!(looks(&mut watcher, &partitions, skip_after), want, "{partitions:?}");
        }
    }

    #[test]
    fn a_missing_codec_holds_and_never_skips() {
        let mut watcher = Watcher::default();
        watcher.error(Cause::Codec, Instant::now());
        let found = looks(&mut watcher, &[seen(3, 41, 50)], Some(Duration::from_secs(1)));
        assert_eq!(found, vec![vec![], vec![], vec![held(3, 41, Cause::Codec)], vec![]]);
        assert_eq!(watcher.held(), [(3, 41, Cause::Codec)]);
        let mut watcher = Watcher::default();
        watcher.error(Cause::Damaged, Instant::now());
        let found = looks(&mut watcher, &[seen(3, 41, 50)], Some(Duration::from_secs(1)));
        assert_eq!(found[2], [held(3, 41, Cause::Damaged), skip(3, 41, Cause::Damaged)]);
    }

    #[test]
    fn progress_a_pause_or_a_partition_taken_away_ends_a_stall() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let skip_after = Some(Duration::from_secs(30));
        // The partition moves between looks: never stuck.
        let mut watcher = Watcher::default();
        for (second, next) in [(0, 5), (10, 6), (20, 7), (30, 8), (40, 9)] {
            assert_eq!(watcher.look(&[seen(0, next, 20)], at(second), skip_after), []);
        }
        // A message read clears the watch.
        let mut watcher = Watcher::default();
        watcher.look(&[seen(0, 5, 20)], at(0), skip_after);
        watcher.read(0);
        assert_eq!(watcher.look(&[seen(0, 5, 20)], at(25), skip_after), []);
        // Held, then taken away: forgotten.
        let mut watcher = Watcher::default();
        looks(&mut watcher, &[seen(4, 1, 2)], None);
        assert!(!watcher.keep_assigned(|partition| partition == 4));
        assert!(watcher.keep_assigned(|partition| partition != 4));
        assert_eq!(watcher.held(), []);
        // A pause starts a stall's clock again.
        let mut watcher = Watcher::default();
        watcher.look(&[seen(0, 5, 20)], Instant::now(), skip_after);
        watcher.paused();
        assert_eq!(watcher.look(&[seen(0, 5, 20)], Instant::now() + Duration::from_secs(15), skip_after), []);
    }
}
