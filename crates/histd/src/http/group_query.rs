//! `GET /api/v1/query` asked of a global with peers (`global.peers`, global/peers.rs): answered
//! for the whole group. Each member gives the merged row of every step (`rows=1&local=1`), the
//! rows of a step merge exactly (counts and sums added, histograms bin for bin), and the
//! function is applied to the group's row: a group's p99 is the p99 of every sample, not a
//! combination of the members' p99s. A gauge's `value` and a set's `cardinality` do not merge
//! (whose gauge is newest, how many members two sets share, are not known): they are answered
//! by this global alone and marked partial.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::api::{answer, Context, Route, StoreAnswer};
use super::{Failure, HttpState};
use crate::contract::{finite, QueryRequest, QueryResult};
use crate::global::peers::{merge_answers, merge_step_rows, mergeable, Member, Peers, StepRows, WireRow};
use crate::query_params::BadParameter;

/// The query parameter that asks for the rows of the steps instead of the values.
pub const ROWS: &str = "rows";

/// `GET /api/v1/query`: an expression of the query language evaluated per step over a range.
pub async fn query(
    State(state): State<Arc<HttpState>>,
    Query(query): Query<HashMap<String, String>>,
    raw: RawQuery,
) -> Result<Response, Failure> {
    if query.contains_key(ROWS) {
        return step_rows(state, query).await;
    }
    match state.global.peers().filter(|_| !query.contains_key(crate::global::peers::LOCAL_ONLY)) {
        Some(peers) => group_query(state, query, raw, peers).await,
        None => super::api::store_route(Route::Query, state, query).await,
    }
}

/// The call an expression evaluates (inside `cumulative(...)`, if any).
fn call_of(expr: &store::Expr) -> (store::Function, &store::Selector, f64) {
    match expr {
        store::Expr::Cumulative(inner) => call_of(inner),
        store::Expr::Call(function, selector, number) => (*function, selector, *number),
    }
}

/// `rows=1`: the merged row of each step of the expression's call, for a peer.
pub async fn step_rows(state: Arc<HttpState>, query: HashMap<String, String>) -> Result<Response, Failure> {
    let context = Context::of(&state);
    let rows = super::api::with_store(state, move |store| {
        let request = QueryRequest::from_query(&query, context.now, context.limits.max_steps)?;
        let expr = parse(&request.expr)?;
        store.check_types(&expr).map_err(|e| bad_expr(&e))?;
        let (function, selector, _) = call_of(&expr);
        let rows = store
            .step_rows(function, selector, request.from, request.to, request.step)
            .map_err(super::api::internal)?;
        Ok(StepRows { steps: rows.into_iter().map(|(t, row)| (t, row.as_ref().map(WireRow::of))).collect() })
    })
    .await?;
    Ok(Json(rows).into_response())
}

/// The query answered for the group: the members' rows merged, the function applied.
pub async fn group_query(
    state: Arc<HttpState>,
    query: HashMap<String, String>,
    RawQuery(raw): RawQuery,
    peers: Arc<Peers>,
) -> Result<Response, Failure> {
    let context = Context::of(&state);
    let request = QueryRequest::from_query(&query, context.now, context.limits.max_steps)?;
    let expr = parse(&request.expr)?;
    if !mergeable(&expr) {
        let local = super::api::with_store(state, move |store| answer(Route::Query, &query, store, &context)).await?;
        let StoreAnswer::Query(mut local) = local else { unreachable!("a query's answer") };
        let members = vec![
            Member { url: "self".into(), answered: true, error: None },
            Member {
                url: "peers".into(),
                answered: false,
                error: Some("a gauge's value and a set's cardinality are answered by this global alone".into()),
            },
        ];
        with_members(&mut local, members);
        return Ok(Json(local).into_response());
    }
    let (function, _, number) = call_of(&expr);
    let cumulative = matches!(expr, store::Expr::Cumulative(_));
    let QueryRequest { expr: text, from, to, step } = request;
    let mut rows = super::api::with_store(state, move |store| {
        store.check_types(&expr).map_err(|e| bad_expr(&e))?;
        let (function, selector, _) = call_of(&expr);
        let rows = store.step_rows(function, selector, from, to, step).map_err(super::api::internal)?;
        Ok(StepRows { steps: rows.into_iter().map(|(t, row)| (t, row.as_ref().map(WireRow::of))).collect() })
    })
    .await?;
    let answers = peers.ask("/api/v1/query", &format!("{}&{ROWS}=1", raw.unwrap_or_default())).await;
    let members = merge_answers(&mut rows, answers, merge_step_rows);
    let mut total = 0.0;
    let mut points = Vec::with_capacity(rows.steps.len());
    for (t, row) in &rows.steps {
        let Some(mut value) = row.as_ref().and_then(|row| function.evaluate(&row.row(*t), number)) else { continue };
        if cumulative {
            total += value;
            value = total;
        }
        points.push((*t, finite(value)));
    }
    let mut result = QueryResult { expr: text, step, from, to, points, ..QueryResult::default() };
    with_members(&mut result, members);
    Ok(Json(result).into_response())
}

/// `answer` with `partial` and `members` filled.
fn with_members(answer: &mut QueryResult, members: Vec<Member>) {
    answer.partial = Some(members.iter().any(|member| !member.answered));
    answer.members = Some(members);
}

fn parse(text: &str) -> Result<store::Expr, Failure> {
    store::parse(text).map_err(|e| bad_expr(&e))
}

fn bad_expr(error: &dyn std::fmt::Display) -> Failure {
    BadParameter { name: "expr", message: error.to_string() }.into()
}
