//! `histd query`: an expression from the shell, against a running histd (its HTTP API) or
//! directly against a data directory, printed as a table, CSV or JSON.

use std::path::PathBuf;

use anyhow::Context;

use crate::api_client::{printable, refusal, ApiArgs, Endpoint, ANSWERS, UNREACHABLE_HINT};
use crate::clock::unix_now_s;
use crate::contract::{finite, ErrorAnswer, QueryRequest, QueryResult, SeriesList, SeriesRequest};
use crate::query_params::{step, time};

/// The arguments of `histd query`.
#[derive(Debug, clap::Args)]
pub struct QueryArgs {
    /// The expression, e.g. `quantile(api.latency{route=/login}, 0.99)`.
    expr: String,
    /// Start: unix seconds, `now`, `-1h`, `now-15m` (`--from -5m` and `--from=-5m` both work).
    #[arg(long, default_value = "-1h", allow_hyphen_values = true)]
    from: String,
    /// End.
    #[arg(long, default_value = "now", allow_hyphen_values = true)]
    to: String,
    /// Step width (`10s`, `1m`, `1h`); default: about 240 steps.
    #[arg(long)]
    step: Option<String>,
    #[command(flatten)]
    api: ApiArgs,
    /// Read this data directory instead of asking a running histd.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// How to print the points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns with UTC times.
    Table,
    /// `unix_s,value` lines under a header.
    Csv,
    /// The API's JSON.
    Json,
}

/// Why a query failed, which decides the exit code (histd's rule: 1 for a failure at run
/// time, 2 for bad input).
#[derive(Debug)]
pub enum QueryFailure {
    /// The expression or a parameter is wrong (exit 2).
    BadInput(anyhow::Error),
    /// The daemon or the data directory could not answer (exit 1).
    Unavailable(anyhow::Error),
}

impl QueryFailure {
    /// The process exit code for it.
    pub fn exit_code(&self) -> u8 {
        match self {
            QueryFailure::BadInput(_) => 2,
            QueryFailure::Unavailable(_) => 1,
        }
    }
}

impl std::fmt::Display for QueryFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryFailure::BadInput(error) | QueryFailure::Unavailable(error) => write!(f, "{error:#}"),
        }
    }
}

/// Runs the query and prints it.
pub fn run(args: &QueryArgs) -> Result<(), QueryFailure> {
    let now = unix_now_s() as i64;
    let bad = |error: crate::query_params::BadParameter| QueryFailure::BadInput(anyhow::Error::msg(error.to_string()));
    let from = time("from", Some(&args.from), "-1h", now).map_err(bad)?;
    let to = time("to", Some(&args.to), "now", now).map_err(bad)?;
    let step = step(args.step.as_deref(), from, to).map_err(bad)?;
    store::parse(&args.expr).map_err(|e| QueryFailure::BadInput(anyhow::anyhow!("expression: {e}")))?;
    let request = QueryRequest { expr: args.expr.clone(), from, to, step };
    let endpoint = match &args.data_dir {
        Some(_) => None,
        None => Some(args.api.endpoint().map_err(|why| QueryFailure::BadInput(anyhow::anyhow!(why)))?),
    };
    let answer = match (&args.data_dir, &endpoint) {
        (Some(dir), _) => from_data_dir(dir, request)?,
        (None, Some(endpoint)) => from_http(endpoint, &request)?,
        (None, None) => unreachable!("an endpoint without a data directory"),
    };
    // "No such series" only from a whole answer: a group's partial one may lack it because the
    // member holding it did not answer.
    if answer.points.is_empty() && answer.partial != Some(true) {
        let selector =
            selector_of(&store::parse(&args.expr).map_err(|e| QueryFailure::BadInput(anyhow::anyhow!("{e}")))?);
        let exists = match (&args.data_dir, &endpoint) {
            (Some(dir), _) => series_exist_in(dir, &selector)?,
            (None, Some(endpoint)) => series_exist_at(endpoint, &selector)?,
            (None, None) => unreachable!("an endpoint without a data directory"),
        };
        if !exists {
            let listing = endpoint.as_ref().map_or_else(
                || "histd query --data-dir DIR 'count(...)' for a name you know".to_string(),
                |endpoint| format!("`curl '{endpoint}/api/v1/series?contains=...'` lists what there is"),
            );
            return Err(QueryFailure::BadInput(anyhow::anyhow!(
                "no series named '{selector}' (check its spelling and tags: {listing})"
            )));
        }
    }
    if let Some(warning) = partial_warning(&answer) {
        eprint!("{warning}");
    }
    crate::api_client::write_stdout(&render(&answer, args.format))
        .map_err(|error| QueryFailure::Unavailable(anyhow::anyhow!("cannot write the answer: {error}")))
}

/// What standard error says of an answer a group of globals gave in part: each member that did
/// not answer, and why (the values printed hold the others' series only).
fn partial_warning(answer: &QueryResult) -> Option<String> {
    if answer.partial != Some(true) {
        return None;
    }
    let mut warning = "histd query: a partial answer (the group's members below are not in it)\n".to_string();
    for member in answer.members.iter().flatten().filter(|member| !member.answered) {
        let why = member.error.as_deref().unwrap_or("no answer");
        warning.push_str(&format!("  {}: {}\n", member.url, printable(why)));
    }
    Some(warning)
}

/// The selector an expression reads.
fn selector_of(expr: &store::Expr) -> store::Selector {
    match expr {
        store::Expr::Call(_, selector, _) => selector.clone(),
        store::Expr::Cumulative(inner) => selector_of(inner),
    }
}

/// Whether a data directory's store has a series `selector` picks.
fn series_exist_in(dir: &std::path::Path, selector: &store::Selector) -> Result<bool, QueryFailure> {
    let path = store::data_dir::database(dir);
    let store = store::Store::open_reader(&path).map_err(|e| QueryFailure::Unavailable(e.into()))?;
    Ok(!store.select(selector).is_empty())
}

/// Whether a running histd's store has a series `selector` picks.
fn series_exist_at(endpoint: &Endpoint, selector: &store::Selector) -> Result<bool, QueryFailure> {
    let request = SeriesRequest { selector: Some(selector.to_string()), limit: Some(1), ..SeriesRequest::default() };
    let (_, body) = endpoint.get(&request.path_and_query(), ANSWERS).map_err(QueryFailure::Unavailable)?;
    // An answer that does not read as a list says nothing: the series may exist.
    Ok(serde_json::from_str::<SeriesList>(&body).map_or(true, |list| list.total > 0))
}

fn from_data_dir(dir: &std::path::Path, request: QueryRequest) -> Result<QueryResult, QueryFailure> {
    let QueryRequest { expr: expr_text, from, to, step } = request;
    let expr = store::parse(&expr_text).map_err(|e| QueryFailure::BadInput(anyhow::anyhow!("expression: {e}")))?;
    let path = store::data_dir::database(dir);
    if !path.exists() {
        return Err(QueryFailure::BadInput(anyhow::anyhow!("no store at {} (--data-dir)", path.display())));
    }
    let unavailable = |error: store::StoreError| QueryFailure::Unavailable(error.into());
    let store = store::Store::open_reader(&path).map_err(unavailable)?;
    store.check_types(&expr).map_err(|e| QueryFailure::BadInput(anyhow::anyhow!("expression: {e}")))?;
    let points = store.query(&expr, from, to, step).map_err(unavailable)?;
    let rows = store.take_damaged_rows();
    if !rows.is_empty() {
        let rows = rows.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
        eprintln!(
            "histd query: warning: {rows} do not match their checksums: a series row's points are left out, a group row's series answered from raw rows (the daemon salvages the file when it checks it; offline, histd scrub finds it)"
        );
    }
    let mut damaged = store.take_damaged();
    damaged.sort_by_key(|block| (block.grp, block.start));
    damaged.dedup();
    for block in damaged {
        eprintln!(
            "histd query: warning: the {:?} block of group {} at {} is damaged ({}): its rows are left out",
            block.resolution, block.grp, block.start, block.reason
        );
    }
    let points = points.into_iter().map(|(t, v)| (t, finite(v))).collect();
    Ok(QueryResult { expr: expr_text, step, from, to, points, ..QueryResult::default() })
}

fn from_http(api: &Endpoint, request: &QueryRequest) -> Result<QueryResult, QueryFailure> {
    let (status, body) = api
        .get(&request.path_and_query(), ANSWERS)
        .with_context(|| format!("cannot reach histd at {api} ({UNREACHABLE_HINT}; --data-dir to read files)"))
        .map_err(QueryFailure::Unavailable)?;
    if status == 200 {
        return serde_json::from_str(&body)
            .with_context(|| format!("not the answer of a query from {api}: {}", printable(&body)))
            .map_err(QueryFailure::Unavailable);
    }
    let said = serde_json::from_str::<ErrorAnswer>(&body).map_or(body.clone(), |answer| answer.error);
    if let Some(refused) = refusal(status, &said) {
        // Not the query's fault: the tool needs a credential, as health and top say (exit 1).
        return Err(QueryFailure::Unavailable(anyhow::anyhow!("{api} answered {refused}")));
    }
    let message = anyhow::anyhow!("{}", printable(&said));
    match status {
        400..=499 => Err(QueryFailure::BadInput(message)),
        _ => Err(QueryFailure::Unavailable(message)),
    }
}

fn render(answer: &QueryResult, format: Format) -> String {
    let pairs = answer.points.iter().filter_map(|&(t, v)| Some((t, v?)));
    match format {
        Format::Json => format!("{}\n", serde_json::to_string(answer).unwrap_or_default()),
        Format::Csv => {
            std::iter::once("time,value\n".to_string()).chain(pairs.map(|(t, v)| format!("{t},{v}\n"))).collect()
        }
        Format::Table => {
            let mut out = format!("{:<22}{}\n", "time (UTC)", answer.expr);
            for (t, v) in pairs {
                out.push_str(&format!("{:<22}{}\n", crate::timefmt::utc_rfc3339(t as u64), readable(v)));
            }
            out
        }
    }
}

/// Significant digits a table shows (CSV and JSON keep every digit).
const TABLE_DIGITS: i32 = 6;

/// A value as a person reads it in a table: whole numbers whole, others to six significant
/// digits (more when the integer part needs them), trailing zeros dropped: `0.333333`, `148.5`,
/// `1234568`, `0.0000123457`.
fn readable(value: f64) -> String {
    if !value.is_finite() || (value == value.trunc() && value.abs() < 1e15) {
        return format!("{value}");
    }
    let magnitude = value.abs().log10().floor() as i32 + 1;
    let decimals = (TABLE_DIGITS - magnitude).clamp(0, 17) as usize;
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_format() {
        let answer = QueryResult {
            expr: "count(x)".into(),
            points: vec![(0, Some(1.5)), (30, None), (60, Some(2.0))],
            ..QueryResult::default()
        };
        assert_eq!(render(&answer, Format::Csv), "time,value\n0,1.5\n60,2\n");
        assert_eq!(
            render(&answer, Format::Table),
            "time (UTC)            count(x)\n1970-01-01T00:00:00Z  1.5\n1970-01-01T00:01:00Z  2\n"
        );
        assert!(render(&answer, Format::Json).starts_with('{'));
        assert_eq!(partial_warning(&answer), None);
        let member = |url: &str, error: Option<&str>| crate::contract::Member {
            url: url.into(),
            answered: error.is_none(),
            error: error.map(String::from),
        };
        let members = Some(vec![member("self", None), member("https://g2:8443", Some("connection refused"))]);
        let partial = QueryResult { partial: Some(true), members, ..answer.clone() };
        assert_eq!(
            partial_warning(&partial).as_deref(),
            Some("histd query: a partial answer (the group's members below are not in it)\n  https://g2:8443: connection refused\n")
        );
        for (value, want) in [
            (1.0 / 3.0, "0.333333"),
            (148.5, "148.5"),
            (1_234_567.891, "1234568"),
            (0.000_012_345_678, "0.0000123457"),
            (0.1 + 0.2, "0.3"),
            (-2.5, "-2.5"),
            (42.0, "42"),
            (99.999_999_9, "100"),
            (1e20, "100000000000000000000"),
        ] {
            assert_eq!(readable(value), want, "{value}");
        }
        assert_eq!(
            crate::http_client::percent_encode("quantile(a{r=/x}, 0.9)"),
            "quantile%28a%7Br%3D%2Fx%7D%2C%200.9%29"
        );
    }
}
