//! `GET /metrics`: histd's own metrics always, every series of the prometheus backend when it
//! is on; `POST /-/clear`: forget the backend's cumulative series.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use proto::ParseError;

use super::HttpState;
use crate::clock::unix_now_s;
use crate::exposition::{Exposition, Format, Kind};
use crate::telemetry::budgets::BudgetState;
use crate::telemetry::EdgeCounters;

/// `GET /metrics`: histd's own metrics and the prometheus backend's series, in the format the
/// `Accept` header asks for (text, OpenMetrics or protobuf), rendered on the blocking pool.
/// The answer is held against `httpAnswerBytes` until its client has taken it all (or gone):
/// clients that ask and never read cannot pile up whole answers (250 of them held 1.4 GB at
/// 100k series: issue 48, P7); past the budget a scrape is answered 503.
pub async fn metrics(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let (answers, edges) = (state.answers.clone(), state.admin.edges.clone());
    match tokio::task::spawn_blocking(move || render_bytes(&state, &accept)).await {
        Ok((content_type, body)) => {
            super::api::give_back_after(body.len());
            let Some(held) = answers.reserve(body.len()) else {
                edges.refused_api_answers.add(1);
                let busy = "busy: the /metrics answers in flight hold httpAnswerBytes; ask again shortly\n";
                return (StatusCode::SERVICE_UNAVAILABLE, [(header::RETRY_AFTER, "1")], busy).into_response();
            };
            let body = Budgeted { rest: bytes::Bytes::from(body), _held: held };
            ([(header::CONTENT_TYPE, content_type)], axum::body::Body::new(body)).into_response()
        }
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "rendering /metrics failed\n").into_response(),
    }
}

/// The bytes `/metrics` answers hold until their clients have taken them
/// (`httpAnswerBytes`).
#[derive(Debug)]
pub struct AnswerBudget {
    held: crate::telemetry::Gauge,
    limit: u64,
}

/// An answer's bytes in an [`AnswerBudget`], given back when dropped.
#[derive(Debug)]
pub struct HeldAnswer {
    budget: Arc<AnswerBudget>,
    bytes: u64,
}

impl AnswerBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> AnswerBudget {
        AnswerBudget { held: Default::default(), limit: limit as u64 }
    }

    /// Holds `bytes`; `None` when that would pass the limit.
    pub fn reserve(self: &Arc<Self>, bytes: usize) -> Option<HeldAnswer> {
        let bytes = bytes as u64;
        self.held.try_add(bytes, self.limit).then(|| HeldAnswer { budget: self.clone(), bytes })
    }
}

impl Drop for HeldAnswer {
    fn drop(&mut self) {
        self.budget.held.sub(self.bytes);
    }
}

/// An answer's body handed to hyper a [`FRAME_BYTES`] frame at a time (hyper asks for the
/// next once it has written the last: a whole body in one frame would sit in its buffer, out
/// of the budget's sight), its bytes held until it has all been taken, or its connection gone.
struct Budgeted {
    rest: bytes::Bytes,
    _held: HeldAnswer,
}

/// How much of an answer hyper is handed at once.
const FRAME_BYTES: usize = 64 * 1024;

impl hyper::body::Body for Budgeted {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
        let rest = &mut self.get_mut().rest;
        if rest.is_empty() {
            return std::task::Poll::Ready(None);
        }
        let frame = rest.split_to(rest.len().min(FRAME_BYTES));
        std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(frame))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.rest.len() as u64)
    }
}

/// `POST /-/clear`: the prometheus backend forgets its series (statsd_exporter's endpoint).
pub async fn clear(State(state): State<Arc<HttpState>>) -> Response {
    match &state.prometheus() {
        Some(exposed) => {
            let forgotten = {
                let mut registry = exposed.registry.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                let count = registry.series_count();
                registry.clear();
                count
            };
            tracing::info!(series = forgotten, "/-/clear: the prometheus backend forgot its series");
            (StatusCode::OK, format!("forgot {forgotten} series\n")).into_response()
        }
        None => {
            (StatusCode::NOT_FOUND, "the prometheus backend is not on (backends: [\"prometheus\"])\n").into_response()
        }
    }
}

/// The exposition and its content type: protobuf when the scraper asks for it and histograms
/// are native; never OpenMetrics for vmrange histograms.
pub fn render_bytes(state: &HttpState, accept: &str) -> (&'static str, Vec<u8>) {
    let prometheus = state.prometheus();
    let format = match &prometheus {
        Some(exposed) => exposed.format_for(accept),
        None => Format::negotiate(accept, false),
    };
    let mut out = Exposition::in_format(format);
    own_metrics(state, &mut out);
    if let Some(exposed) = &prometheus {
        exposed.write(&mut out, format);
    }
    let content_type = out.content_type();
    (content_type, out.finish_bytes())
}

fn own_metrics(state: &HttpState, out: &mut Exposition) {
    let admin = &state.admin;
    let (totals, over_limit, budgets) = {
        let aggregator = admin.aggregation.current();
        (aggregator.totals().clone(), aggregator.timers_over_sample_limit(), BudgetState::of(&aggregator))
    };
    let uptime = unix_now_s().saturating_sub(admin.started_unix_s);
    let counters = [
        ("histd_packets_received_total", "Datagrams and stream reads received.", totals.packets),
        ("histd_lines_received_total", "Metric lines received.", totals.lines),
        (
            "histd_ignored_events_total",
            "DogStatsD events and service checks received (not aggregated).",
            totals.ignored_events,
        ),
        (
            "histd_kernel_drops_total",
            "Datagrams the kernel dropped because a receive buffer was full.",
            totals.kernel_drops,
        ),
        ("histd_truncated_datagrams_total", "Datagrams longer than maxDatagramBytes.", totals.truncated_datagrams),
        (
            "histd_timers_over_sample_limit_total",
            "Timer intervals whose percentiles were estimated past timerSampleLimit.",
            over_limit,
        ),
        ("histd_flushes_total", "Flushes done.", admin.aggregation.flushes.get()),
    ];
    for (name, help, value) in counters {
        out.single(name, Kind::Counter, help, value as f64);
    }
    let bad = out.family("histd_bad_lines_total", Some(Kind::Counter), Some("Lines rejected, by reason."));
    for reason in ParseError::ALL {
        let labels = [("reason".to_string(), reason.as_str().to_string())];
        out.sample(&bad, &labels, None, totals.bad_by_reason[reason.index()] as f64);
    }
    let flush_s = admin.aggregation.last_flush_us.get() as f64 / 1e6;
    out.single("histd_last_flush_duration_seconds", Kind::Gauge, "How long the last flush took to derive.", flush_s);
    out.single("histd_uptime_seconds", Kind::Gauge, "Seconds since start.", uptime as f64);
    for (name, value) in admin.edges.entries() {
        let (metric, kind) = match EdgeCounters::is_level(name) {
            true => (format!("histd_{name}"), Kind::Gauge),
            false => (format!("histd_{name}_total"), Kind::Counter),
        };
        out.single(&metric, kind, "See README: self-telemetry.", value as f64);
    }
    budget_metrics(&budgets, out);
    sink_metrics(state, out);
}

/// The cardinality budgets: series held and budgets per type, folds per reason, sketched sets.
fn budget_metrics(budgets: &BudgetState, out: &mut Exposition) {
    let report = &budgets.report;
    let per_type = [
        ("histd_series", "Series held per type (overflow series aside).", report.series),
        ("histd_max_series", "The maxSeries budget per type.", report.budgets.max_series),
    ];
    for (name, help, values) in per_type {
        let family = out.family(name, Some(Kind::Gauge), Some(help));
        for (kind, value) in agg::MetricType::ALL.iter().zip(values) {
            out.sample(&family, &[("type".to_string(), kind.name().to_string())], None, value as f64);
        }
    }
    let help = "New series folded into an overflow series, by the budget they passed.";
    let folded = out.family("histd_budget_folded_series_total", Some(Kind::Counter), Some(help));
    for reason in agg::FoldReason::ALL {
        let labels = [("reason".to_string(), reason.as_str().to_string())];
        out.sample(&folded, &labels, None, report.folded[reason as usize] as f64);
    }
    let help = "Set intervals counted by a sketch past maxSetMembers.";
    out.single("histd_sets_sketched_total", Kind::Counter, help, budgets.sets_sketched as f64);
    let help = "Series deleted after going without a value for their idleTTL, per type.";
    let expired = out.family("histd_idle_expired_series_total", Some(Kind::Counter), Some(help));
    for (kind, value) in agg::MetricType::ALL.iter().zip(budgets.idle_expired) {
        out.sample(&expired, &[("type".to_string(), kind.name().to_string())], None, value as f64);
    }
}

/// Each sink's telemetry, one family per value, a `sink` label per sink.
fn sink_metrics(state: &HttpState, out: &mut Exposition) {
    let now = unix_now_s();
    let telemetry = state.admin.sinks.telemetry();
    let sinks: Vec<(String, Vec<(String, f64)>)> =
        telemetry.iter().map(|sink| (sink.sink.to_string(), sink.histd_entries(now))).collect();
    let mut bases: Vec<&str> = Vec::new();
    for (name, _) in sinks.iter().flat_map(|(_, entries)| entries) {
        let base = name.split('.').next().unwrap_or(name);
        if !bases.contains(&base) {
            bases.push(base);
        }
    }
    for base in bases {
        let level = telemetry.iter().any(|sink| sink.is_level(base));
        let kind = if level { Kind::Gauge } else { Kind::Counter };
        let metric = match kind {
            Kind::Counter => format!("histd_sink_{base}_total"),
            _ => format!("histd_sink_{base}"),
        };
        let sample = out.family(&metric, Some(kind), Some("Per-backend telemetry (see README: stats)."));
        for (sink, entries) in &sinks {
            for (entry, value) in entries.iter().filter(|(entry, _)| entry.split('.').next() == Some(base)) {
                let mut labels = vec![("sink".to_string(), sink.clone())];
                if let Some((_, reason)) = entry.split_once('.') {
                    labels.push(("reason".to_string(), reason.to_string()));
                }
                out.sample(&sample, &labels, None, *value);
            }
        }
    }
}
