//! Health checks of the aggregators, as Etsy's proxy does them: every `checkInterval`, a TCP
//! connection to each node's `adminport` sends `health` and expects `health: up`. A node that
//! fails is left out of the ring (its series go to their next-best node) until it passes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::watch;

use fleet::ring::Ring;

/// Checks every node every `interval` until `stop`.
pub async fn check_nodes(
    ring: Arc<Ring>,
    admins: Vec<SocketAddr>,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let timeout = interval.min(Duration::from_secs(2));
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stop.changed() => return,
        }
        for (node, admin) in ring.nodes().iter().zip(&admins) {
            let up = matches!(tokio::time::timeout(timeout, ask_health(*admin)).await, Ok(Ok(true)));
            if node.set_up(up) {
                match up {
                    true => tracing::info!(node = %node.name, "proxy: node is back in the ring"),
                    false => {
                        tracing::warn!(node = %node.name, %admin, "proxy: node failed its health check: its series go to the others")
                    }
                }
            }
        }
    }
}

/// True when the management port at `admin` answers `health: up`.
async fn ask_health(admin: SocketAddr) -> std::io::Result<bool> {
    let mut stream = TcpStream::connect(admin).await?;
    stream.write_all(b"health\n").await?;
    let mut line = String::new();
    BufReader::new(&mut stream).read_line(&mut line).await?;
    Ok(line.trim() == "health: up")
}
