//! `GET /api/v1/live`'s handler: this daemon's interval so far (live.rs), or, asked of a global
//! with peers (`global.peers`), the group's interval so far, so `histd top` pointed at any
//! global shows the whole fleet. Every member is asked (`local=1`) for its own answer with the
//! same parameters; the answers merge as global/live_merge.rs says; the group's busiest rows
//! are picked from the union, and each member that cut its list is asked again (`keys`) for
//! the rows of those it left out, so every row shown is the sum of every member's. The answer
//! carries `partial` and `members`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::failure::Failure;
use super::live::{answer, asked, Asked};
use super::HttpState;
use crate::contract::{Live, LiveRequest, Member, SeriesRow};
use crate::global::live_merge::{left_out, merge_live, merge_rows, order_and_cut};
use crate::global::peers::Peers;

/// `GET /api/v1/live`: the interval so far, for `histd top` (rows sorted and filtered, and on
/// request the cardinality and prefix tables); asked of a global with `global.peers`, the
/// group's.
pub async fn live(
    State(state): State<Arc<HttpState>>,
    Query(query): Query<HashMap<String, String>>,
    RawQuery(raw): RawQuery,
) -> Result<Response, Failure> {
    let request = LiveRequest::from_query(&query)?;
    let asked = asked(&request)?;
    if let Some(peers) = state.global.peers().filter(|_| !query.contains_key(crate::global::peers::LOCAL_ONLY)) {
        return group_live(state, (request, asked), raw.unwrap_or_default(), peers).await;
    }
    let answered = tokio::task::spawn_blocking(move || super::api::json_bytes(&answer(&state, &asked))).await;
    let bytes = answered.map_err(|_| Failure::internal("building the live view failed"))?;
    super::api::give_back_after(bytes.len());
    Ok(([(axum::http::header::CONTENT_TYPE, "application/json")], bytes).into_response())
}

/// The group's live view (see the module).
async fn group_live(
    state: Arc<HttpState>,
    (request, asked): (LiveRequest, Asked),
    raw: String,
    peers: Arc<Peers>,
) -> Result<Response, Failure> {
    let (limit, sort) = asked.shape();
    let asked = Arc::new(asked);
    let mine = own_answer(&state, &asked).await?;
    let answers = peers.ask(LiveRequest::PATH, &raw).await;
    let mut members = vec![Member { url: "self".into(), answered: true, error: None }];
    let mut theirs: Vec<Option<Live>> = Vec::with_capacity(answers.len());
    for (url, answered) in answers {
        let read = answered
            .and_then(|body| serde_json::from_slice::<Live>(&body).map_err(|e| format!("not a live view: {e}")));
        let error = read.as_ref().err().map(|why| crate::printable::escaped(why).into_owned());
        members.push(Member { url, answered: error.is_none(), error });
        theirs.push(read.ok());
    }
    let mut group = mine.clone();
    theirs.iter().flatten().for_each(|answer| merge_live(&mut group, answer.clone()));
    order_and_cut(&mut group, sort, limit);
    // The group's busiest so far: each member that cut its list is asked for those it left out.
    let my_missing = left_out(&mine, &group.series);
    let queries: Vec<Option<String>> = theirs
        .iter()
        .map(|answer| {
            let missing = answer.as_ref().map(|answer| left_out(answer, &group.series)).unwrap_or_default();
            (!missing.is_empty()).then(|| keys_query(&request, &missing))
        })
        .collect();
    let more = rows_left_out(&state, &asked, &peers, &my_missing, &queries, &mut members).await?;
    // Into the rows only: the totals were merged with the first answers.
    more.into_iter().for_each(|rows| merge_rows(&mut group.series, rows));
    order_and_cut(&mut group, sort, limit);
    group.partial = Some(members.iter().any(|member| !member.answered));
    group.members = Some(members);
    Ok(Json(group).into_response())
}

/// This global's own answer, read on the blocking pool.
async fn own_answer(state: &Arc<HttpState>, asked: &Arc<Asked>) -> Result<Live, Failure> {
    let (state, asked) = (state.clone(), asked.clone());
    tokio::task::spawn_blocking(move || answer(&state, &asked))
        .await
        .map_err(|_| Failure::internal("building the live view failed"))
}

/// The rows of `my_missing` from this global, and each peer's answer to its query (`None`: not
/// asked); a peer that does not give them is marked in `members` (the answer is partial).
async fn rows_left_out(
    state: &Arc<HttpState>,
    asked: &Asked,
    peers: &Peers,
    my_missing: &[String],
    queries: &[Option<String>],
    members: &mut [Member],
) -> Result<Vec<Vec<SeriesRow>>, Failure> {
    let mut rows = Vec::new();
    if !my_missing.is_empty() {
        rows.push(own_answer(state, &Arc::new(asked.only(my_missing))).await?.series);
    }
    let answers = peers.ask_each(LiveRequest::PATH, queries).await;
    for ((url, answered), member) in answers.into_iter().zip(members.iter_mut().skip(1)) {
        let Some(answered) = answered else { continue };
        match answered.and_then(|body| serde_json::from_slice::<Live>(&body).map_err(|e| e.to_string())) {
            Ok(answer) => rows.push(answer.series),
            Err(why) => {
                member.answered = false;
                member.error = Some(crate::printable::escaped(&format!("{url}: rows left out: {why}")).into_owned());
            }
        }
    }
    Ok(rows)
}

/// The first question (`request`) asking only for `keys`, as many rows as there are keys: its
/// query string.
fn keys_query(request: &LiveRequest, keys: &[String]) -> String {
    let only = LiveRequest { limit: keys.len(), pattern: None, tables: false, keys: keys.to_vec(), ..request.clone() };
    let path_and_query = only.path_and_query();
    path_and_query.split_once('?').map_or_else(String::new, |(_, query)| query.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_members_second_question_asks_for_the_keys_alone() {
        let request = |text: &str| {
            let query = text.split('&').filter_map(|pair| pair.split_once('='));
            LiveRequest::from_query(&query.map(|(k, v)| (k.to_string(), v.to_string())).collect()).unwrap()
        };
        let cases = [
            (
                "limit=200&sort=p99&match=api&threshold=5&tables=1",
                vec!["a;x=1", "b"],
                "limit=2&sort=p99&threshold=5&keys=a%3Bx%3D1%0Ab",
            ),
            ("", vec!["a"], "limit=1&sort=rate&keys=a"),
        ];
        for (text, keys, want) in cases {
            let keys: Vec<String> = keys.into_iter().map(String::from).collect();
            assert_eq!(keys_query(&request(text), &keys), want, "{text}");
        }
    }
}
