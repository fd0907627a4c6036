//! The daemon's own state as the API answers it: `GET /api/v1/alerts` (the rules),
//! `GET /api/v1/budgets` (the cardinality budgets, also in `/health`) and
//! `POST /api/v1/forward` (a batch merged).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `GET /api/v1/alerts`: every rule and how many fire.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Alerts {
    /// The rules, in the config's order.
    pub alerts: Vec<AlertRule>,
    /// Rules firing now.
    pub firing: u64,
}

/// One alert rule and its state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AlertRule {
    /// Its name (the Alertmanager `alertname`).
    pub name: String,
    /// Its expression, in the query language.
    pub expr: String,
    /// The window, seconds.
    pub over_s: u64,
    /// How long a breach lasts before it fires, seconds.
    pub for_s: u64,
    /// `above` or `below`.
    pub comparison: String,
    /// The threshold.
    pub threshold: f64,
    /// `inactive`, `pending` or `firing`.
    pub state: String,
    /// The value at the last evaluation (`null`: no data in the window).
    pub value: Option<f64>,
    /// Unix seconds the pending or firing state began.
    pub since: Option<u64>,
    /// Unix seconds it began firing.
    pub firing_since: Option<u64>,
    /// When it last stopped firing.
    pub resolved_at: Option<u64>,
    /// When it was last evaluated.
    pub evaluated_at: Option<u64>,
    /// Its summary, filled in.
    pub summary: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its series and threshold on the web page.
    pub url: String,
}

/// `GET /api/v1/budgets`: the cardinality budgets, what they hold, the folds and the names
/// bringing new series fastest. Figures per type are keyed `counters`, `timers`, `gauges`,
/// `sets`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budgets {
    /// Series held per type, overflow series aside.
    pub series: BTreeMap<String, u64>,
    /// `maxSeries` per type.
    pub max_series: BTreeMap<String, u64>,
    /// `maxSeriesPerName`.
    pub max_series_per_name: u64,
    /// `maxTagValues`.
    pub max_tag_values: u64,
    /// `maxSetMembers`.
    pub max_set_members: u64,
    /// Names at `maxSeriesPerName`, per type.
    pub names_at_series_per_name: BTreeMap<String, u64>,
    /// New series folded into an overflow series since start, by reason.
    pub folded_series: BTreeMap<String, u64>,
    /// Set intervals counted by a sketch past `maxSetMembers`.
    pub sets_sketched: u64,
    /// Series deleted since start after their `idleTTL`, per type.
    pub idle_expired: BTreeMap<String, u64>,
    /// The name patterns bringing new series fastest.
    pub offenders: Vec<Offender>,
}

/// A name pattern bringing new series (parts holding digits written `*`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Offender {
    /// The pattern.
    pub pattern: String,
    /// New series a second, lately.
    pub new_series_per_second: f64,
    /// New series since start.
    pub new_series: u64,
    /// Of them, folded by a budget.
    pub folded: u64,
}

/// `POST /api/v1/forward`: the batch merged, or a copy of one merged before.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Merged {
    /// Series merged (0 for a copy).
    pub merged: u64,
    /// A copy of a batch merged before: nothing merged again.
    pub duplicate: bool,
}
