//! The routes that read the store: `GET /api/v1/series` (and `DELETE`, which picks series with
//! the same filters), `/api/v1/query`, `/api/v1/histogram` and `/api/v1/heatmap`: what each
//! asks (parameters read and checked, errors naming the parameter) and what each answers.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::{path_with, Bin, Point};
use crate::query_params::{self as params, BadParameter, MAX_PATTERN_BYTES};

/// Where a series comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// Sent by the user's clients.
    User,
    /// histd's own statistics (named under `prefixStats`).
    Histd,
    /// Sent by `histd bench`.
    Bench,
}

impl Origin {
    /// Every origin.
    pub const ALL: [Origin; 3] = [Origin::User, Origin::Histd, Origin::Bench];

    /// As the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::User => "user",
            Origin::Histd => "histd",
            Origin::Bench => "bench",
        }
    }

    fn named(name: &str) -> Result<Origin, BadParameter> {
        Origin::ALL.into_iter().find(|origin| origin.as_str() == name.trim()).ok_or_else(|| BadParameter {
            name: "origin",
            message: format!("'{name}' is not an origin: user, histd or bench (comma separated)"),
        })
    }
}

/// Which series a `/api/v1/series` request picks (a `DELETE` reads the same filters but not
/// `group` and `limit`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeriesRequest {
    /// A glob on the name (`match`).
    pub pattern: Option<String>,
    /// Text the series, written `name{tags}`, contains (`contains`, any case).
    pub contains: Option<String>,
    /// A selector: the name and tags each series carries (`name`).
    pub selector: Option<String>,
    /// With `selector`: the tags must be exactly its own (`exact`).
    pub exact: bool,
    /// Only series of this type (`type`).
    pub kind: Option<store::Kind>,
    /// The origins kept (`origin`, comma separated; all when absent).
    pub origins: Option<Vec<Origin>>,
    /// One entry per name and type (`group=name`).
    pub group_by_name: bool,
    /// The most entries listed (`limit`).
    pub limit: Option<usize>,
}

impl SeriesRequest {
    /// The route.
    pub const PATH: &'static str = "/api/v1/series";
    /// The parameters of a listing, as `openapi.json` lists them.
    pub const PARAMETERS: [&'static str; 8] =
        ["match", "contains", "name", "exact", "type", "origin", "group", "limit"];
    /// The parameters of a `DELETE` (the filters).
    pub const FORGET_PARAMETERS: [&'static str; 6] = ["match", "contains", "name", "exact", "type", "origin"];

    /// The listing its parameters spell (`limit` at most `max_series`); a bad one is named.
    pub fn from_query(query: &HashMap<String, String>, max_series: usize) -> Result<SeriesRequest, BadParameter> {
        let group_by_name = match query.get("group").map(String::as_str) {
            None | Some("") => false,
            Some("name") => true,
            Some(other) => {
                let message = format!("'{other}' cannot group series: only `name` can");
                return Err(BadParameter { name: "group", message });
            }
        };
        let limit = match query.get("limit") {
            None => None,
            Some(text) => Some(params::count("limit", Some(text), max_series, max_series)?),
        };
        Ok(SeriesRequest { group_by_name, limit, ..Self::filters_from_query(query)? })
    }

    /// The filters its parameters spell (what a `DELETE` reads); a bad one is named.
    pub fn filters_from_query(query: &HashMap<String, String>) -> Result<SeriesRequest, BadParameter> {
        let text = |name: &'static str| -> Result<Option<String>, BadParameter> {
            match query.get(name) {
                Some(value) if value.len() > MAX_PATTERN_BYTES => Err(BadParameter {
                    name,
                    message: format!("at most {MAX_PATTERN_BYTES} bytes, got {}", value.len()),
                }),
                Some(value) if !value.is_empty() => Ok(Some(value.clone())),
                _ => Ok(None),
            }
        };
        let present = |name: &str| query.get(name).map(String::as_str).filter(|v| !v.is_empty());
        let origins = match present("origin") {
            None => None,
            Some(list) => Some(list.split(',').map(Origin::named).collect::<Result<_, _>>()?),
        };
        let kind = match present("type") {
            None => None,
            Some(name) => Some(store::Kind::parse(name).ok_or_else(|| BadParameter {
                name: "type",
                message: format!("'{name}' is not a type: counter, gauge, set or timer"),
            })?),
        };
        Ok(SeriesRequest {
            pattern: text("match")?,
            contains: text("contains")?,
            selector: text("name")?,
            exact: params::flag("exact", query.get("exact").map(String::as_str))?,
            kind,
            origins,
            group_by_name: false,
            limit: None,
        })
    }

    /// The path and query that ask for it.
    pub fn path_and_query(&self) -> String {
        let origins = self.origins.as_ref().map(|list| list.iter().map(|o| o.as_str()).collect::<Vec<_>>().join(","));
        path_with(
            Self::PATH,
            [
                ("match", self.pattern.clone()),
                ("contains", self.contains.clone()),
                ("name", self.selector.clone()),
                ("exact", self.exact.then(|| "1".to_string())),
                ("type", self.kind.map(|kind| kind.as_str().to_string())),
                ("origin", origins),
                ("group", self.group_by_name.then(|| "name".to_string())),
                ("limit", self.limit.map(|n| n.to_string())),
            ],
        )
    }
}

/// `GET /api/v1/series`: the series picked, at most `limit`, by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SeriesList {
    /// The entries.
    pub series: Vec<SeriesEntry>,
    /// How many entries matched.
    pub total: u64,
    /// More matched than `limit`: the first `limit` by name are listed.
    pub truncated: bool,
    /// Series picked per origin, before the origin filter.
    pub origins: BTreeMap<String, u64>,
}

/// One entry of a series list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SeriesEntry {
    /// One series.
    Series {
        /// Its name.
        name: String,
        /// Its tags, `key=value`.
        tags: Vec<String>,
        /// `counter`, `gauge`, `set` or `timer`.
        #[serde(rename = "type")]
        kind: String,
        /// Where it comes from.
        origin: Origin,
    },
    /// One name and type (`group=name`).
    Name {
        /// The name.
        name: String,
        /// `counter`, `gauge`, `set` or `timer`.
        #[serde(rename = "type")]
        kind: String,
        /// How many series (tag sets) it has.
        tag_sets: u64,
        /// Where it comes from.
        origin: Origin,
    },
}

/// `DELETE /api/v1/series`: what was forgotten.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Forgotten {
    /// Series deleted from the store.
    pub forgotten: u64,
    /// Their stored points, every resolution.
    pub points: u64,
    /// Keys deleted from the current interval.
    pub aggregator_keys: u64,
    /// The first 100 series forgotten, written `name{tags}`.
    pub series: Vec<String>,
    /// More than 100 were forgotten.
    pub series_truncated: bool,
}

/// A `from`/`to` pair and a step, read and checked: `from` (default `-1h`) before `to`
/// (default `now`), at most `max_steps` steps.
fn window(query: &HashMap<String, String>, now: i64, max_steps: usize) -> Result<(i64, i64, i64), BadParameter> {
    let (from, to) = span(query, now)?;
    let step = params::step(query.get("step").map(String::as_str), from, to)?;
    params::range(from, to, step, max_steps)?;
    Ok((from, to, step))
}

/// `from` (default `-1h`) and `to` (default `now`).
fn span(query: &HashMap<String, String>, now: i64) -> Result<(i64, i64), BadParameter> {
    let from = params::time("from", query.get("from").map(String::as_str), "-1h", now)?;
    let to = params::time("to", query.get("to").map(String::as_str), "now", now)?;
    Ok((from, to))
}

/// A parameter that must be given and not blank.
fn required(query: &HashMap<String, String>, name: &'static str) -> Result<String, BadParameter> {
    query
        .get(name)
        .filter(|v| !v.trim().is_empty())
        .cloned()
        .ok_or_else(|| BadParameter { name, message: "is required".to_string() })
}

/// The `name` parameter and the selector it spells.
fn selector(query: &HashMap<String, String>) -> Result<(String, store::Selector), BadParameter> {
    let name = required(query, "name")?;
    let selector = store::parse_selector(&name).map_err(|e| BadParameter { name: "name", message: e.to_string() })?;
    Ok((name, selector))
}

/// `GET /api/v1/query`: an expression evaluated per step over a range.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryRequest {
    /// The expression, in the query language (`expr`).
    pub expr: String,
    /// Start, unix seconds (`from`).
    pub from: i64,
    /// End, unix seconds (`to`).
    pub to: i64,
    /// Step width, seconds (`step`).
    pub step: i64,
}

impl QueryRequest {
    /// The route.
    pub const PATH: &'static str = "/api/v1/query";
    /// Its parameters, as `openapi.json` lists them.
    pub const PARAMETERS: [&'static str; 4] = ["expr", "from", "to", "step"];

    /// The request its parameters spell (times relative to `now`, at most `max_steps` steps);
    /// a bad one is named. The expression is parsed by whoever evaluates it.
    pub fn from_query(
        query: &HashMap<String, String>,
        now: i64,
        max_steps: usize,
    ) -> Result<QueryRequest, BadParameter> {
        let expr = required(query, "expr")?;
        let (from, to, step) = window(query, now, max_steps)?;
        Ok(QueryRequest { expr, from, to, step })
    }

    /// The path and query that ask for it.
    pub fn path_and_query(&self) -> String {
        path_with(
            Self::PATH,
            [
                ("expr", Some(self.expr.clone())),
                ("from", Some(self.from.to_string())),
                ("to", Some(self.to.to_string())),
                ("step", Some(self.step.to_string())),
            ],
        )
    }
}

/// `GET /api/v1/query`'s answer: the points.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueryResult {
    /// The expression asked.
    pub expr: String,
    /// The step, seconds.
    pub step: i64,
    /// Start, unix seconds.
    pub from: i64,
    /// End, unix seconds.
    pub to: i64,
    /// `[unix seconds, value]` per step with a value.
    pub points: Vec<Point>,
    /// Asked of a global with `global.peers`: a member did not answer, or the function is this
    /// global's alone (`null` otherwise).
    #[serde(default)]
    pub partial: Option<bool>,
    /// Asked of a global with `global.peers`: each member and whether it answered.
    #[serde(default)]
    pub members: Option<Vec<super::Member>>,
}

/// `GET /api/v1/histogram`: a timer's histogram merged over a range.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramRequest {
    /// The selector as given (`name`).
    pub name: String,
    /// What it selects.
    pub selector: store::Selector,
    /// Start, unix seconds (`from`).
    pub from: i64,
    /// End, unix seconds (`to`).
    pub to: i64,
}

impl HistogramRequest {
    /// Its parameters, as `openapi.json` lists them.
    pub const PARAMETERS: [&'static str; 3] = ["name", "from", "to"];

    /// The request its parameters spell; a bad one is named.
    pub fn from_query(query: &HashMap<String, String>, now: i64) -> Result<HistogramRequest, BadParameter> {
        let (name, selector) = selector(query)?;
        let (from, to) = span(query, now)?;
        params::range(from, to, (to - from).max(1), 1)?; // one merge over the whole range: one step
        Ok(HistogramRequest { name, selector, from, to })
    }
}

/// `GET /api/v1/histogram`'s answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistogramResult {
    /// The selector asked.
    pub name: String,
    /// Start, unix seconds.
    pub from: i64,
    /// End, unix seconds.
    pub to: i64,
    /// Samples.
    pub count: f64,
    /// Their sum (`null`: none).
    pub sum: Option<f64>,
    /// The smallest (`null`: none).
    pub min: Option<f64>,
    /// The largest (`null`: none).
    pub max: Option<f64>,
    /// The merged histogram's bins.
    pub bins: Vec<Bin>,
    /// The merged histogram, circllhist binary form in padded base64.
    pub circllhist: String,
}

/// `GET /api/v1/heatmap`: a timer's histogram per step over a range.
#[derive(Debug, Clone, PartialEq)]
pub struct HeatmapRequest {
    /// The selector as given (`name`).
    pub name: String,
    /// What it selects.
    pub selector: store::Selector,
    /// Start, unix seconds (`from`).
    pub from: i64,
    /// End, unix seconds (`to`).
    pub to: i64,
    /// Step width, seconds (`step`).
    pub step: i64,
}

impl HeatmapRequest {
    /// Its parameters, as `openapi.json` lists them.
    pub const PARAMETERS: [&'static str; 4] = ["name", "from", "to", "step"];

    /// The request its parameters spell (at most `max_steps` steps); a bad one is named.
    pub fn from_query(
        query: &HashMap<String, String>,
        now: i64,
        max_steps: usize,
    ) -> Result<HeatmapRequest, BadParameter> {
        let (name, selector) = selector(query)?;
        let (from, to, step) = window(query, now, max_steps)?;
        Ok(HeatmapRequest { name, selector, from, to, step })
    }
}

/// `GET /api/v1/heatmap`'s answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HeatmapResult {
    /// The selector asked.
    pub name: String,
    /// Start, unix seconds.
    pub from: i64,
    /// End, unix seconds.
    pub to: i64,
    /// The step, seconds.
    pub step: i64,
    /// The steps holding samples.
    pub steps: Vec<HeatmapStep>,
}

/// One step of a heatmap.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HeatmapStep {
    /// Its start, unix seconds.
    pub t: i64,
    /// Its histogram's bins.
    pub bins: Vec<Bin>,
}
