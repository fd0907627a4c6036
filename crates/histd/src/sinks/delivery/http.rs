//! HTTP destinations (prometheus' remote write, otlp, circonus): each request of a flush is a
//! [`Parcel`] of an [`Outbox`] whose [`HttpTransport`] sends it and reads the answer with its
//! protocol's [`Judge`].

use std::sync::Arc;
use std::time::Duration;

use agg::Snapshot;
use bytes::Bytes;
use hyper::Method;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Limits, Outbox, Parcel, Transport, Verdict};
use crate::backoff::SENDER_STEPS;
use crate::clock::unix_now_s;
use crate::http_client::{Answer, Client, HttpUrl, Outcome};
use crate::sinks::{Context, DropReason, SinkTelemetry};

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

/// How a protocol reads an answer.
pub type Judge = fn(&Answer) -> Verdict;

/// The plain reading: 2xx delivered, 5xx and 429 retried (after `Retry-After` when given),
/// any other status refused.
pub fn plain_judge(answer: &Answer) -> Verdict {
    match Outcome::of(answer) {
        Outcome::Delivered => Verdict::DELIVERED,
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
    let delivery = tokio::spawn(destination.outbox(telemetry.clone()).run(waiting));
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
            if batches.try_send(requests).is_err() {
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

/// Where an HTTP destination is, and how it is sent to.
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
    /// The TLS of an `https://` URL (`None`: the system's roots, no client certificate).
    pub tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
    /// How answers are read.
    pub judge: Judge,
}

impl Destination {
    /// The outbox that delivers to it, counting into `telemetry`.
    pub fn outbox(self, telemetry: Arc<SinkTelemetry>) -> Outbox<HttpTransport> {
        let limits = Limits { bytes: self.retry_buffer_bytes, parcels: usize::MAX, steps: SENDER_STEPS };
        let name = self.name.clone();
        Outbox::new(name, HttpTransport::new(&self), limits, telemetry)
    }
}

/// Sends each parcel as one request and reads the answer with its protocol's [`Judge`].
pub struct HttpTransport {
    client: Client,
    method: Method,
    judge: Judge,
}

impl HttpTransport {
    /// A transport to `destination`.
    pub fn new(destination: &Destination) -> HttpTransport {
        let client = Client::new(destination.url.clone(), destination.headers.clone(), destination.timeout)
            .with_tls(destination.tls.clone());
        HttpTransport { client, method: destination.method.clone(), judge: destination.judge }
    }
}

impl Parcel for Request {
    fn bytes(&self) -> u64 {
        self.body.len() as u64
    }

    fn points(&self) -> u64 {
        self.points
    }
}

impl Transport for HttpTransport {
    type Parcel = Request;

    async fn send(&mut self, request: &Request) -> Verdict {
        match self.client.send(self.method.clone(), request.body.clone()).await {
            Ok(answer) => (self.judge)(&answer),
            Err(reason) => Verdict::retry(reason),
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
