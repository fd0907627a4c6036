//! The series list (`GET /api/v1/series`) and forgetting series (`DELETE /api/v1/series`):
//! both pick series with the same filters.
//!
//! Every series has an origin: `histd` for histd's own (named under `prefixStats`), `bench`
//! for what `histd bench` sends (`bench.*`), `user` for the rest. The web page folds the first
//! two away.

use std::collections::{BTreeMap, HashMap, HashSet};

use agg::MetricType;
use axum::http::StatusCode;
use store::{Kind, SeriesKey};

use super::failure::Failure;
use crate::admin::AdminState;
use crate::contract::{Origin, SeriesEntry, SeriesList, SeriesRequest};
use crate::query_params::BadParameter;

/// Entries listed when `limit` is not given.
pub const DEFAULT_SERIES_LIMIT: usize = 5_000;

/// The origin of a series named `name`: histd's own under `prefix_stats`, `histd bench`'s
/// under its prefix, else the user's.
pub fn origin_of(name: &str, prefix_stats: &str) -> Origin {
    let under = |prefix: &str| name.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('.'));
    if !prefix_stats.is_empty() && under(prefix_stats) {
        Origin::Histd
    } else if under(crate::bench::NAME_PREFIX) {
        Origin::Bench
    } else {
        Origin::User
    }
}

/// Which series a request picks.
#[derive(Debug)]
struct Filter {
    /// A glob on the name (`match`).
    pattern: Option<String>,
    /// Text the series, written `name{tags}`, contains, lower case (`contains`).
    contains: Option<String>,
    /// The origins picked (`origin`; all when absent).
    origins: Vec<Origin>,
    /// The type (`type`).
    kind: Option<Kind>,
    /// A selector (`name`), and whether the tags must be exactly its own (`exact`).
    selector: Option<(store::Selector, bool)>,
}

impl Filter {
    /// The filters of `request`, its selector parsed.
    fn of(request: &SeriesRequest) -> Result<Filter, Failure> {
        let selector = match &request.selector {
            None => None,
            Some(name) => {
                let selector =
                    store::parse_selector(name).map_err(|e| BadParameter { name: "name", message: e.to_string() })?;
                Some((selector, request.exact))
            }
        };
        Ok(Filter {
            pattern: request.pattern.clone(),
            contains: request.contains.as_ref().map(|t| t.to_lowercase()),
            origins: request.origins.clone().unwrap_or_else(|| Origin::ALL.to_vec()),
            kind: request.kind,
            selector,
        })
    }

    /// True when the request names some series (a forget must: it never means "all").
    fn names_something(&self) -> bool {
        let some_origins = self.origins.len() < Origin::ALL.len();
        self.pattern.is_some() || self.contains.is_some() || self.selector.is_some() || some_origins
    }

    /// True when `key` passes every filter but the origin.
    fn picks(&self, key: &SeriesKey) -> bool {
        let kind = self.kind.is_none_or(|kind| kind == key.kind);
        let selected = self.selector.as_ref().is_none_or(|(selector, exact)| {
            selector.matches(key) && (!exact || key.tag_list().count() == selector.tags.len())
        });
        let contains = self.contains.as_ref().is_none_or(|text| key.to_string().to_lowercase().contains(text.as_str()));
        kind && selected && contains
    }

    /// The series picked (every filter but the origin), each with its origin.
    fn series<'a>(&self, store: &'a store::Store, prefix_stats: &str) -> Result<Vec<(&'a SeriesKey, Origin)>, Failure> {
        let found = store.matching(self.pattern.as_deref()).map_err(|e| Failure::internal(&e.to_string()))?;
        Ok(found
            .into_iter()
            .filter(|(key, _)| self.picks(key))
            .map(|(key, _)| (key, origin_of(&key.name, prefix_stats)))
            .collect())
    }
}

/// The most entries a series list request asks for (`limit`, else the default).
pub fn limit_asked(query: &HashMap<String, String>, max_series: usize) -> Result<usize, Failure> {
    let request = SeriesRequest::from_query(query, max_series)?;
    Ok(request.limit.unwrap_or(DEFAULT_SERIES_LIMIT.min(max_series)))
}

/// `GET /api/v1/series`: the series picked, sorted, at most `limit`; with `group=name` one
/// entry per name and type, with how many tag sets it has. `origins` counts what each origin
/// has among the series picked before the origin filter.
pub fn list(
    request: &SeriesRequest,
    store: &store::Store,
    prefix_stats: &str,
    max_series: usize,
) -> Result<SeriesList, Failure> {
    let filter = Filter::of(request)?;
    let limit = request.limit.unwrap_or(DEFAULT_SERIES_LIMIT.min(max_series));
    let mut found = filter.series(store, prefix_stats)?;
    let mut origins: BTreeMap<String, u64> = Origin::ALL.iter().map(|o| (o.as_str().to_string(), 0)).collect();
    for (_, origin) in &found {
        *origins.entry(origin.as_str().to_string()).or_default() += 1;
    }
    found.retain(|(_, origin)| filter.origins.contains(origin));
    let (series, total) = if request.group_by_name { by_name(&found, limit) } else { each(&mut found, limit) };
    Ok(SeriesList { series, total: total as u64, truncated: total > limit, origins })
}

/// One entry a series, by key.
fn each(found: &mut [(&SeriesKey, Origin)], limit: usize) -> (Vec<SeriesEntry>, usize) {
    let total = found.len();
    if total > limit {
        found.select_nth_unstable_by(limit, |a, b| a.0.cmp(b.0));
    }
    let kept = &mut found[..total.min(limit)];
    kept.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let entries = kept
        .iter()
        .map(|(key, origin)| SeriesEntry::Series {
            name: key.name.to_string(),
            tags: key.tag_list().map(str::to_string).collect(),
            kind: key.kind.as_str().to_string(),
            origin: *origin,
        })
        .collect();
    (entries, total)
}

/// One entry a name and type, by name, with its count of tag sets.
fn by_name(found: &[(&SeriesKey, Origin)], limit: usize) -> (Vec<SeriesEntry>, usize) {
    let mut names: BTreeMap<(&str, &str), (usize, Origin)> = BTreeMap::new();
    for (key, origin) in found {
        names.entry((key.name.as_str(), key.kind.as_str())).or_insert((0, *origin)).0 += 1;
    }
    let total = names.len();
    let entries = names
        .into_iter()
        .take(limit)
        .map(|((name, kind), (tag_sets, origin))| SeriesEntry::Name {
            name: name.to_string(),
            kind: kind.to_string(),
            tag_sets: tag_sets as u64,
            origin,
        })
        .collect();
    (entries, total)
}

/// The series a forget picks (the same filters as the list, at least one of them given).
pub fn to_forget(
    query: &HashMap<String, String>,
    store: &store::Store,
    prefix_stats: &str,
) -> Result<Vec<SeriesKey>, Failure> {
    let filter = Filter::of(&SeriesRequest::filters_from_query(query)?)?;
    if !filter.names_something() {
        let message = "say which series to forget: `name`, `match`, `contains` or `origin` (`match=*` for all)";
        return Err(Failure::new(StatusCode::BAD_REQUEST, message));
    }
    let found = filter.series(store, prefix_stats)?;
    Ok(found.into_iter().filter(|(_, origin)| filter.origins.contains(origin)).map(|(key, _)| key.clone()).collect())
}

/// Deletes from the aggregator every key that is one of `keys` (whatever order its tags came
/// in), so that an idle series is not flushed again; returns how many.
pub fn forget_in_aggregator(admin: &AdminState, keys: &[SeriesKey]) -> usize {
    let wanted: HashSet<&SeriesKey> = keys.iter().collect();
    let mut gathered = admin.aggregation.current();
    let mut removed = 0;
    for (kind, metric_type) in [
        (Kind::Counter, MetricType::Counters),
        (Kind::Timer, MetricType::Timers),
        (Kind::Gauge, MetricType::Gauges),
        (Kind::Set, MetricType::Sets),
    ] {
        if !keys.iter().any(|key| key.kind == kind) {
            continue;
        }
        for key in gathered.keys(metric_type) {
            if wanted.contains(&SeriesKey::from_key(&key, kind)) && gathered.remove(metric_type, &key) {
                removed += 1;
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_by_name() {
        let cases = [
            ("statsd.numStats", "statsd", Origin::Histd),
            ("statsd", "statsd", Origin::User),
            ("statsdx.a", "statsd", Origin::User),
            ("ops.statsd.a", "ops.statsd", Origin::Histd),
            ("bench.17", "statsd", Origin::Bench),
            ("benchmark.a", "statsd", Origin::User),
            ("api.latency", "", Origin::User),
        ];
        for (name, prefix, want) in cases {
            assert_eq!(origin_of(name, prefix), want, "{name} under {prefix}");
        }
    }
}
