//! The proxy's management port: `health` (`health: up`, so proxies can be chained and checked
//! as aggregators are), `stats` (what it routed and dropped, per node), `hashring` (each node
//! and whether it is in the ring), `quit`.

use std::fmt::Write;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::listen::Routes;
use crate::clock::unix_now_s;

/// Serves management connections until `stop`.
pub async fn serve(listener: TcpListener, routes: Arc<Routes>, started_unix_s: u64, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            accepted = listener.accept() => if let Ok((stream, _)) = accepted {
                let routes = routes.clone();
                tokio::spawn(async move {
                    let _ = serve_connection(stream, &routes, started_unix_s).await;
                });
            },
            _ = stop.changed() => return,
        }
    }
}

async fn serve_connection(stream: TcpStream, routes: &Routes, started_unix_s: u64) -> std::io::Result<()> {
    let (reader, mut writer) = stream.into_split();
    let mut lines = BufReader::new(reader).lines();
    while let Some(line) = lines.next_line().await? {
        let reply = match line.trim() {
            "" => continue,
            "health" => "health: up\n".to_string(),
            "stats" => stats(routes, started_unix_s),
            "hashring" => hashring(routes),
            "quit" => return Ok(()),
            other => format!("ERROR: unknown command '{other}' (health, stats, hashring, quit)\n"),
        };
        writer.write_all(reply.as_bytes()).await?;
    }
    Ok(())
}

/// `stats`: totals since start, then each node's lines and state.
pub fn stats(routes: &Routes, started_unix_s: u64) -> String {
    let total = routes.registry.total();
    let mut out = String::new();
    let _ = writeln!(out, "uptime: {}", unix_now_s().saturating_sub(started_unix_s));
    let entries = [
        ("lines_received", total.lines.get()),
        ("lines_forwarded", total.forwarded.get()),
        ("bad_lines", total.bad_lines.get()),
        ("events_dropped", total.events.get()),
        ("lines_to_down_nodes", total.to_down_nodes.get()),
        ("datagrams_sent", total.datagrams.get()),
        ("send_errors", total.send_errors.get()),
        ("datagrams_refused", total.refused.get()),
        ("kernel_drops", routes.kernel_drops.get()),
        ("truncated_datagrams", routes.truncated.get()),
    ];
    for (name, value) in entries {
        let _ = writeln!(out, "proxy.{name}: {value}");
    }
    for (node, counts) in routes.ring.nodes().iter().zip(&total.per_node) {
        let name = &node.name;
        let _ = writeln!(out, "node.{name}.lines: {}", counts.lines.get());
        let _ = writeln!(out, "node.{name}.lines_while_down: {}", counts.to_down.get());
        let _ = writeln!(out, "node.{name}.send_errors: {}", counts.send_errors.get());
        let _ = writeln!(out, "node.{name}.datagrams_refused: {}", counts.refused.get());
        let _ = writeln!(out, "node.{name}.up: {}", u8::from(node.is_up()));
    }
    out.push_str("END\n\n");
    out
}

fn hashring(routes: &Routes) -> String {
    let mut out = String::new();
    for node in routes.ring.nodes() {
        let _ = writeln!(out, "{} {}", node.name, if node.is_up() { "up" } else { "down" });
    }
    out.push_str("END\n\n");
    out
}
