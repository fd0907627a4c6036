//! Writing: one transaction per flush holds its raw rows, the rollups of every minute and hour
//! the flush completed, and the retention trim. A crash loses at most that transaction.

use std::collections::HashMap;
use std::path::Path;

use agg::Snapshot;
use rusqlite::{params, Connection, OptionalExtension, Transaction};

use crate::schema::{prepare, Resolution};
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
    fn of(&self, resolution: Resolution) -> i64 {
        match resolution {
            Resolution::Raw => self.raw,
            Resolution::Minute => self.minute,
            Resolution::Hour => self.hour,
        }
    }
}

/// An open store.
pub struct Store {
    pub(crate) connection: Connection,
    ids: HashMap<SeriesKey, i64>,
    pub(crate) kinds: HashMap<i64, SeriesKey>,
    retention: Retention,
}

impl Store {
    /// Opens (creating if needed) the store at `path`.
    pub fn open(path: &Path, retention: Retention) -> Result<Store, StoreError> {
        let connection = Connection::open(path)?;
        prepare(&connection)?;
        let mut store = Store { connection, ids: HashMap::new(), kinds: HashMap::new(), retention };
        store.load_series()?;
        Ok(store)
    }

    /// Loads series written since the last call (readers call this before a query; ids only
    /// grow, so only new ones are read).
    pub fn load_series(&mut self) -> Result<(), StoreError> {
        let known = self.kinds.keys().copied().max().unwrap_or(0);
        let mut statement = self.connection.prepare("SELECT id, name, tags, kind FROM series WHERE id > ?1")?;
        let rows = statement.query_map([known], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?, row.get::<_, String>(2)?, row.get::<_, String>(3)?))
        })?;
        for row in rows {
            let (id, name, tags, kind) = row?;
            let Some(kind) = Kind::parse(&kind) else { continue };
            let key = SeriesKey { name, tags, kind };
            self.ids.insert(key.clone(), id);
            self.kinds.insert(id, key);
        }
        Ok(())
    }

    /// Writes one flush taken at `now` (unix seconds): its rows, the rollups it completes, and
    /// the retention trim, in one transaction.
    pub fn write(&mut self, now: i64, rows: Vec<(SeriesKey, Row)>) -> Result<(), StoreError> {
        let mut new_series = Vec::new();
        let written = self.write_transaction(now, rows, &mut new_series);
        if written.is_err() {
            // The transaction rolled back: the series it created do not exist, and SQLite may
            // give their ids to other series. Forgetting them keeps a later flush from writing
            // one series' rows under another's id.
            for (key, id) in new_series {
                self.ids.remove(&key);
                self.kinds.remove(&id);
            }
        }
        written
    }

    /// The transaction of [`Store::write`]; `new_series` collects the series it creates.
    fn write_transaction(
        &mut self,
        now: i64,
        rows: Vec<(SeriesKey, Row)>,
        new_series: &mut Vec<(SeriesKey, i64)>,
    ) -> Result<(), StoreError> {
        let transaction = self.connection.transaction()?;
        for (key, row) in rows {
            let id = match self.ids.get(&key) {
                Some(&id) => id,
                None => {
                    transaction.execute(
                        "INSERT INTO series (name, tags, kind) VALUES (?1, ?2, ?3)",
                        params![key.name, key.tags, key.kind.as_str()],
                    )?;
                    let id = transaction.last_insert_rowid();
                    new_series.push((key.clone(), id));
                    self.ids.insert(key.clone(), id);
                    self.kinds.insert(id, key.clone());
                    id
                }
            };
            upsert(&transaction, Resolution::Raw, id, &row, key.kind)?;
        }
        roll_up(&transaction, &self.kinds, Resolution::Raw, Resolution::Minute, now)?;
        roll_up(&transaction, &self.kinds, Resolution::Minute, Resolution::Hour, now)?;
        for resolution in Resolution::ALL {
            let oldest = now - self.retention.of(resolution);
            transaction.execute(&format!("DELETE FROM {} WHERE ts < ?1", resolution.table()), [oldest])?;
        }
        transaction.commit()?;
        Ok(())
    }
}

/// Inserts a row, or merges it into the row already there for the same series and time (a
/// second flush in the same second, late data for a rolled-up period). Statements are cached:
/// the common case is one prepared insert.
fn upsert(
    transaction: &Transaction<'_>,
    resolution: Resolution,
    id: i64,
    row: &Row,
    kind: Kind,
) -> Result<(), StoreError> {
    let table = resolution.table();
    let insert = format!("INSERT INTO {table} (series, {COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (series, ts) DO NOTHING");
    if execute_row(transaction, &insert, id, row)? == 1 {
        return Ok(());
    }
    let select = format!("SELECT {COLUMNS} FROM {table} WHERE series = ?1 AND ts = ?2");
    let earlier = transaction.prepare_cached(&select)?.query_row(params![id, row.ts], row_of)?;
    let mut merged = decode(id, earlier)?;
    merged.merge(row, kind);
    let replace =
        format!("INSERT OR REPLACE INTO {table} (series, {COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    execute_row(transaction, &replace, id, &merged)?;
    Ok(())
}

fn execute_row(transaction: &Transaction<'_>, sql: &str, id: i64, row: &Row) -> Result<usize, StoreError> {
    let mut statement = transaction.prepare_cached(sql)?;
    let hist = row.hist.as_ref().map(|h| h.to_bytes());
    Ok(statement.execute(params![
        id,
        row.ts,
        row.seconds,
        null(row.count),
        null(row.sum),
        null(row.sum_squares),
        null(row.min),
        null(row.max),
        null(row.value),
        hist
    ])?)
}

/// The columns of a row, in `row_of`'s order.
pub(crate) const COLUMNS: &str = "ts, seconds, count, sum, sum_squares, min, max, value, hist";

/// A row as SQLite returns it, the histogram still encoded.
pub(crate) struct StoredRow {
    row: Row,
    hist: Option<Vec<u8>>,
}

/// A row from a result whose columns are [`COLUMNS`].
pub(crate) fn row_of(sql: &rusqlite::Row<'_>) -> rusqlite::Result<StoredRow> {
    row_at(sql, 0)
}

/// A row from a result whose [`COLUMNS`] start at column `first`.
fn row_at(sql: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<StoredRow> {
    let number =
        |index: usize| -> rusqlite::Result<f64> { Ok(sql.get::<_, Option<f64>>(first + index)?.unwrap_or(f64::NAN)) };
    let row = Row {
        ts: sql.get(first)?,
        seconds: sql.get(first + 1)?,
        count: number(2)?,
        sum: number(3)?,
        sum_squares: number(4)?,
        min: number(5)?,
        max: number(6)?,
        value: number(7)?,
        hist: None,
    };
    Ok(StoredRow { row, hist: sql.get(first + 8)? })
}

pub(crate) fn decode(series: i64, stored: StoredRow) -> Result<Row, StoreError> {
    let mut row = stored.row;
    if let Some(bytes) = stored.hist {
        let hist = circllhist::Histogram::from_bytes(&bytes).map_err(|reason| StoreError::CorruptHistogram {
            series,
            ts: row.ts,
            reason,
        })?;
        row.hist = Some(hist);
    }
    Ok(row)
}

fn null(value: f64) -> Option<f64> {
    (!value.is_nan()).then_some(value)
}

/// Rolls every complete period of `to` (minute or hour) not yet rolled up from `from` rows:
/// rows of one series and period merge into one. A watermark in `meta` remembers how far.
fn roll_up(
    transaction: &Transaction<'_>,
    kinds: &HashMap<i64, SeriesKey>,
    from: Resolution,
    to: Resolution,
    now: i64,
) -> Result<(), StoreError> {
    let width = to.seconds();
    let current = now.div_euclid(width) * width;
    let mark = format!("rolled_{}", to.table());
    let rolled: i64 = transaction
        .query_row("SELECT value FROM meta WHERE key = ?1", [&mark], |r| r.get(0))
        .optional()?
        .unwrap_or(i64::MIN);
    if rolled >= current {
        return Ok(());
    }
    let mut periods: HashMap<(i64, i64), Row> = HashMap::new();
    {
        let mut statement = transaction.prepare(&format!(
            "SELECT series, {COLUMNS} FROM {} WHERE ts >= ?1 AND ts < ?2 ORDER BY series, ts",
            from.table()
        ))?;
        let mut rows = statement.query(params![rolled.max(0), current])?;
        while let Some(sql) = rows.next()? {
            let series: i64 = sql.get(0)?;
            let stored = row_at(sql, 1)?;
            let row = decode(series, stored)?;
            let Some(key) = kinds.get(&series) else { continue };
            let start = row.ts.div_euclid(width) * width;
            periods
                .entry((series, start))
                .and_modify(|period| period.merge(&row, key.kind))
                .or_insert_with(|| Row { ts: start, ..row });
        }
    }
    for ((series, _), row) in &periods {
        let kind = kinds.get(series).map_or(Kind::Counter, |k| k.kind);
        upsert(transaction, to, *series, row, kind)?;
    }
    transaction.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)", params![mark, current])?;
    Ok(())
}

/// The rows of a flush: one per series (series whose keys differ only in tag order merge).
pub fn rows_of(snapshot: &Snapshot) -> Vec<(SeriesKey, Row)> {
    let ts = snapshot.timestamp as i64;
    let seconds = snapshot.interval.as_secs_f64();
    let base = || Row { seconds, ..Row::empty(ts) };
    let mut rows: HashMap<SeriesKey, Row> = HashMap::new();
    let mut add = |key: SeriesKey, row: Row| {
        rows.entry(key.clone()).and_modify(|existing| existing.merge(&row, key.kind)).or_insert(row);
    };
    for counter in &snapshot.counters {
        add(SeriesKey::from_key(counter.key, Kind::Counter), Row { count: counter.count, ..base() });
    }
    for timer in &snapshot.timers {
        let t = &timer.totals;
        let row = Row {
            count: t.count,
            sum: t.sum,
            sum_squares: t.sum_squares,
            min: t.min,
            max: t.max,
            value: t.received as f64,
            hist: Some(timer.distribution.clone()),
            ..base()
        };
        add(SeriesKey::from_key(&timer.key, Kind::Timer), row);
    }
    for gauge in &snapshot.gauges {
        add(
            SeriesKey::from_key(&gauge.key, Kind::Gauge),
            Row { value: gauge.value, min: gauge.value, max: gauge.value, ..base() },
        );
    }
    for set in &snapshot.sets {
        add(SeriesKey::from_key(&set.key, Kind::Set), Row { value: set.count as f64, ..base() });
    }
    rows.into_iter().collect()
}
