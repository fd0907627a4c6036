//! One HTTP/1.1 connection to a remote-write receiver, kept open between requests and made
//! anew when it closes or fails.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::config::HttpUrl;

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// 2xx.
    Delivered,
    /// 5xx or 429, or no answer (connection refused, reset, timed out): try again later.
    Retry(String),
    /// Another status: the receiver refuses this request for good.
    Rejected(String),
}

/// A client for one URL.
pub struct Client {
    url: HttpUrl,
    headers: Vec<(String, String)>,
    timeout: Duration,
    connection: Option<SendRequest<Full<Bytes>>>,
}

impl Client {
    /// A client that sends `headers` with every request and waits `timeout` for each.
    pub fn new(url: HttpUrl, headers: Vec<(String, String)>, timeout: Duration) -> Client {
        Client { url, headers, timeout, connection: None }
    }

    /// POSTs a snappy-compressed remote-write body.
    pub async fn post(&mut self, body: Bytes) -> Outcome {
        match tokio::time::timeout(self.timeout, self.try_post(body)).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(error)) => {
                self.connection = None;
                Outcome::Retry(error)
            }
            Err(_) => {
                self.connection = None;
                Outcome::Retry(format!("no answer within {} ms", self.timeout.as_millis()))
            }
        }
    }

    async fn try_post(&mut self, body: Bytes) -> Result<Outcome, String> {
        let mut builder = Request::post(&self.url.path)
            .header("host", self.url.authority())
            .header("content-encoding", "snappy")
            .header("content-type", "application/x-protobuf")
            .header("user-agent", concat!("histd/", env!("CARGO_PKG_VERSION")))
            .header("x-prometheus-remote-write-version", "0.1.0");
        for (name, value) in &self.headers {
            builder = builder.header(name, value);
        }
        let request = builder.body(Full::new(body)).map_err(|e| format!("bad request header: {e}"))?;
        let sender = self.connected().await?;
        let response = sender.send_request(request).await.map_err(|e| format!("request failed: {e}"))?;
        let status = response.status();
        let body = response.into_body().collect().await.map_err(|e| format!("reading the answer: {e}"))?;
        let text = String::from_utf8_lossy(&body.to_bytes()).chars().take(300).collect::<String>();
        Ok(match status.as_u16() {
            200..=299 => Outcome::Delivered,
            429 | 500..=599 => Outcome::Retry(format!("HTTP {status}: {}", text.trim())),
            _ => Outcome::Rejected(format!("HTTP {status}: {}", text.trim())),
        })
    }

    async fn connected(&mut self) -> Result<&mut SendRequest<Full<Bytes>>, String> {
        if let Some(sender) = &mut self.connection {
            if sender.ready().await.is_err() {
                self.connection = None;
            }
        }
        if self.connection.is_none() {
            let address = (self.url.host.as_str(), self.url.port);
            let stream = TcpStream::connect(address).await.map_err(|e| format!("cannot connect: {e}"))?;
            let _ = stream.set_nodelay(true);
            let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .map_err(|e| format!("HTTP handshake failed: {e}"))?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            self.connection = Some(sender);
        }
        Ok(self.connection.as_mut().unwrap_or_else(|| unreachable!("set above")))
    }
}
