//! Delivery: an [`Outbox`] per destination (each Alertmanager, each webhook), each on its own
//! task with a bounded queue, so a destination that is down never holds up another, the
//! evaluation, a flush or ingest. A notice that fails is tried again with a growing pause
//! (1 s, 2 s, ... 30 s) until it is delivered, refused for good (a 4xx: counted as rejected),
//! or a newer notice of the same rule takes its place. What each destination does is counted
//! in its telemetry (`alerts.<destination>.*` in `stats`, `/health`, `/metrics`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::config::{Alerting, WebhookFormat};
use super::notice::Notice;
use crate::http_client::{Client, HttpUrl};
use crate::sinks::delivery::{plain_judge, Limits, Outbox, Parcel, Transport, Verdict};
use crate::telemetry::{EtsyStatus, SinkTelemetry};

/// The pauses between two tries of one notice: 1 s, doubling up to 30 s (with the jitter every
/// sender has).
const NOTICE_STEPS: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(30));

/// The destinations' queues.
#[derive(Debug, Default)]
pub struct Notifier {
    /// Each destination's queue (emptied at [`Notifier::finish`]) and what it takes.
    queues: Mutex<Vec<(mpsc::Sender<[Notification; 1]>, Shape)>>,
    telemetry: Vec<Arc<SinkTelemetry>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

/// What a destination takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Alertmanager,
    Webhook(WebhookFormat),
}

/// One notice as one destination takes it.
#[derive(Debug)]
struct Notification {
    rule: String,
    body: Bytes,
}

impl Parcel for Notification {
    fn bytes(&self) -> u64 {
        self.body.len() as u64
    }

    fn points(&self) -> u64 {
        1
    }

    /// A newer notice of the same rule says more.
    fn supersedes(&self, older: &Self) -> bool {
        older.rule == self.rule
    }
}

/// Posts each notification as JSON.
struct Poster(Client);

impl Transport for Poster {
    type Parcel = Notification;

    /// Read as every HTTP destination's answers are: a 429 or 503's `Retry-After` is obeyed.
    async fn send(&mut self, notification: &Notification) -> Verdict {
        match self.0.send(hyper::Method::POST, notification.body.clone()).await {
            Ok(answer) => match plain_judge(&answer) {
                Verdict::Rejected(reason) => Verdict::Rejected(format!("{} ({reason})", notification.rule)),
                verdict => verdict,
            },
            Err(reason) => Verdict::retry(reason),
        }
    }
}

impl Notifier {
    /// Starts a task per destination of `alerting`.
    pub fn start(alerting: &Alerting, startup_s: u64) -> Notifier {
        let mut notifier = Notifier::default();
        let many = alerting.alertmanagers.len() + alerting.webhooks.len() > 1;
        for (index, (_, url)) in alerting.alertmanagers.iter().enumerate() {
            let name = if many { format!("alerts.alertmanager{index}") } else { "alerts.alertmanager".into() };
            notifier.add(name, url.clone(), Shape::Alertmanager, alerting, startup_s);
        }
        for (index, hook) in alerting.webhooks.iter().enumerate() {
            let name = if many { format!("alerts.webhook{index}") } else { "alerts.webhook".into() };
            notifier.add(name, hook.target.clone(), Shape::Webhook(hook.format), alerting, startup_s);
        }
        notifier
    }

    fn add(&mut self, name: String, url: HttpUrl, shape: Shape, alerting: &Alerting, startup_s: u64) {
        let name: &'static str = Box::leak(name.into_boxed_str()); // a destination per config entry, at start
        let telemetry = Arc::new(SinkTelemetry::new(name, EtsyStatus::None, startup_s));
        let (sender, receiver) = mpsc::channel(alerting.max_queued);
        let headers = vec![("Content-Type".to_string(), "application/json".to_string())];
        let poster = Poster(Client::new(url, headers, alerting.timeout));
        let limits = Limits { bytes: u64::MAX, parcels: alerting.max_queued, steps: NOTICE_STEPS };
        let outbox = Outbox::new(name, poster, limits, telemetry.clone());
        crate::clock::lock(&self.tasks).push(tokio::spawn(outbox.run(receiver)));
        crate::clock::lock(&self.queues).push((sender, shape));
        self.telemetry.push(telemetry);
    }

    /// Queues `notice` for every destination, never waiting: a full queue drops it, counted.
    /// Webhooks hear each change once (no repeats).
    pub fn send(&self, notice: &Notice) {
        for ((queue, shape), telemetry) in crate::clock::lock(&self.queues).iter().zip(&self.telemetry) {
            let body = match shape {
                Shape::Alertmanager => notice.alertmanager_body(),
                Shape::Webhook(_) if notice.repeat => continue,
                Shape::Webhook(format) => notice.webhook_body(*format),
            };
            let notification = Notification { rule: notice.rule.clone(), body: Bytes::from(body.to_string()) };
            if queue.try_send([notification]).is_err() {
                telemetry.queue_full_drops.add(1);
            }
        }
    }

    /// Every destination's telemetry.
    pub fn telemetry(&self) -> Vec<Arc<SinkTelemetry>> {
        self.telemetry.clone()
    }

    /// Closes the queues (at shutdown, after the last evaluation): each destination delivers
    /// what it holds within `grace` at most (and its outbox's final deadline), then stops;
    /// what is left is counted as `dropped_points.shutdown`.
    pub async fn finish(&self, grace: Duration) {
        crate::clock::lock(&self.queues).clear();
        let tasks = std::mem::take(&mut *crate::clock::lock(&self.tasks));
        let deadline = tokio::time::Instant::now() + grace;
        for mut task in tasks {
            if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
                task.abort();
                tracing::warn!(
                    grace_s = grace.as_secs(),
                    "alert notifications still undelivered at shutdown were dropped"
                );
            }
        }
    }
}
