//! What the HTTP backends that send each flush as requests share (prometheus' remote write,
//! otlp, circonus): one [`Delivery`] per destination sends the requests in order, holds what
//! its receiver does not take in a retry buffer bounded in bytes, retries with backoff (or
//! when the receiver's `Retry-After` says), and at shutdown keeps trying until a deadline.
//! Each protocol says how it reads an answer ([`Judge`]).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::Method;
use tokio::sync::mpsc;
use tokio::time::Instant;

use agg::Snapshot;

use tokio::task::JoinHandle;

use super::backoff::{Backoff, FINAL_DEADLINE, SENDER_STEPS};
use super::{Context, DropReason, SinkTelemetry};
use crate::clock::unix_now_s;
use crate::http_client::{Answer, Client, HttpUrl, Outcome};

/// Flushes' requests a destination may have waiting to enter its retry buffer.
pub const BATCH_QUEUE: usize = 16;

/// One request: its body (encoded, compressed) and the points it carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// What is sent.
    pub body: Bytes,
    /// The data points (samples) in it, for the counters.
    pub points: u64,
}

/// What a protocol makes of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Taken; `rejected` of its points were refused by the receiver (a partial success),
    /// with its reason.
    Delivered { rejected: u64, reason: Option<String> },
    /// Try again later: after `after` when the receiver said so, else after the backoff.
    Retry { reason: String, after: Option<Duration> },
    /// Refused for good: dropped and counted.
    Rejected(String),
}

/// How a protocol reads an answer.
pub type Judge = fn(&Answer) -> Verdict;

/// The plain reading: 2xx delivered, 5xx and 429 retried (after `Retry-After` when given),
/// any other status refused.
pub fn plain_judge(answer: &Answer) -> Verdict {
    match Outcome::of(answer) {
        Outcome::Delivered => Verdict::Delivered { rejected: 0, reason: None },
        Outcome::Retry(reason) => Verdict::Retry { reason, after: answer.retry_after },
        Outcome::Rejected(reason) => Verdict::Rejected(reason),
    }
}

/// Starts a backend that turns each flush into requests with `encode` (on a blocking thread:
/// a flush of 100k series is milliseconds of work; `encode` keeps its own state between
/// flushes) and delivers them to `destination` in order. A full queue of requests drops the
/// flush's (counted in `queue_full_drops` and `dropped_points.buffer_full`); a flush whose
/// encoding panics is not sent (counted in `errors`, logged) and the next is encoded as usual.
pub fn spawn_http_sink<E>(mut encode: E, destination: Destination, context: Context) -> JoinHandle<()>
where
    E: FnMut(&Snapshot) -> Vec<Request> + Send + 'static,
{
    let (mut snapshots, telemetry) = (context.flushes(), context.telemetry);
    let (batches, waiting) = mpsc::channel(BATCH_QUEUE);
    let name = destination.name.clone();
    let delivery = tokio::spawn(Delivery::new(destination, telemetry.clone()).run(waiting));
    let counts = telemetry.clone();
    tokio::spawn(async move {
        while let Some(snapshot) = snapshots.next().await {
            let encoded = tokio::task::spawn_blocking(move || encode_guarded(encode, &snapshot)).await;
            let Ok((requests, kept)) = encoded else {
                counts.failed(unix_now_s());
                tracing::error!(destination = %name, "the encoding thread was lost: the backend stops");
                break;
            };
            encode = kept;
            let Some(requests) = requests else {
                counts.failed(unix_now_s());
                tracing::error!(destination = %name, "encoding a flush panicked: that flush is not sent (a bug: please report it)");
                continue;
            };
            let points: u64 = requests.iter().map(|request| request.points).sum();
            if batches.try_send(Arc::new(requests)).is_err() {
                counts.queue_full_drops.add(1);
                counts.drop_points(DropReason::BufferFull, points);
            }
        }
        drop(batches);
        let _ = delivery.await;
    })
}

/// Encodes `snapshot`, handing the encoder back even when it panics (then with no requests):
/// one flush a bug cannot encode is lost, not the backend. The encoder's state is what the
/// panic left; encoders keep nothing a half-done flush could make unsafe to use (their state
/// is per-series running values, at worst one flush behind).
fn encode_guarded<E>(mut encode: E, snapshot: &Snapshot) -> (Option<Vec<Request>>, E)
where
    E: FnMut(&Snapshot) -> Vec<Request>,
{
    let requests = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| encode(snapshot)));
    (requests.ok(), encode)
}

/// Where a [`Delivery`] sends, and how.
#[derive(Debug, Clone)]
pub struct Destination {
    /// Its name in the log (`prometheus target vm`, `otlp`).
    pub name: String,
    /// The URL.
    pub url: HttpUrl,
    /// POST or PUT.
    pub method: Method,
    /// Sent with every request (content type and encoding among them).
    pub headers: Vec<(String, String)>,
    /// One request's deadline.
    pub timeout: Duration,
    /// The retry buffer's bound in bytes: past it the oldest requests are dropped.
    pub retry_buffer_bytes: u64,
    /// How answers are read.
    pub judge: Judge,
}

/// One destination's sender and retry buffer.
pub struct Delivery {
    destination: Destination,
    client: Client,
    buffer: VecDeque<Request>,
    buffered_bytes: u64,
    telemetry: Arc<SinkTelemetry>,
    backoff: Backoff,
    retry_at: Option<Instant>,
    /// Failing since the last delivery (logged once per run of failures).
    failing: bool,
    /// Dropping since the last delivery (logged once per run).
    dropping: bool,
    /// Partial successes since the last full one (logged once per run).
    partial: bool,
}

impl Delivery {
    /// A delivery to `destination` counting into `telemetry`.
    pub fn new(destination: Destination, telemetry: Arc<SinkTelemetry>) -> Delivery {
        let client = Client::new(destination.url.clone(), destination.headers.clone(), destination.timeout);
        Delivery {
            destination,
            client,
            buffer: VecDeque::new(),
            buffered_bytes: 0,
            telemetry,
            backoff: Backoff::new(SENDER_STEPS),
            retry_at: None,
            failing: false,
            dropping: false,
            partial: false,
        }
    }

    /// Sends each batch as it comes, in order; when `batches` closes, keeps trying what it
    /// holds until [`FINAL_DEADLINE`] and counts the rest as lost at shutdown.
    pub async fn run(mut self, mut batches: mpsc::Receiver<Arc<Vec<Request>>>) {
        loop {
            let retry_at = self.retry_at;
            tokio::select! {
                batch = batches.recv() => match batch {
                    Some(batch) => {
                        self.take(&batch);
                        if self.retry_at.is_none() {
                            self.deliver().await;
                        }
                    }
                    None => break,
                },
                _ = tokio::time::sleep_until(retry_at.unwrap_or_else(Instant::now)), if retry_at.is_some() => {
                    self.telemetry.retries.add(1);
                    self.deliver().await;
                }
            }
        }
        self.deliver_before(Instant::now() + FINAL_DEADLINE).await;
        if !self.buffer.is_empty() {
            let points: u64 = self.buffer.iter().map(|request| request.points).sum();
            self.telemetry.drop_points(DropReason::Shutdown, points);
            tracing::error!(destination = %self.destination.name, points, "receiver unreachable at exit: undelivered points lost");
        }
    }

    /// Queues a flush's requests, within the retry buffer's bytes: the oldest go first, the
    /// newest request always stays.
    fn take(&mut self, batch: &[Request]) {
        for request in batch {
            self.buffered_bytes += request.body.len() as u64;
            self.buffer.push_back(request.clone());
        }
        while self.buffered_bytes > self.destination.retry_buffer_bytes && self.buffer.len() > 1 {
            let Some(oldest) = self.buffer.pop_front() else { break };
            self.buffered_bytes -= oldest.body.len() as u64;
            self.telemetry.drop_points(DropReason::BufferFull, oldest.points);
            if !self.dropping {
                self.dropping = true;
                tracing::warn!(destination = %self.destination.name, limit = self.destination.retry_buffer_bytes, "retry buffer full: dropping the oldest points (dropped_points.buffer_full)");
            }
        }
        self.telemetry.buffered_bytes.set(self.buffered_bytes);
    }

    /// Sends what is buffered, in order, until a request must wait for a retry.
    async fn deliver(&mut self) {
        while let Some(request) = self.buffer.front() {
            let (body, points) = (request.body.clone(), request.points);
            let verdict = match self.client.send(self.destination.method.clone(), body.clone()).await {
                Ok(answer) => (self.destination.judge)(&answer),
                Err(reason) => Verdict::Retry { reason, after: None },
            };
            match verdict {
                Verdict::Delivered { rejected, reason } => self.delivered(points, rejected, reason, body.len()),
                Verdict::Rejected(reason) => {
                    self.telemetry.failed(unix_now_s());
                    self.telemetry.drop_points(DropReason::Rejected, points);
                    tracing::warn!(destination = %self.destination.name, points, %reason, "the receiver refused a request: dropped (dropped_points.rejected)");
                }
                Verdict::Retry { reason, after } => {
                    self.telemetry.failed(unix_now_s());
                    if !self.failing {
                        self.failing = true;
                        tracing::warn!(destination = %self.destination.name, %reason, "sending failed; buffering and retrying");
                    } else {
                        tracing::debug!(destination = %self.destination.name, %reason, "sending failed again");
                    }
                    self.retry_at = Some(Instant::now() + self.backoff.failed(after));
                    return;
                }
            }
            self.buffer.pop_front();
            self.buffered_bytes -= body.len() as u64;
            self.telemetry.buffered_bytes.set(self.buffered_bytes);
        }
        self.retry_at = None;
    }

    fn delivered(&mut self, points: u64, rejected: u64, reason: Option<String>, bytes: usize) {
        let rejected = rejected.min(points);
        self.telemetry.points_out.add(points - rejected);
        self.telemetry.bytes_out.add(bytes as u64);
        self.telemetry.succeeded(unix_now_s());
        self.backoff.reset();
        (self.failing, self.dropping) = (false, false);
        if rejected == 0 {
            self.partial = false;
            return;
        }
        self.telemetry.drop_points(DropReason::Rejected, rejected);
        if !self.partial {
            self.partial = true;
            let reason = reason.unwrap_or_default();
            tracing::warn!(destination = %self.destination.name, rejected, %reason, "the receiver took a request in part: the rest counted in dropped_points.rejected");
        }
    }

    async fn deliver_before(&mut self, deadline: Instant) {
        while !self.buffer.is_empty() && Instant::now() < deadline {
            self.deliver().await;
            if let Some(retry_at) = self.retry_at {
                tokio::time::sleep_until(retry_at.min(deadline)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_encoder_that_panics_on_one_flush_encodes_the_next() {
        let mut flushes = 0;
        let encode = move |_: &Snapshot| {
            flushes += 1;
            assert!(flushes != 2, "the second flush trips a bug");
            vec![Request { body: Bytes::from(format!("flush {flushes}")), points: 1 }]
        };
        let snapshot = crate::sinks::test_flushes(&["a:1|c"], 1_700_000_000_000, agg::AggConfig::default()).remove(0);
        let mut bodies = Vec::new();
        let mut encode = Some(encode);
        for _ in 0..3 {
            let (requests, kept) = encode_guarded(encode.take().unwrap(), &snapshot);
            bodies.push(requests.map(|requests| requests[0].body.clone()));
            encode = Some(kept);
        }
        assert_eq!(bodies, [Some(Bytes::from("flush 1")), None, Some(Bytes::from("flush 3"))]);
    }
}
