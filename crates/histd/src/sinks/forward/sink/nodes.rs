//! Posting to `forward.nodes`: each batch to the node it was cut for (or, once that node has
//! been down for `forward.redirectAfterMs`, the next one), with a health task that asks every
//! node's `/health` each `forward.checkInterval`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::{Delivery, DeliveryParts, Pass, Way};
use crate::http_client::{Client, HttpUrl, Outcome};
use crate::secret_file::TokenFile;
use crate::sinks::delivery::{plain_judge, Verdict};
use crate::sinks::forward::config::ForwardConfig;
use crate::sinks::Flushes;
use fleet::format::CONTENT_TYPE;
use fleet::ring::{Node, Ring};

/// Posts batches to `forward.nodes`, with a health task that asks each node's `/health`.
pub(super) fn spawn_on_nodes(
    config: &ForwardConfig,
    parts: DeliveryParts,
    (token, tls): (Option<Arc<TokenFile>>, Option<Arc<tokio_rustls::rustls::ClientConfig>>),
    flushes: Flushes,
) -> JoinHandle<()> {
    let ring = Arc::new(Ring::new(config.nodes.iter().map(|(name, _)| Node::new(name.clone())).collect()));
    let urls: Vec<HttpUrl> = config.nodes.iter().map(|(_, url)| url.clone()).collect();
    let node_came_back = Arc::new(Notify::new());
    let checks = check_health(
        ring.clone(),
        urls.clone(),
        (token.clone(), tls.clone()),
        (config.check_interval, config.timeout),
        node_came_back.clone(),
        parts.telemetry.clone(),
    );
    let health = tokio::spawn(checks);
    let headers = vec![
        ("content-type".to_string(), CONTENT_TYPE.to_string()),
        ("content-encoding".to_string(), "snappy".to_string()),
    ];
    let client = |url| Client::new(url, headers.clone(), config.timeout).with_tls(tls.clone());
    let clients = urls.into_iter().map(|url| Some(client(url).with_token_file(token.clone()))).collect();
    let delivery = parts.deliver(ring, Way::Nodes { clients, redirect_after: config.redirect_after });
    tokio::spawn(async move {
        delivery.run(flushes, node_came_back).await;
        health.abort();
    })
}

/// How a global's answer is taken: as any HTTP receiver's ([`plain_judge`]), except that a
/// refusal of the request rather than the batch (401 or 403: credentials; 408: the body too
/// slow; 415: the headers) keeps the batch for a retry: fixing a token must not have lost data
/// meanwhile.
fn judge(answered: Result<crate::http_client::Answer, String>) -> Verdict {
    match answered {
        Err(reason) => Verdict::retry(reason),
        Ok(answer) if matches!(answer.status, 401 | 403 | 408 | 415) => Verdict::Retry {
            reason: format!("{} (the batch is kept: check forward.tokenFile and forward.tls)", answer.summary()),
            after: None,
        },
        Ok(answer) => plain_judge(&answer),
    }
}

/// Asks each node's `/health` every `interval`; wakes the delivery when one comes back.
async fn check_health(
    ring: Arc<Ring>,
    urls: Vec<HttpUrl>,
    (token, tls): (Option<Arc<TokenFile>>, Option<Arc<tokio_rustls::rustls::ClientConfig>>),
    (interval, timeout): (Duration, Duration),
    came_back: Arc<Notify>,
    telemetry: Arc<crate::telemetry::SinkTelemetry>,
) {
    let client = |url| Client::new(url, Vec::new(), timeout.min(interval)).with_tls(tls.clone());
    let mut clients: Vec<Client> = urls.into_iter().map(|url| client(url).with_token_file(token.clone())).collect();
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        for (node, client) in ring.nodes().iter().zip(&mut clients) {
            let outcome = client.get("/health").await;
            let up = outcome == Outcome::Delivered;
            if node.set_up(up) {
                match up {
                    true => tracing::info!(node = %node.name, "forward: node is back"),
                    false => tracing::warn!(node = %node.name, ?outcome, "forward: node failed its health check"),
                }
            }
            match up {
                true => came_back.notify_one(),
                false => telemetry.note_error(&format!(
                    "{}: its health check failed: {outcome:?} (check forward.tokenFile and forward.tls)",
                    node.name
                )),
            }
        }
    }
}

impl Delivery {
    /// Each batch to its node (or, once that node has been down for `redirectAfterMs`, the
    /// next one); batches whose node is down stay, in order. A node that answers busy (a retry
    /// with `Retry-After`: a global past `global.maxBytesInFlight`) is not down: it keeps its
    /// series, and its batches wait as long as it asked (the rest of this pass too).
    pub(super) async fn deliver_to_nodes(&mut self, mut flushes: Option<&mut Flushes>) -> Pass {
        let mut pass = Pass::Done;
        let mut busy = vec![false; self.ring.nodes().len()];
        for batch in self.spool().waiting() {
            if !self.spool().holds(batch.sequence) {
                continue; // set aside while an earlier batch of this pass was posted
            }
            let Way::Nodes { redirect_after, .. } = &self.way else { unreachable!("posting to nodes") };
            let owner = self.node_of(&batch.part);
            let destination = self.ring.destination(owner, *redirect_after).filter(|&node| !busy[node]);
            let Some(destination) = destination else {
                pass.left(None);
                continue;
            };
            let Some(body) = self.body(&batch) else { continue };
            self.spool().set_sending(batch.sequence, true);
            let answered = self.post(destination, body, &mut flushes).await;
            let node = &self.ring.nodes()[destination];
            let verdict = match judge(answered) {
                Verdict::Rejected(reason) => Verdict::Rejected(format!("node {}: {reason}", node.name)),
                Verdict::Retry { reason, after } => {
                    if after.is_some() {
                        busy[destination] = true;
                    } else if node.set_up(false) {
                        tracing::warn!(node = %node.name, %reason, "forward: node is down: new flushes go to the other nodes, its batches wait in the spool");
                    }
                    pass.left(after);
                    Verdict::Retry { reason: format!("node {}: {reason}", node.name), after }
                }
                delivered => delivered,
            };
            self.settle(&batch, &verdict);
        }
        pass
    }

    /// Posts `body` to node `destination`, taking the flushes that come meanwhile into the
    /// spool (the client is out of the way while its request is in flight).
    async fn post(
        &mut self,
        destination: usize,
        body: bytes::Bytes,
        flushes: &mut Option<&mut Flushes>,
    ) -> Result<crate::http_client::Answer, String> {
        let Way::Nodes { clients, .. } = &mut self.way else { unreachable!("posting to nodes") };
        let mut client = clients[destination].take().unwrap_or_else(|| unreachable!("one request at a time"));
        let request = async move {
            let answered = client.send(hyper::Method::POST, body).await;
            (client, answered)
        };
        let (client, answered) = self.taking_flushes_while(request, flushes).await;
        let Way::Nodes { clients, .. } = &mut self.way else { unreachable!("posting to nodes") };
        clients[destination] = Some(client);
        answered
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http_client::Answer;

    #[test]
    fn refusals_of_the_request_keep_the_batch() {
        let answer = |status| Ok(Answer { status, body: bytes::Bytes::new(), retry_after: None });
        let cases = [
            (200, "delivered"),
            (400, "rejected"),
            (413, "rejected"),
            (401, "retry"),
            (403, "retry"),
            (408, "retry"),
            (415, "retry"),
            (503, "retry"),
            (429, "retry"),
        ];
        for (status, want) in cases {
            let got = match judge(answer(status)) {
                Verdict::Delivered { .. } => "delivered",
                Verdict::Rejected(_) => "rejected",
                Verdict::Retry { .. } => "retry",
            };
            assert_eq!(got, want, "{status}");
        }
        assert!(matches!(judge(Err("refused".into())), Verdict::Retry { .. }));
        let busy = Answer { status: 503, body: bytes::Bytes::new(), retry_after: Some(Duration::from_secs(1)) };
        assert!(
            matches!(judge(Ok(busy)), Verdict::Retry { after: Some(after), .. } if after == Duration::from_secs(1)),
            "a global past global.maxBytesInFlight says when to come back"
        );
    }
}
