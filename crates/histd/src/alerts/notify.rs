//! Delivery: one task per destination (each Alertmanager, each webhook), each with a bounded
//! queue, so a destination that is down never holds up another, the evaluation, a flush or
//! ingest. A notice that fails is tried again with a growing pause (1 s, 2 s, ... 30 s) until
//! it is delivered, refused for good (a 4xx: counted as rejected), or a newer notice of the
//! same rule takes its place. What each destination does is counted in its telemetry
//! (`alerts.<destination>.*` in `stats`, `/health`, `/metrics`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::config::{Alerting, WebhookFormat};
use super::notice::{Notice, Status};
use crate::http_client::{Client, HttpUrl, Outcome};
use crate::sinks::backoff::Backoff;
use crate::telemetry::{DropReason, EtsyStatus, SinkTelemetry};

/// The pauses between two tries of one notice: 1 s, doubling up to 30 s (with the jitter every
/// sender has).
const NOTICE_STEPS: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(30));

/// The destinations' queues.
#[derive(Debug, Default)]
pub struct Notifier {
    destinations: Vec<(mpsc::Sender<Notice>, Arc<SinkTelemetry>)>,
    tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    closed: std::sync::atomic::AtomicBool,
}

/// What a destination takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Alertmanager,
    Webhook(WebhookFormat),
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
        let client = Client::new(url, headers, alerting.timeout);
        crate::clock::lock(&self.tasks).push(tokio::spawn(deliver(receiver, client, shape, telemetry.clone())));
        self.destinations.push((sender, telemetry));
    }

    /// Queues `notice` for every destination, never waiting: a full queue drops it, counted.
    pub fn send(&self, notice: &Notice) {
        if self.closed.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        for (queue, telemetry) in &self.destinations {
            if queue.try_send(notice.clone()).is_err() {
                telemetry.queue_full_drops.add(1);
            }
        }
    }

    /// Every destination's telemetry.
    pub fn telemetry(&self) -> Vec<Arc<SinkTelemetry>> {
        self.destinations.iter().map(|(_, telemetry)| telemetry.clone()).collect()
    }

    /// Lets each destination deliver what it holds within `grace` (at shutdown, after the
    /// last evaluation), then stops them.
    pub async fn finish(&self, grace: Duration) {
        self.closed.store(true, std::sync::atomic::Ordering::Relaxed);
        let tasks = std::mem::take(&mut *crate::clock::lock(&self.tasks));
        let deadline = tokio::time::Instant::now() + grace;
        for task in tasks {
            let queued = || self.destinations.iter().map(|(_, t)| t.queued.get()).sum::<u64>();
            while queued() > 0 && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            task.abort();
        }
        let left: u64 = self.destinations.iter().map(|(_, t)| t.queued.get()).sum();
        if left > 0 {
            tracing::warn!(
                left,
                grace_s = grace.as_secs(),
                "alert notifications still undelivered at shutdown were dropped"
            );
        }
    }
}

/// One destination's loop: notices in order, each tried until it is delivered, refused, or
/// superseded by a newer notice of its rule.
async fn deliver(
    mut receiver: mpsc::Receiver<Notice>,
    mut client: Client,
    shape: Shape,
    telemetry: Arc<SinkTelemetry>,
) {
    let mut waiting: VecDeque<Notice> = VecDeque::new();
    let mut closed = false;
    loop {
        telemetry.queued.set(waiting.len() as u64);
        if waiting.is_empty() {
            match receiver.recv().await {
                Some(notice) => waiting.push_back(notice),
                None => return,
            }
        }
        while let Ok(notice) = receiver.try_recv() {
            waiting.push_back(notice);
        }
        let Some(notice) = waiting.pop_front() else { continue };
        telemetry.queued.set(waiting.len() as u64 + 1); // with the one in hand
        if waiting.iter().any(|later| later.rule == notice.rule) {
            continue; // a newer notice of the same rule says more
        }
        let body = match shape {
            Shape::Alertmanager => notice.alertmanager_body(),
            Shape::Webhook(_) if notice.repeat => continue, // webhooks hear each change once
            Shape::Webhook(format) => notice.webhook_body(format),
        };
        let body = Bytes::from(body.to_string());
        let mut backoff = Backoff::new(NOTICE_STEPS);
        loop {
            match client.post(body.clone()).await {
                Outcome::Delivered => {
                    telemetry.succeeded(crate::clock::unix_now_s());
                    telemetry.bytes_out.add(body.len() as u64);
                    telemetry.points_out.add(1);
                    break;
                }
                Outcome::Rejected(reason) => {
                    telemetry.failed(crate::clock::unix_now_s());
                    telemetry.dropped_points[DropReason::Rejected.index()].add(1);
                    let status = if notice.status == Status::Firing { "firing" } else { "resolved" };
                    tracing::warn!(
                        destination = telemetry.sink,
                        rule = notice.rule,
                        status,
                        reason,
                        "alert notification refused"
                    );
                    break;
                }
                Outcome::Retry(reason) => {
                    telemetry.failed(crate::clock::unix_now_s());
                    tracing::debug!(destination = telemetry.sink, reason, "alert notification failed; trying again");
                    // Wait, but take newer notices meanwhile: one of this rule replaces it.
                    let sleep = tokio::time::sleep(backoff.failed(None));
                    tokio::pin!(sleep);
                    let superseded = loop {
                        if closed {
                            (&mut sleep).await;
                            break false;
                        }
                        tokio::select! {
                            () = &mut sleep => break false,
                            next = receiver.recv() => match next {
                                Some(next) => {
                                    let same = next.rule == notice.rule;
                                    waiting.push_back(next);
                                    if same { break true; }
                                }
                                None => closed = true,
                            },
                        }
                    };
                    if superseded {
                        break;
                    }
                    telemetry.retries.add(1);
                }
            }
        }
    }
}
