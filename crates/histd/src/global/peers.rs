//! The other members of a global's group (`global.peers`, issue 49, item 3): a histogram, a
//! heatmap or a series list asked of one global is answered for the whole group. Each series
//! lives, interval by interval, on the global that owned its partition when its batch came,
//! so one member's answer alone is a shard. The peers are asked in parallel (their own answer
//! only: `local=1`) within [`PEER_DEADLINE`], and the answers merged exactly: counts and sums
//! added, histograms bin for bin (circllhist bins are the same everywhere), min and max
//! combined, series listed once. Every such answer carries `partial` and `members` (each
//! peer, whether it answered, and why not): a peer down makes an answer partial, never wrong
//! and never an error.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use hyper::Method;
use serde::Serialize;
use tokio_rustls::rustls::ClientConfig;

use crate::contract::{HeatmapResult, HeatmapStep, HistogramResult, SeriesEntry, SeriesList};
use crate::http_client::{Client, HttpUrl};
use crate::secret_file::TokenFile;

/// How long a fan-out waits for the peers.
pub const PEER_DEADLINE: Duration = Duration::from_secs(5);

/// The most a peer's answer may take.
const MAX_PEER_ANSWER: usize = 64 * 1024 * 1024;

/// The query parameter that asks a global for its own answer alone (what peers are asked).
pub const LOCAL_ONLY: &str = "local";

/// The peers, and how to reach them.
#[derive(Debug)]
pub struct Peers {
    urls: Vec<HttpUrl>,
    token: Option<Arc<TokenFile>>,
    tls: Option<Arc<ClientConfig>>,
}

pub use crate::contract::Member;

impl Peers {
    /// The peers `global.peers` lists, with `global.peerTokenFile` and `global.peerCaFile`;
    /// `None` without peers.
    pub fn of(config: &crate::global::config::GlobalConfig) -> Result<Option<Peers>, String> {
        if config.peers.is_empty() {
            return Ok(None);
        }
        let token = match &config.peer_token_file {
            None => None,
            Some(path) => Some(Arc::new(TokenFile::open(path, "global.peerTokenFile")?)),
        };
        let tls = match &config.peer_ca_file {
            None => None,
            Some(ca) => {
                let mut roots =
                    crate::http_client::system_roots().unwrap_or_else(|_| tokio_rustls::rustls::RootCertStore::empty());
                for certificate in crate::tls::certificates(ca).map_err(|why| format!("global.peerCaFile: {why}"))? {
                    roots.add(certificate).map_err(|error| format!("global.peerCaFile: {}: {error}", ca.display()))?;
                }
                Some(
                    crate::tls::client_config_trusting(roots, None)
                        .map_err(|why| format!("global.peerCaFile: {why}"))?,
                )
            }
        };
        Ok(Some(Peers { urls: config.peers.clone(), token, tls }))
    }

    /// Asks every peer `GET <path>?<query>&local=1` at once: each one's URL and its body, or
    /// why there is none (no answer within [`PEER_DEADLINE`], a status other than 200).
    pub async fn ask(&self, path: &str, query: &str) -> Vec<(String, Result<Vec<u8>, String>)> {
        let queries = vec![Some(query.to_string()); self.urls.len()];
        self.ask_each(path, &queries).await.into_iter().filter_map(|(url, answer)| Some((url, answer?))).collect()
    }

    /// Asks the n-th peer `GET <path>?<queries[n]>&local=1`, all at once (a peer whose query is
    /// `None` is not asked: its answer is `None`), in the order of `global.peers`.
    pub async fn ask_each(
        &self,
        path: &str,
        queries: &[Option<String>],
    ) -> Vec<(String, Option<Result<Vec<u8>, String>>)> {
        let asked = self.urls.iter().zip(queries).map(|(url, query)| {
            let shown = format!("{}://{}{}", url.scheme(), url.authority(), url.path);
            let asking = query.as_ref().map(|query| {
                let mut target = url.clone();
                let separator = if query.is_empty() { "" } else { "&" };
                target.path = format!("{}{path}?{query}{separator}{LOCAL_ONLY}=1", url.path);
                let client = Client::new(target, Vec::new(), PEER_DEADLINE)
                    .with_tls(self.tls.clone())
                    .with_token_file(self.token.clone())
                    .with_max_body(MAX_PEER_ANSWER);
                tokio::spawn(async move {
                    let mut client = client;
                    match client.send(Method::GET, bytes::Bytes::new()).await {
                        Ok(answer) if answer.status == 200 => Ok(answer.body.to_vec()),
                        Ok(answer) => Err(format!("HTTP {}: {}", answer.status, String::from_utf8_lossy(&answer.body))),
                        Err(why) => Err(why),
                    }
                })
            });
            (shown, asking)
        });
        let mut answers = Vec::with_capacity(self.urls.len());
        for (shown, asking) in asked.collect::<Vec<_>>() {
            let answered = match asking {
                None => None,
                Some(asking) => Some(asking.await.unwrap_or_else(|error| Err(format!("the request failed: {error}")))),
            };
            answers.push((shown, answered));
        }
        answers
    }
}

/// Merges the peers' `answers` (JSON of `T`) into `local` with `merge`: the members, each
/// answered or not (an answer that does not read as `T` is not one).
pub fn merge_answers<T: serde::de::DeserializeOwned>(
    local: &mut T,
    answers: Vec<(String, Result<Vec<u8>, String>)>,
    merge: impl Fn(&mut T, T),
) -> Vec<Member> {
    let mut members = vec![Member { url: "self".into(), answered: true, error: None }];
    for (url, answered) in answers {
        let read =
            answered.and_then(|body| serde_json::from_slice::<T>(&body).map_err(|e| format!("not an answer: {e}")));
        match read {
            Ok(answer) => {
                merge(local, answer);
                members.push(Member { url, answered: true, error: None });
            }
            Err(why) => {
                members.push(Member { url, answered: false, error: Some(crate::printable::escaped(&why).into_owned()) })
            }
        }
    }
    members
}

/// Adds a peer's histogram answer into `into`: counts and sums added, min and max combined,
/// the circllhist merged bin for bin (its bins recomputed from it).
pub fn merge_histogram(into: &mut HistogramResult, other: HistogramResult) {
    into.count += other.count;
    into.sum = add(into.sum, other.sum);
    into.min = combine(into.min, other.min, f64::min);
    into.max = combine(into.max, other.max, f64::max);
    let decode = |text: &str| circllhist::Histogram::from_base64(text).unwrap_or_else(|_| circllhist::Histogram::new());
    let merged = circllhist::Histogram::merge_all(&[decode(&into.circllhist), decode(&other.circllhist)]);
    into.bins = store::bins_of(&merged);
    into.circllhist = merged.to_base64();
}

/// Adds a peer's heatmap into `into`: per step, counts of the same bin added.
pub fn merge_heatmap(into: &mut HeatmapResult, other: HeatmapResult) {
    let mut steps: BTreeMap<i64, BTreeMap<(u64, u64), u64>> = BTreeMap::new();
    for step in into.steps.drain(..).chain(other.steps) {
        let bins = steps.entry(step.t).or_default();
        for (lower, upper, count) in step.bins {
            // A peer's counts are its word: added without wrapping, whatever they say.
            let bin = bins.entry((lower.to_bits(), upper.to_bits())).or_default();
            *bin = bin.saturating_add(count);
        }
    }
    into.steps = steps
        .into_iter()
        .map(|(t, bins)| HeatmapStep {
            t,
            bins: bins
                .into_iter()
                .map(|((lower, upper), count)| (f64::from_bits(lower), f64::from_bits(upper), count))
                .collect(),
        })
        .collect();
}

/// Adds a peer's series list into `into`: each series listed once; the total counts the
/// series the members listed, each once.
pub fn merge_series(into: &mut SeriesList, other: SeriesList) {
    let mut at: HashMap<(String, String, Vec<String>), usize> =
        into.series.iter().enumerate().map(|(index, entry)| (entry_key(entry), index)).collect();
    for entry in other.series {
        match (at.get(&entry_key(&entry)).map(|&index| &mut into.series[index]), &entry) {
            // A name's tag sets on two members: at least the most either has.
            (Some(SeriesEntry::Name { tag_sets, .. }), SeriesEntry::Name { tag_sets: theirs, .. }) => {
                *tag_sets = (*tag_sets).max(*theirs)
            }
            (Some(_), _) => {}
            (None, _) => {
                at.insert(entry_key(&entry), into.series.len());
                into.series.push(entry);
            }
        }
    }
    for (origin, count) in other.origins {
        let kept = into.origins.entry(origin).or_insert(0);
        *kept = (*kept).max(count);
    }
    into.truncated |= other.truncated;
    // Listed whole by every member: the union is the total. Cut by a limit somewhere: at least
    // the most any member matched, and what the union lists.
    let listed = into.series.len() as u64;
    into.total = if into.truncated { into.total.max(other.total).max(listed) } else { listed };
    into.series.sort_by_key(entry_key);
}

/// Cuts a merged series list to the `limit` its request asked (the members each listed up to
/// it): the first by name, and `truncated` when any were cut.
pub fn cut_series(list: &mut SeriesList, limit: usize) {
    if list.series.len() > limit {
        list.series.truncate(limit);
        list.truncated = true;
    }
}

/// What tells two entries of a series list apart: a series by its name, type and tags, a
/// name (`group=name`) by its name and type.
fn entry_key(entry: &SeriesEntry) -> (String, String, Vec<String>) {
    match entry {
        SeriesEntry::Series { name, tags, kind, .. } => (name.clone(), kind.clone(), tags.clone()),
        SeriesEntry::Name { name, kind, .. } => (name.clone(), kind.clone(), Vec::new()),
    }
}

/// Two members' figures added (either alone when the other has none).
pub(crate) fn add(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

/// Two members' figures combined by `pick` (`f64::min`, `f64::max`; either alone when the
/// other has none).
pub(crate) fn combine(a: Option<f64>, b: Option<f64>, pick: fn(f64, f64) -> f64) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(pick(a, b)),
        (a, b) => a.or(b),
    }
}

/// One step's merged row as a peer sends it (`GET /api/v1/query?...&rows=1&local=1`): what
/// the query language evaluates, so the members' rows of a step merge exactly before the
/// function is applied (a p99 of the group, not a mean of p99s). Absent values are `null`.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct WireRow {
    seconds: f64,
    count: Option<f64>,
    sum: Option<f64>,
    sum_squares: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
    value: Option<f64>,
    circllhist: Option<String>,
}

/// A peer's rows of a query's steps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct StepRows {
    /// `[t, row or null]` for each step.
    pub steps: Vec<(i64, Option<WireRow>)>,
}

impl WireRow {
    /// `row` for the wire.
    pub fn of(row: &store::Row) -> WireRow {
        let number = |value: f64| value.is_finite().then_some(value);
        WireRow {
            seconds: row.seconds,
            count: number(row.count),
            sum: number(row.sum),
            sum_squares: number(row.sum_squares),
            min: number(row.min),
            max: number(row.max),
            value: number(row.value),
            circllhist: row.histogram.as_ref().map(circllhist::Histogram::to_base64),
        }
    }

    /// The row it stands for, at `ts`.
    pub fn row(&self, ts: i64) -> store::Row {
        let number = |value: Option<f64>| value.unwrap_or(f64::NAN);
        store::Row {
            ts,
            seconds: self.seconds,
            count: number(self.count),
            sum: number(self.sum),
            sum_squares: number(self.sum_squares),
            min: number(self.min),
            max: number(self.max),
            value: number(self.value),
            histogram: self.circllhist.as_deref().and_then(|text| circllhist::Histogram::from_base64(text).ok()),
        }
    }
}

/// Merges a peer's rows into `into` step by step (the steps are the same: one grid).
pub fn merge_step_rows(into: &mut StepRows, other: StepRows) {
    let mut steps: BTreeMap<i64, Option<store::Row>> =
        into.steps.drain(..).map(|(t, row)| (t, row.map(|row| row.row(t)))).collect();
    for (t, row) in other.steps {
        let Some(row) = row.map(|row| row.row(t)) else { continue };
        match steps.entry(t).or_default() {
            Some(merged) => merged.merge(&row, store::Kind::Timer),
            slot => *slot = Some(row),
        }
    }
    into.steps = steps.into_iter().map(|(t, row)| (t, row.as_ref().map(WireRow::of))).collect();
}

/// True when the group's answer to `expr` is the merge of its members' rows: every function
/// but a gauge's `value` (which member's is the newest is not known) and a set's
/// `cardinality` (members' distinct counts do not add).
pub fn mergeable(expr: &store::Expr) -> bool {
    match expr {
        store::Expr::Cumulative(inner) => mergeable(inner),
        store::Expr::Call(function, ..) => !matches!(function, store::Function::Value | store::Function::Cardinality),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Origin;

    fn series(name: &str, tags: &[&str]) -> SeriesEntry {
        let tags = tags.iter().map(|t| t.to_string()).collect();
        SeriesEntry::Series { name: name.into(), tags, kind: "counter".into(), origin: Origin::User }
    }

    fn name(name: &str, tag_sets: u64) -> SeriesEntry {
        SeriesEntry::Name { name: name.into(), kind: "timer".into(), tag_sets, origin: Origin::User }
    }

    fn list(series: Vec<SeriesEntry>, total: u64, truncated: bool) -> SeriesList {
        SeriesList { series, total, truncated, origins: BTreeMap::from([("user".to_string(), total)]) }
    }

    /// Issue 49: a series two members hold is listed once, a name's tag sets are at least the
    /// most either has, the total is the union's (a lower bound once a member was cut), and the
    /// merged list is cut to the limit asked.
    #[test]
    fn series_lists_merge_once_each_and_are_cut_to_the_limit() {
        // (this member's, a peer's, the limit, the names listed, total, truncated)
        type Case = (SeriesList, SeriesList, usize, Vec<&'static str>, u64, bool);
        let cases: Vec<Case> = vec![
            (
                list(vec![series("a", &[]), series("b", &["k=1"])], 2, false),
                list(vec![series("b", &["k=1"]), series("b", &["k=2"]), series("c", &[])], 3, false),
                10,
                vec!["a", "b", "b", "c"],
                4,
                false,
            ),
            (
                list(vec![series("a", &[]), series("c", &[])], 2, false),
                list(vec![series("b", &[])], 1, false),
                2,
                vec!["a", "b"],
                3,
                true,
            ),
            (
                list(vec![series("a", &[])], 1, false),
                list(vec![series("b", &[])], 500, true),
                10,
                vec!["a", "b"],
                500,
                true,
            ),
            (list(vec![name("t", 3)], 1, false), list(vec![name("t", 5)], 1, false), 10, vec!["t"], 1, false),
        ];
        for (mut mine, theirs, limit, names, total, truncated) in cases {
            merge_series(&mut mine, theirs);
            cut_series(&mut mine, limit);
            let listed: Vec<&str> = mine
                .series
                .iter()
                .map(|entry| match entry {
                    SeriesEntry::Series { name, .. } | SeriesEntry::Name { name, .. } => name.as_str(),
                })
                .collect();
            assert_eq!((listed, mine.total, mine.truncated), (names.clone(), total, truncated), "{names:?}");
            if let Some(SeriesEntry::Name { tag_sets, .. }) = mine.series.first() {
                assert_eq!(*tag_sets, 5, "a name's tag sets: the most a member has");
            }
        }
    }
}
