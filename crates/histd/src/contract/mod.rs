//! The typed HTTP contract of `/api/v1/*`: the parameters histd's own clients send and the
//! answers every route gives, in one place. The handlers build these answers and read these
//! requests; `histd top` and `histd query` write the requests and read the answers; and a
//! test holds `openapi.json` (served at `/api/v1/openapi.json`) to them: every property both
//! ways, its JSON type, and every route's parameters.
//!
//! Numbers a JSON answer cannot carry (NaN, infinities) are written `null`: fields that may
//! hold one are `Option<f64>`, filled with [`finite`].

mod live;
mod state;
mod stored;

#[cfg(test)]
mod openapi;

pub use live::{
    ActiveAlert, BadLineExample, Cardinality, Interval, KafkaStanding, Live, LiveRequest, NameRow, Other,
    PartitionStanding, Prefix, SeriesCount, SeriesRow, SortBy, Totals,
};
pub use state::{AlertRule, Alerts, Budgets, Merged, Offender};
pub use stored::{
    Forgotten, HeatmapRequest, HeatmapResult, HeatmapStep, HistogramRequest, HistogramResult, Origin, QueryRequest,
    QueryResult, SeriesEntry, SeriesList, SeriesRequest,
};

use serde::{Deserialize, Serialize};

/// The API description, compiled in.
pub const OPENAPI: &str = include_str!("openapi.json");

/// A histogram bin: `[lower, upper, count]`, as every answer writes it.
pub type Bin = (f64, f64, u64);

/// A point of a query: `[unix seconds, value]` (`null` where the step has no value).
pub type Point = (i64, Option<f64>);

/// One member of a group of globals, as an answer asked of one of them names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Its query URL (`self` for the global answering).
    pub url: String,
    /// It answered in time.
    pub answered: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a reload changed (`POST /-/reload`'s answer, `histd`'s SIGHUP log).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadOutcome {
    /// Keys whose new values are in force.
    pub applied: Vec<String>,
    /// Keys that changed in the file but take a restart (the management and HTTP ports,
    /// `flushInterval`, `prefixStats`, reader settings, ...).
    pub needs_restart: Vec<String>,
    /// What was opened, closed, started, restarted or stopped (`opened udp 127.0.0.1:8125`,
    /// `restarted graphite`).
    pub changes: Vec<String>,
}

/// Every answer that is not a success: `{"error": …}` naming what went wrong.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorAnswer {
    /// What went wrong (a bad parameter is named).
    pub error: String,
}

/// `value` when JSON can carry it (finite), else `None` (written `null`).
pub fn finite(value: f64) -> Option<f64> {
    value.is_finite().then_some(value)
}

/// `path?name=value&…`, each value percent-encoded; `None` values are left out.
fn path_with<'a>(path: &str, parameters: impl IntoIterator<Item = (&'a str, Option<String>)>) -> String {
    let mut out = path.to_string();
    for (name, value) in parameters {
        let Some(value) = value else { continue };
        out.push(if out.contains('?') { '&' } else { '?' });
        out.push_str(name);
        out.push('=');
        out.push_str(&crate::http_client::percent_encode(&value));
    }
    out
}
