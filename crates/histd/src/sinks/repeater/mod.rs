//! The repeater sink: every raw packet, bad lines included, forwarded unchanged to other
//! statsd servers (`repeater: [{host, port}]`), over UDP (a datagram per packet) or TCP (the
//! packet and a newline on a connection kept open per target).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{lookup_host, TcpStream, UdpSocket};
use tokio::sync::mpsc;

use serde_json::Value;

use super::{Backend, Context, DropReason, Shared, SinkTelemetry, Started};
use crate::config_reader::keys::KeyDoc;
use crate::config_reader::{ConfigError, Reader};
pub mod config;

use crate::ingest::Tap;
pub use config::{RepeaterConfig, RepeaterProtocol};

/// Raw packets that may wait for the repeater before new ones are dropped.
const PACKET_QUEUE: usize = 16_384;

/// The repeater backend: every raw packet the listeners take, sent on to other statsd
/// servers. It reads no flushes: the listeners offer it packets through the [`Tap`] it offers.
pub struct Repeater;

impl Backend for Repeater {
    const NAME: &'static str = "repeater";
    const KEYS: &'static [KeyDoc] = config::KEYS;
    type Settings = RepeaterConfig;

    fn read(top: &Reader<'_>, _listed: bool) -> Result<RepeaterConfig, ConfigError> {
        config::repeater(top)
    }

    fn effective(settings: &RepeaterConfig) -> Value {
        settings.effective()
    }

    /// Its settings and `sinkQueueBytes`.
    type Identity = (RepeaterConfig, u64);

    fn identity(settings: &RepeaterConfig, shared: &Shared) -> Self::Identity {
        (settings.clone(), shared.sink_queue_bytes)
    }

    fn start(settings: &RepeaterConfig, context: Context) -> anyhow::Result<Started> {
        let (sender, receiver) = mpsc::channel(PACKET_QUEUE);
        let task = tokio::spawn(run(settings.clone(), receiver, context.telemetry.clone()));
        Ok(Started::task(task).offering(Tap::new(sender, context.telemetry)))
    }
}

async fn run(config: RepeaterConfig, mut packets: mpsc::Receiver<Vec<u8>>, telemetry: Arc<SinkTelemetry>) {
    let mut targets = Targets::resolve(&config).await;
    while let Some(packet) = packets.recv().await {
        telemetry.dequeued(packet.len() as u64, packets.len());
        targets.send(&packet, &telemetry).await;
    }
}

/// Where packets go, resolved once at start.
struct Targets {
    protocol: RepeaterProtocol,
    addresses: Vec<SocketAddr>,
    udp: Option<UdpSocket>,
    tcp: Vec<Option<TcpStream>>,
}

impl Targets {
    async fn resolve(config: &RepeaterConfig) -> Targets {
        let want_v6 = config.protocol == RepeaterProtocol::Udp6;
        let mut addresses = Vec::new();
        for (host, port) in &config.targets {
            match lookup_host((host.as_str(), *port)).await {
                Ok(found) => addresses.extend(
                    found.filter(|a| config.protocol == RepeaterProtocol::Tcp || a.is_ipv6() == want_v6).take(1),
                ),
                Err(error) => tracing::error!(%error, host, port, "repeater target does not resolve; skipped"),
            }
        }
        let bind = if want_v6 { "[::]:0" } else { "0.0.0.0:0" };
        let udp = match config.protocol {
            RepeaterProtocol::Tcp => None,
            _ => UdpSocket::bind(bind)
                .await
                .map_err(|error| tracing::error!(%error, "repeater cannot open a UDP socket"))
                .ok(),
        };
        let tcp = addresses.iter().map(|_| None).collect();
        Targets { protocol: config.protocol, addresses, udp, tcp }
    }

    /// Sends `packet` to every target; a packet a target did not take is counted as
    /// rejected (the repeater keeps no retry buffer, as Etsy's).
    async fn send(&mut self, packet: &[u8], telemetry: &SinkTelemetry) {
        for index in 0..self.addresses.len() {
            let result = match self.protocol {
                RepeaterProtocol::Tcp => self.send_tcp(index, packet).await,
                _ => self.send_udp(index, packet).await,
            };
            match result {
                Ok(()) => {
                    telemetry.points_out.add(1);
                    telemetry.bytes_out.add(packet.len() as u64);
                    telemetry.succeeded(crate::clock::unix_now_s());
                }
                Err(error) => {
                    telemetry.failed(crate::clock::unix_now_s());
                    telemetry.drop_points(DropReason::Rejected, 1);
                    tracing::debug!(%error, target = %self.addresses[index], "repeater send failed");
                }
            }
        }
    }

    async fn send_udp(&self, index: usize, packet: &[u8]) -> std::io::Result<()> {
        let socket = self.udp.as_ref().ok_or_else(|| std::io::Error::other("no UDP socket"))?;
        socket.send_to(packet, self.addresses[index]).await.map(drop)
    }

    async fn send_tcp(&mut self, index: usize, packet: &[u8]) -> std::io::Result<()> {
        if self.tcp[index].is_none() {
            let connect = TcpStream::connect(self.addresses[index]);
            let stream = tokio::time::timeout(Duration::from_secs(2), connect)
                .await
                .map_err(|_| std::io::Error::other("connect timed out"))??;
            self.tcp[index] = Some(stream);
        }
        let Some(stream) = self.tcp[index].as_mut() else { unreachable!("connected above") };
        let mut result = stream.write_all(packet).await;
        if result.is_ok() && !packet.ends_with(b"\n") {
            result = stream.write_all(b"\n").await;
        }
        if result.is_err() {
            self.tcp[index] = None;
        }
        result
    }
}
