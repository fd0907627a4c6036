//! How a global that restarts takes its place in the group back (issue 49).
//!
//! - **As itself**: a global is a static member of its consumer group (Kafka's
//!   `group.instance.id`, KIP-345). Its id is `global.kafka.instanceId`, else one it made at
//!   its first start and keeps in its data directory ([`INSTANCE_FILE`]). Restarted within
//!   `global.kafka.sessionTimeoutMs`, it is given its own partitions back at once, and the rest
//!   of the group never stops; without an id the group waits out the session of the old member
//!   before anyone reads its partitions.
//! - **Past what it stored**: the store keeps, in the transaction that writes a flush, where
//!   in the topic the batches of that flush were read ([`agg::LogPositions`]). A global killed
//!   after a flush and before its offsets were committed (the commit comes milliseconds
//!   after the flush, or seconds later while the group's coordinator fails over) finds at its
//!   restart batches past the group's commit that its store holds already: it passes over them
//!   ([`Stored::holds`], counted in `forward_batches_already_stored`) instead of merging them
//!   twice. A partition the group gave another member meanwhile has those batches read again
//!   by that member: counted here as `forward_batches_possibly_twice`.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

pub use crate::kafka_config::not_an_instance_id;

/// The file in the data directory holding the instance id a global made at its first start.
pub const INSTANCE_FILE: &str = "kafka-instance-id";

/// This global's instance id: `given` (`global.kafka.instanceId`), else the one kept in
/// `dir` (made and written there at the first start), else none.
pub fn instance_id(given: Option<&str>, dir: Option<&Path>) -> Result<Option<String>, String> {
    if let Some(given) = given {
        return Ok(Some(given.to_string()));
    }
    let Some(dir) = dir else { return Ok(None) };
    let path = dir.join(INSTANCE_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let id = text.trim();
            match not_an_instance_id(id) {
                None => Ok(Some(id.to_string())),
                Some(why) => Err(format!("{}: {why} (remove the file: a new id is made)", path.display())),
            }
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let id = new_instance_id()?;
            write_new(&path, &id)
                .map_err(|error| format!("cannot keep the instance id in {}: {error}", path.display()))?;
            tracing::info!(instance_id = %id, file = %path.display(), "global.kafka: this global's instance id, made now and kept for its restarts");
            Ok(Some(id))
        }
        Err(error) => Err(format!("cannot read {}: {error}", path.display())),
    }
}

/// `histd-<host name>-<16 random hex digits>`: unique in any group, and telling a person
/// reading the group's members which machine each is.
fn new_instance_id() -> Result<String, String> {
    use ring::rand::SecureRandom as _;
    let mut random = [0u8; 8];
    ring::rand::SystemRandom::new()
        .fill(&mut random)
        .map_err(|_| "the system gave no random bytes for an instance id".to_string())?;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host: String =
        host.trim().chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-')).take(64).collect();
    let host = if host.is_empty() { "global".to_string() } else { host };
    let hex: String = random.iter().map(|byte| format!("{byte:02x}")).collect();
    Ok(format!("histd-{host}-{hex}"))
}

/// Writes `text` to `path` whole or not at all (a temporary file renamed), synced.
fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let temporary = path.with_extension("partial");
    let mut file = std::fs::File::create(&temporary)?;
    writeln!(file, "{text}")?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}

/// Where the store says the batches it holds were read, for one topic: per partition, every
/// offset up to `through` and the offsets in `beyond`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    partitions: HashMap<i32, StoredPartition>,
}

/// What the store holds of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct StoredPartition {
    through: i64,
    beyond: BTreeSet<i64>,
}

impl Stored {
    /// Reads the positions the store at `file` keeps for `topic`; none when the store has
    /// no file yet.
    pub fn read(file: &Path, topic: &str) -> Result<Stored, String> {
        if !file.exists() {
            return Ok(Stored::default());
        }
        let positions = store::Store::log_positions_at(file, topic).map_err(|error| error.to_string())?;
        Ok(Stored::of(positions))
    }

    /// From the store's rows: `(partition, through, beyond)`.
    pub fn of(positions: Vec<(i32, i64, Vec<i64>)>) -> Stored {
        let partitions = positions
            .into_iter()
            .map(|(partition, through, beyond)| {
                (partition, StoredPartition { through, beyond: beyond.into_iter().collect() })
            })
            .collect();
        Stored { partitions }
    }

    /// True when the message at `offset` of `partition` is in the store already.
    pub fn holds(&self, partition: i32, offset: i64) -> bool {
        self.partitions
            .get(&partition)
            .is_some_and(|stored| offset <= stored.through || stored.beyond.contains(&offset))
    }

    /// The last offset of `partition` the store holds, if any.
    pub fn last(&self, partition: i32) -> Option<i64> {
        let stored = self.partitions.get(&partition)?;
        Some(stored.beyond.last().copied().unwrap_or(stored.through).max(stored.through))
    }

    /// The partitions it knows.
    pub fn partitions(&self) -> Vec<i32> {
        let mut partitions: Vec<i32> = self.partitions.keys().copied().collect();
        partitions.sort_unstable();
        partitions
    }

    /// Forgets `partition`: the group's commit is past all of it (or there is none, and the
    /// topic may have been made again since), so its positions say nothing any more.
    pub fn forget(&mut self, partition: i32) {
        self.partitions.remove(&partition);
    }

    /// True when nothing is known.
    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_ids_follow_kafkas_rule_for_names() {
        let cases: &[(&str, bool)] = &[
            ("histd-global-1", true),
            ("a.b_c-9", true),
            ("", false),
            ("has space", false),
            ("slash/no", false),
            (&"x".repeat(249), true),
            (&"x".repeat(250), false),
        ];
        for (id, legal) in cases {
            assert_eq!(not_an_instance_id(id).is_none(), *legal, "{id}");
        }
    }

    #[test]
    fn an_instance_id_is_made_once_and_kept() {
        let dir = std::env::temp_dir().join(format!("histd-rejoin-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(instance_id(Some("given"), Some(&dir)), Ok(Some("given".to_string())));
        assert!(!dir.join(INSTANCE_FILE).exists(), "a given id writes nothing");
        assert_eq!(instance_id(None, None), Ok(None));
        let made = instance_id(None, Some(&dir)).unwrap().unwrap();
        assert!(made.starts_with("histd-") && not_an_instance_id(&made).is_none(), "{made}");
        assert_eq!(instance_id(None, Some(&dir)), Ok(Some(made.clone())), "read back at the next start");
        std::fs::write(dir.join(INSTANCE_FILE), "not an id\n").unwrap();
        let refused = instance_id(None, Some(&dir)).unwrap_err();
        assert!(refused.contains(INSTANCE_FILE) && refused.contains("not an instance id"), "{refused}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_store_holds_what_is_through_its_mark_or_named_beyond_it() {
        let stored = Stored::of(vec![(0, 10, vec![13, 15]), (2, -1, vec![4])]);
        // (partition, offset, held)
        let cases = [
            (0, 9, true),
            (0, 10, true),
            (0, 11, false),
            (0, 13, true),
            (0, 14, false),
            (0, 15, true),
            (1, 0, false),
            (2, 0, false),
            (2, 4, true),
        ];
        for (partition, offset, held) in cases {
            assert_eq!(stored.holds(partition, offset), held, "{partition}@{offset}");
        }
        assert_eq!((stored.last(0), stored.last(1), stored.last(2)), (Some(15), None, Some(4)));
        assert_eq!(stored.partitions(), [0, 2]);
    }
}
