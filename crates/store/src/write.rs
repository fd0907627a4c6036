//! Opening the store, and writing a flush: its rows go into one head block per group, in one
//! transaction (a crash loses at most that flush). Compaction follows ([`crate::compact`]).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::Duration;

use agg::Snapshot;
use rusqlite::{params, Connection, OptionalExtension, Transaction};

use crate::blocks::put_head;
use crate::checked_rows::{DamagedRow, ReaderChecks, SeriesRow};
use crate::schema::{group_size, prepare, Resolution};
use crate::usage::Usage;
use crate::{Kind, Row, SeriesKey, StoreError};

/// How long each resolution is kept, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Raw rows (default 24 h).
    pub raw: i64,
    /// Minute rows (default 30 days).
    pub minute: i64,
    /// Hour rows (default 365 days).
    pub hour: i64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention { raw: 24 * 3600, minute: 30 * 86_400, hour: 365 * 86_400 }
    }
}

impl Retention {
    /// The longest of the three: past it no block holds a row.
    pub(crate) fn longest(&self) -> i64 {
        self.raw.max(self.minute).max(self.hour)
    }

    /// How long rows of `resolution` are kept, in seconds.
    pub(crate) fn of(&self, resolution: Resolution) -> i64 {
        match resolution {
            Resolution::Raw => self.raw,
            Resolution::Minute => self.minute,
            Resolution::Hour => self.hour,
        }
    }
}

/// The default disk budget: 2 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;

/// How the writer keeps the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Time kept per resolution.
    pub retention: Retention,
    /// The most bytes the store may take on disk (database and its WAL); past it the compacted
    /// blocks that end first are dropped, and counted.
    pub max_bytes: u64,
    /// Time a flush may spend compacting finished periods beyond its share (the groups that
    /// clear a period in 30 flushes); a backlog older than a period is compacted whatever it
    /// costs.
    pub compaction_budget: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            retention: Retention::default(),
            max_bytes: DEFAULT_MAX_BYTES,
            compaction_budget: Duration::from_millis(20),
        }
    }
}

/// The writer's series ids and groups by aggregation key, one map per kind.
pub(crate) type KnownKeys = [hashbrown::HashMap<Box<str>, (i64, i64)>; 4];

/// An open store: the writer's (open) or a reader's (open_reader).
pub struct Store {
    pub(crate) connection: Connection,
    /// Readers: every series by id, with its group ([`Store::load_series`]).
    pub(crate) series: HashMap<i64, (SeriesKey, i64)>,
    /// The writer: series ids and groups by the aggregation key, one map per kind.
    pub(crate) known: KnownKeys,
    /// The writer: the group taking new series of each kind, and its members.
    open_groups: HashMap<Kind, (i64, i64)>,
    /// The writer: the last flush's series in the order they came.
    last_order: LastOrder,
    /// The kind of every group.
    pub(crate) group_kinds: HashMap<i64, Kind>,
    /// Head periods not compacted yet: (period start, group).
    pub(crate) pending: BTreeSet<(i64, i64)>,
    pub(crate) options: Options,
    pub(crate) usage: Usage,
    /// Readers: what is known of the rows' checksums, and the damaged rows met.
    pub(crate) row_checks: ReaderChecks,
    /// Readers: the count of forgets as of the last [`Store::load_series`].
    pub(crate) generation: i64,
    /// Readers: blocks found damaged since the last [`Store::take_damaged`], left out of the
    /// answers that met them.
    pub(crate) damaged: std::cell::RefCell<Vec<crate::read::DamagedBlock>>,
}

impl Store {
    /// Opens (creating if needed, migrating a store of the first format) the store at `path`
    /// to write it.
    pub fn open(path: &Path, options: Options) -> Result<Store, StoreError> {
        if crate::usage::is_emptied(path) {
            return Err(StoreError::EmptiedFile);
        }
        if let Some(damage) = crate::first_page::header_damage(path) {
            return Err(StoreError::DamagedHeader(damage));
        }
        let kept = crate::migrate::kept_copy(path);
        let connection = crate::migrate::keep_before_migrating(path, &kept)?;
        let format = prepare(&connection)?;
        let mut store = Store::with(connection, options);
        if format == 1 {
            // Migrated and verified, or rolled back to the copy kept of the first format.
            let migrated = crate::migrate::from_format_1(&mut store).and_then(|()| store.verify_migration());
            if let Err(error) = migrated {
                drop(store);
                crate::migrate::roll_back(path, &kept)?;
                return Err(error);
            }
            let _ = std::fs::remove_file(&kept);
        } else if kept.exists() {
            // A migration that ended without removing its copy (the process died between the
            // two): verified now, the copy goes; if it does not verify, it is rolled back.
            if let Err(error) = store.verify_migration() {
                drop(store);
                crate::migrate::roll_back(path, &kept)?;
                return Err(error);
            }
            let _ = std::fs::remove_file(&kept);
        }
        crate::checked_rows::fill_and_check(&mut store.connection)?;
        store.load_groups()?;
        store.load_pending()?;
        store.usage = Usage::load(&store.connection, path)?;
        Ok(store)
    }

    /// Opens the store at `path` to read it (nothing is created or migrated).
    pub fn open_reader(path: &Path) -> Result<Store, StoreError> {
        if let Some(damage) = crate::first_page::header_damage(path) {
            return Err(StoreError::DamagedHeader(damage));
        }
        let connection = Connection::open(path)?;
        crate::schema::prepare_reader(&connection)?;
        let mut store = Store::with(connection, Options::default());
        store.load_series()?;
        Ok(store)
    }

    fn with(connection: Connection, options: Options) -> Store {
        Store {
            connection,
            series: HashMap::new(),
            known: Default::default(),
            last_order: LastOrder::default(),
            open_groups: HashMap::new(),
            group_kinds: HashMap::new(),
            pending: BTreeSet::new(),
            options,
            usage: Usage::default(),
            generation: 0,
            row_checks: ReaderChecks::default(),
            damaged: Default::default(),
        }
    }

    /// Loads series written since the last call (readers call this before a query; ids only
    /// grow, so only new ones are read, unless series were forgotten since: then all).
    pub fn load_series(&mut self) -> Result<(), StoreError> {
        if !crate::schema::table_exists(&self.connection, "groups")? {
            return Ok(()); // a store of the first format, not migrated yet
        }
        self.check_generation()?;
        let known = self.series.keys().copied().max().unwrap_or(0);
        self.row_checks.refresh(&self.connection)?;
        let columns = crate::checked_rows::select(crate::checked_rows::COLUMNS, self.row_checks.columns);
        let mut statement =
            self.connection.prepare(&format!("SELECT {columns} FROM series WHERE id > ?1 AND grp IS NOT NULL"))?;
        let mut rows = statement.query([known])?;
        while let Some(row) = rows.next()? {
            match crate::checked_rows::read(row, self.row_checks.required)? {
                SeriesRow::Whole { id, key, grp } => {
                    self.series.insert(id, (key, grp));
                }
                SeriesRow::Damaged(id) => self.row_checks.note(DamagedRow::Series(id)),
            }
        }
        Ok(())
    }

    /// The series and group rows reads found damaged (their checksum does not hold) since the
    /// last call, each once per reading connection: a damaged series row's points are left out
    /// of every answer, a damaged group row's series are answered from raw rows only; the
    /// writer salvages the file when it checks it ([`Store::check_file`]).
    pub fn take_damaged_rows(&self) -> Vec<DamagedRow> {
        self.row_checks.take()
    }

    /// Reads every series group's kind from the database again (after a forget or a prune).
    pub(crate) fn load_groups(&mut self) -> Result<(), StoreError> {
        self.group_kinds.clear();
        self.open_groups.clear();
        let mut statement = self.connection.prepare("SELECT grp, kind, members FROM groups ORDER BY grp")?;
        let rows =
            statement.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?)))?;
        for row in rows {
            let (grp, kind, members) = row?;
            let Some(kind) = Kind::parse(&kind) else { continue };
            self.group_kinds.insert(grp, kind);
            self.open_groups.insert(kind, (grp, members)); // the last of each kind takes new series
        }
        Ok(())
    }

    fn load_pending(&mut self) -> Result<(), StoreError> {
        let mut statement =
            self.connection.prepare("SELECT DISTINCT grp, start FROM blocks WHERE resolution = 0 AND span = 0")?;
        let heads = statement.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?;
        for head in heads {
            let (grp, start) = head?;
            self.pending.insert((Resolution::Raw.block_start(start), grp));
        }
        Ok(())
    }

    /// Writes one flush taken at `now` (unix seconds) in one transaction, then compacts what
    /// finished periods it can within the budget and applies retention and the disk budget.
    /// `Err` means the flush is not stored; trouble in the upkeep after it is counted in
    /// [`Store::usage`] and retried at the next flush.
    pub fn write<R: FlushRows + ?Sized>(&mut self, now: i64, rows: &R) -> Result<(), StoreError> {
        let mut created = Vec::new();
        let written = self.write_transaction(rows, &mut created);
        if let Err(error) = written {
            // The transaction rolled back: the series it created do not exist, and SQLite may
            // give their ids to other series. Forgetting them keeps a later flush from writing
            // one series' rows under another's id.
            for (kind, key) in created {
                self.known[kind as usize].remove(&key);
            }
            self.reset_order();
            self.load_groups()?;
            return Err(error);
        }
        self.upkeep(now);
        Ok(())
    }

    fn write_transaction<R: FlushRows + ?Sized>(
        &mut self,
        rows: &R,
        created: &mut Vec<(Kind, Box<str>)>,
    ) -> Result<(), StoreError> {
        let transaction = self.connection.transaction()?;
        let mut ids = Vec::with_capacity(rows.len());
        let mut same_order = rows.len() == self.last_order.entries.len();
        for index in 0..rows.len() {
            let (kind, key) = rows.key(index);
            if let Some(found) = self.last_order.get(index, kind, key) {
                ids.push(found);
                continue;
            }
            same_order = false;
            let found = match self.known[kind as usize].get(key) {
                Some(&found) => found,
                None => {
                    let found = series_id(&transaction, kind, key, &mut self.open_groups, &mut self.group_kinds)?;
                    self.known[kind as usize].insert(key.into(), found);
                    created.push((kind, key.into()));
                    found
                }
            };
            ids.push(found);
        }
        if !same_order {
            self.last_order = LastOrder::of(rows, &ids);
        }
        forget_stale_keys(&mut self.known, rows, &ids);
        // Rows are made one group at a time, from positions sorted by group: a flush of 100k
        // series never holds 100k rows at once.
        let mut by_group: HashMap<i64, Vec<(i64, u32)>> = HashMap::new();
        for (index, &(id, grp)) in ids.iter().enumerate() {
            by_group.entry(grp).or_default().push((id, index as u32));
        }
        drop(ids);
        let mut points = 0;
        for (grp, mut members) in by_group {
            let kind = self.group_kinds.get(&grp).copied().unwrap_or(Kind::Counter);
            members.sort_unstable();
            let mut group_rows: Vec<(i64, Row)> =
                members.iter().map(|&(id, index)| (id, rows.row(index as usize))).collect();
            one_row_each(&mut group_rows, kind);
            let Some(ts) = group_rows.first().map(|(_, row)| row.ts) else { continue };
            let (gained, lost) = put_head(&transaction, grp, ts, kind, group_rows)?;
            points += gained;
            self.usage.corrupt_points += lost;
            self.pending.insert((Resolution::Raw.block_start(ts), grp));
        }
        self.usage.points = self.usage.points.saturating_add_signed(points);
        crate::usage::save_points(&transaction, self.usage.points)?;
        if let Some(positions) = rows.log_positions().filter(|positions| !positions.is_empty()) {
            crate::log_positions::save(&transaction, positions)?;
        }
        transaction.commit()?;
        Ok(())
    }

    /// Where in a log (a Kafka topic) the batches the store file at `path` holds were read:
    /// `(partition, through, beyond)` per partition (see [`agg::LogPositions`]).
    pub fn log_positions_at(path: &Path, log: &str) -> Result<Vec<(i32, i64, Vec<i64>)>, StoreError> {
        crate::log_positions::read(path, log)
    }

    /// Forgets the order of the last flush: the next one looks every key up.
    pub(crate) fn reset_order(&mut self) {
        self.last_order = LastOrder::default();
    }

    /// Keeps the store by new settings from the next flush on (a config reload): retention
    /// and the disk budget apply at the next trim.
    pub fn set_options(&mut self, options: Options) {
        self.options = options;
        self.usage.trimmed_period = i64::MIN; // trim at the next flush
    }

    /// What the store holds and has dropped, as of the last write.
    pub fn usage(&self) -> &Usage {
        &self.usage
    }
}

/// Keeps the writer's key map to what flushes carry: when it holds more than twice this
/// flush's keys and [`KNOWN_SLACK`] more (names that churn: ids of series long idle), it is
/// built again from this flush. A key forgotten here and sent again is looked up in the table.
fn forget_stale_keys<R: FlushRows + ?Sized>(known: &mut KnownKeys, rows: &R, ids: &[(i64, i64)]) {
    let held: usize = known.iter().map(|map| map.len()).sum();
    if held <= 2 * rows.len() + KNOWN_SLACK {
        return;
    }
    *known = Default::default();
    for (index, &found) in ids.iter().enumerate() {
        let (kind, key) = rows.key(index);
        known[kind as usize].insert(key.into(), found);
    }
}

/// Keys the writer's key map may hold beyond twice a flush's before it starts over.
pub const KNOWN_SLACK: usize = 65_536;

/// The ids of the last flush's rows in the order they came. The aggregator hands its series
/// over in the same order flush after flush, so comparing each key with the one at the same
/// place (both read front to back) finds its id without hashing it and chasing the hash
/// table's memory; a key that differs falls back to the map.
#[derive(Default)]
struct LastOrder {
    keys: String,
    /// Per row: where its key starts in `keys`, its length, kind, id and group.
    entries: Vec<(usize, usize, Kind, i64, i64)>,
}

impl LastOrder {
    fn of<R: FlushRows + ?Sized>(rows: &R, ids: &[(i64, i64)]) -> LastOrder {
        let length = (0..rows.len()).map(|index| rows.key(index).1.len()).sum();
        let mut order = LastOrder { keys: String::with_capacity(length), entries: Vec::with_capacity(rows.len()) };
        for (index, &(id, grp)) in ids.iter().enumerate() {
            let (kind, key) = rows.key(index);
            order.entries.push((order.keys.len(), key.len(), kind, id, grp));
            order.keys.push_str(key);
        }
        order
    }

    fn get(&self, index: usize, kind: Kind, key: &str) -> Option<(i64, i64)> {
        let &(start, length, stored_kind, id, grp) = self.entries.get(index)?;
        let same = stored_kind == kind && self.keys.get(start..start + length) == Some(key);
        same.then_some((id, grp))
    }
}

/// The id and group of a series not seen since the store opened: the stored one, or a new
/// one in the open group of its kind (a new group when that one is full).
fn series_id(
    transaction: &Transaction<'_>,
    kind: Kind,
    key: &str,
    open_groups: &mut HashMap<Kind, (i64, i64)>,
    group_kinds: &mut HashMap<i64, Kind>,
) -> Result<(i64, i64), StoreError> {
    let canonical = SeriesKey::from_key(key, kind);
    let stored = transaction
        .prepare_cached("SELECT id, grp FROM series WHERE name = ?1 AND tags = ?2 AND kind = ?3 AND grp IS NOT NULL")?
        .query_row(params![canonical.name, canonical.tags, kind.as_str()], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
        })
        .optional()?;
    if let Some(found) = stored {
        return Ok(found);
    }
    let grp = match open_groups.get(&kind) {
        Some(&(grp, members)) if members < group_size(kind) => grp,
        _ => {
            transaction
                .execute("INSERT INTO groups (kind, members, compacted_until) VALUES (?1, 0, 0)", [kind.as_str()])?;
            let grp = transaction.last_insert_rowid();
            crate::checked_rows::seal_group(transaction, grp)?;
            group_kinds.insert(grp, kind);
            open_groups.insert(kind, (grp, 0));
            grp
        }
    };
    transaction.prepare_cached("UPDATE groups SET members = members + 1 WHERE grp = ?1")?.execute([grp])?;
    if let Some(open) = open_groups.get_mut(&kind) {
        open.1 += 1;
    }
    transaction
        .prepare_cached("INSERT INTO series (name, tags, kind, grp) VALUES (?1, ?2, ?3, ?4)")?
        .execute(params![canonical.name, canonical.tags, kind.as_str(), grp])?;
    let id = transaction.last_insert_rowid();
    crate::checked_rows::seal_series(transaction, id, &canonical, grp)?;
    Ok((id, grp))
}

/// A flush's rows sorted by id, with a series' rows merged into one (two aggregation keys
/// that differ only in tag order are one series).
fn one_row_each(rows: &mut Vec<(i64, Row)>, kind: Kind) {
    rows.dedup_by(|later, earlier| {
        let same = later.0 == earlier.0;
        if same {
            earlier.1.merge(&later.1, kind);
        }
        same
    });
}

/// The rows of one flush, by position: each with its kind and the aggregation key it came
/// under. [`Store::write`] reads each key once or twice and makes each row once.
pub trait FlushRows {
    /// How many rows.
    fn len(&self) -> usize;
    /// True when there is none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The kind and key of row `index`.
    fn key(&self, index: usize) -> (Kind, &str);
    /// Row `index`.
    fn row(&self, index: usize) -> Row;
    /// Where in a log the batches of these rows were read, kept with them (a global's).
    fn log_positions(&self) -> Option<&agg::LogPositions> {
        None
    }
}

/// A snapshot's series in order: counters, timers, gauges, sets.
impl FlushRows for Snapshot {
    fn len(&self) -> usize {
        self.counters.len() + self.timers.len() + self.gauges.len() + self.sets.len()
    }

    fn log_positions(&self) -> Option<&agg::LogPositions> {
        Some(&self.log_positions)
    }

    fn key(&self, index: usize) -> (Kind, &str) {
        match place(self, index) {
            Place::Counter(i) => (Kind::Counter, self.counters.get(i).map_or("", |c| c.key)),
            Place::Timer(i) => (Kind::Timer, &self.timers[i].key),
            Place::Gauge(i) => (Kind::Gauge, &self.gauges[i].key),
            Place::Set(i) => (Kind::Set, &self.sets[i].key),
        }
    }

    fn row(&self, index: usize) -> Row {
        let base = Row { seconds: self.interval.as_secs_f64(), ..Row::empty(self.timestamp as i64) };
        match place(self, index) {
            Place::Counter(i) => Row { count: self.counters.get(i).map_or(f64::NAN, |c| c.count), ..base },
            Place::Timer(i) => {
                let timer = &self.timers[i];
                let t = &timer.totals;
                Row {
                    count: t.count,
                    sum: t.sum,
                    sum_squares: t.sum_squares,
                    min: t.min,
                    max: t.max,
                    value: t.received as f64,
                    histogram: Some(timer.histogram.clone()),
                    ..base
                }
            }
            Place::Gauge(i) => {
                let value = self.gauges[i].value;
                Row { value, min: value, max: value, ..base }
            }
            Place::Set(i) => Row { value: self.sets[i].count as f64, ..base },
        }
    }
}

/// Where row `index` of a snapshot is.
enum Place {
    Counter(usize),
    Timer(usize),
    Gauge(usize),
    Set(usize),
}

fn place(snapshot: &Snapshot, index: usize) -> Place {
    let mut at = index;
    for (length, place) in [
        (snapshot.counters.len(), Place::Counter as fn(usize) -> Place),
        (snapshot.timers.len(), Place::Timer),
        (snapshot.gauges.len(), Place::Gauge),
    ] {
        if at < length {
            return place(at);
        }
        at -= length;
    }
    Place::Set(at)
}

/// Rows made elsewhere (tests, benchmarks): each row is cloned when it is written.
impl FlushRows for [(Kind, &str, Row)] {
    fn len(&self) -> usize {
        <[_]>::len(self)
    }

    fn key(&self, index: usize) -> (Kind, &str) {
        (self[index].0, self[index].1)
    }

    fn row(&self, index: usize) -> Row {
        self[index].2.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store file cut to 0 bytes (probe N10's last row) opened as a new, empty store: its
    /// history gone without a word. It is damaged now (set aside, counted, logged by histd);
    /// a store just made is never empty, and an empty file with a write-ahead log to recover
    /// is SQLite's to read.
    #[test]
    fn a_store_file_emptied_since_is_damaged() {
        let dir = std::env::temp_dir().join(format!("histd-store-emptied-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("histd.db");
        let store = Store::open(&path, Options::default()).unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > 0, "the first page is written when the store is made");
        drop(store);
        std::fs::File::create(&path).unwrap();
        let _ = std::fs::remove_file(crate::usage::wal_path(&path));
        let error = Store::open(&path, Options::default()).err().expect("an emptied file is refused");
        assert!(error.is_damaged_file(), "{error}");
        std::fs::write(crate::usage::wal_path(&path), b"a log to recover").unwrap();
        assert!(!crate::usage::is_emptied(&path), "a write-ahead log is SQLite's to read");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Names that churn: the writer's key map is rebuilt from the flush once it holds far more
    /// than flushes carry, and a key it forgot keeps its id when it comes back.
    #[test]
    fn the_key_map_forgets_keys_no_flush_carries() {
        let dir = std::env::temp_dir().join(format!("histd-store-known-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut store = Store::open(&dir.join("histd.db"), Options::default()).unwrap();
        let names: Vec<String> = (0..KNOWN_SLACK + 10).map(|i| format!("churn.{i}")).collect();
        let burst: Vec<(Kind, &str, Row)> =
            names.iter().map(|n| (Kind::Counter, n.as_str(), Row::counter(10, 1.0))).collect();
        store.write(10, burst.as_slice()).unwrap();
        let held = |store: &Store| store.known.iter().map(|m| m.len()).sum::<usize>();
        assert_eq!(held(&store), names.len());
        let few: Vec<(Kind, &str, Row)> =
            names[..3].iter().map(|n| (Kind::Counter, n.as_str(), Row::counter(20, 1.0))).collect();
        store.write(20, few.as_slice()).unwrap();
        assert_eq!(held(&store), 3, "rebuilt from the flush");
        let back = [(Kind::Counter, names[KNOWN_SLACK].as_str(), Row::counter(30, 1.0))];
        store.write(30, back.as_slice()).unwrap();
        store.load_series().unwrap();
        let (listed, _) = store.series(Some(&names[KNOWN_SLACK]), 1).unwrap();
        assert_eq!(store.known[Kind::Counter as usize][names[KNOWN_SLACK].as_str()].0, listed[0].id, "the stored id");
        assert_eq!(store.series(None, 1).unwrap().1, names.len(), "no series made twice");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
