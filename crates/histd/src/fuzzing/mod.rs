//! Entry points for the fuzz targets (`fuzz/`): each parser a network or a disk reaches, called
//! as the daemon calls it, with the property the target checks asserted here. Not an API.

pub mod targets;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use agg::{AggConfig, Aggregator, Table};

use crate::ingest::framer::{Framed, Framer, PendingBudget};
use crate::telemetry::EdgeCounters;

/// A query's parameters from `key=value` lines (the input of the targets that read them).
pub fn parameters(text: &str) -> HashMap<String, String> {
    text.split('\n').filter_map(|line| line.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// An aggregator holding a few series of every type, under names a command can pick.
fn aggregator() -> Aggregator {
    let mut aggregator = Aggregator::new(AggConfig::default());
    let mut table = Table::new(true, 64);
    table.insert_packet(1, b"a.b:1|c\na.c:2|c\nt.x:5|ms\ng.y:3|g\ns.z:u|s\nweird;k=v:1|c\n");
    aggregator.absorb(table);
    aggregator
}

/// A management command line: parsed as the management port parses it and run against an
/// aggregator (dumps, deletions, `clear`); never a panic, and a deletion's reply ends `END`.
pub fn management_command(line: &[u8]) {
    let command = crate::admin::Command::parse(&String::from_utf8_lossy(line));
    if let Some(reply) = crate::admin::on_aggregator(&command, &mut aggregator()) {
        assert!(reply.ends_with("END\n\n"), "{command:?}: {reply:?}");
    }
}

/// A byte stream cut into reads at the positions `cuts` gives, framed as a statsd stream
/// connection frames it with short lines allowed: every line handed on is a whole line of the
/// input (never a piece of a longer one), and the budget is given back.
pub fn stream_framer(stream: &[u8], cuts: &[u8]) {
    let edges = Arc::new(EdgeCounters::default());
    let budget = PendingBudget { limit: 1 << 20, line_limit: 16, edges: edges.clone() };
    let input_lines: std::collections::HashSet<&[u8]> = stream.split(|&b| b == b'\n').collect();
    let mut framer = Framer::new(budget);
    let mut check = |framed: Framed<'_>| {
        if let Framed::Packet(packet) = framed {
            let packet = packet.strip_suffix(b"\n").unwrap_or(packet);
            for line in packet.split(|&b| b == b'\n') {
                assert!(input_lines.contains(line), "a piece of a line was handed on: {line:?}");
            }
        }
    };
    let mut rest = stream;
    let mut cuts = cuts.iter().cycle();
    while !rest.is_empty() {
        let take = (usize::from(*cuts.next().unwrap_or(&255)) + 1).min(rest.len());
        let chunk = framer.chunk();
        let take = take.min(chunk.len());
        chunk[..take].copy_from_slice(&rest[..take]);
        framer.accept(take, &mut check);
        rest = &rest[take..];
    }
    framer.finish(&mut check);
    drop(framer);
    assert_eq!(edges.stream_pending_bytes.get(), 0, "the partial-line budget is given back");
}

/// The first line of what a line port received, as the HTTP detector reads it.
pub fn cross_protocol(bytes: &[u8]) -> bool {
    crate::cross_protocol::looks_like_http(crate::cross_protocol::first_line(bytes))
}

/// A packet routed by `histd proxy` to three aggregators (on ports nothing listens on): every
/// line is counted once, as forwarded or bad.
pub fn proxy_route(packet: &[u8], sanitize: bool) {
    let nodes: Vec<fleet::ring::Node> =
        ["a", "b", "c"].iter().map(|name| fleet::ring::Node::new(name.to_string())).collect();
    let ring = Arc::new(fleet::ring::Ring::new(nodes));
    let targets: Arc<[SocketAddr]> = (1..=3).map(|port| SocketAddr::from(([127, 0, 0, 1], port))).collect();
    let registry = Arc::new(crate::proxy::route::CountsRegistry::new(3));
    let Ok(mut router) = crate::proxy::route::Router::new(ring, targets, 512, sanitize, registry.clone()) else {
        return;
    };
    router.route(packet);
    router.flush();
    drop(router);
    let total = registry.total();
    let (lines, forwarded, bad) = (total.lines.get(), total.forwarded.get(), total.bad_lines.get());
    assert!(forwarded + bad <= lines, "{forwarded} forwarded and {bad} bad of {lines} lines");
}

/// A spool file as a local finds it at start: read or set aside, never a panic; a file read
/// gives its body back whole.
pub fn spool_file(file: &[u8]) {
    let dir = std::env::temp_dir().join(format!("histd-fuzz-spool-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    std::fs::write(fleet::spool::file_path(&dir, 7), file).expect("a scratch file");
    // A file under another name is not histd's: never listed, so never half-read.
    std::fs::write(dir.join("00000000000000000009.batch"), file).expect("a scratch file");
    if let Ok((spool, _)) = fleet::spool::Spool::open(Some(dir.clone()), 1 << 30) {
        for waiting in spool.waiting() {
            let body = spool.body(&waiting).expect("a file whose header read gives its body");
            assert_eq!(body.len() as u64, waiting.bytes);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A global's journal file: its credential and body, or refused, never a panic.
pub fn journal_file(file: &[u8]) {
    if let Ok((credential, body)) = crate::global::journal::parse(file.to_vec()) {
        assert!(credential.len() + body.len() <= file.len());
    }
}

/// `/api/v1/live`'s parameters, read and answered from an aggregation of a few series: a
/// parameter that does not read is an error naming it, never a panic.
pub fn live_parameters(query: &HashMap<String, String>) {
    let Ok(request) = crate::contract::LiveRequest::from_query(query) else { return };
    let Ok(asked) = crate::http::live::asked(&request) else { return };
    let aggregation = crate::aggregation::Aggregation::new(AggConfig::default());
    aggregation.current().absorb({
        let mut table = Table::new(true, 64);
        table.insert_packet(1, b"a.b:1|c\nt.x:5|ms\nt.x:7|ms\ng.y:3|g\ns.z:u|s\n");
        table
    });
    let _ = crate::http::live::take(&aggregation, &asked);
}

/// A config file's text: a config, or an error naming a key or a position, never a panic; a
/// config read renders its effective settings.
pub fn config_text(text: &str) {
    if let Ok(config) = crate::config::Config::from_text(text) {
        let _ = config.effective().to_string();
    }
}

/// A client certificate's DER as the HTTP port reads its subject's name.
pub fn certificate_name(der: &[u8]) -> Option<String> {
    crate::tls::subject_common_name(der)
}

/// `DELETE /api/v1/series`' filters, read and applied to `store` (nothing is deleted): a filter
/// that does not read is a 400 naming it, never a panic or a 500.
pub fn forget_filters(query: &HashMap<String, String>, store: &store::Store) {
    if let Err(failure) = crate::http::series::to_forget(query, store, "statsd") {
        assert_eq!(failure.status(), 400, "{query:?}: {}", failure.message());
    }
}

/// The bytes of a store file written by `flushes` 10 s flushes, each of the lines
/// `lines(flush)` gives, copied whole (`Store::backup_to`: one file, no write-ahead log): a
/// seed the store's fuzz targets damage.
pub fn store_file(flushes: u64, lines: impl Fn(u64) -> String) -> Vec<u8> {
    let store = filled_store("store-seed", 1_800_000_000, flushes, lines);
    let copy = std::env::temp_dir().join(format!("histd-fuzz-store-seed-copy-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&copy);
    store.backup_to(&copy).unwrap();
    let bytes = std::fs::read(&copy).unwrap();
    let _ = std::fs::remove_file(&copy);
    bytes
}

/// A store in a scratch directory of its own (`name`), fresh, holding `flushes` flushes of
/// `lines(flush)`, one every 10 s from `start` (unix seconds), its series loaded.
pub fn filled_store(name: &str, start: u64, flushes: u64, lines: impl Fn(u64) -> String) -> store::Store {
    let dir = std::env::temp_dir().join(format!("histd-fuzz-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut store = store::Store::open(&dir.join("histd.db"), store::Options::default()).unwrap();
    let mut aggregator = Aggregator::new(AggConfig::default());
    for flush in 0..flushes {
        let at = start + flush * 10;
        let mut table = Table::new(true, 1000);
        table.insert_packet(at, lines(flush).as_bytes());
        aggregator.absorb(table);
        let snapshot = aggregator.flush(at * 1000);
        store.write(at as i64, &snapshot).unwrap();
    }
    store.load_series().unwrap();
    store
}

/// Any bytes a server at the URL of `histd health` (or `query`, `top`) answers with, read as
/// their client reads them (over an in-memory connection): never a panic, never a body past
/// the cap, and whatever is echoed of it printable (issue 48, P3).
pub fn cli_answer(answer: &[u8]) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
    let cap = crate::api_client::HEALTH.body_bytes;
    let answer = answer.to_vec();
    runtime.block_on(async move {
        let (client, mut server) = tokio::io::duplex(64 * 1024);
        let serving = tokio::spawn(async move {
            let mut request = [0u8; 4096];
            let _ = server.read(&mut request).await;
            let _ = server.write_all(&answer).await;
            let _ = server.shutdown().await;
            // Drain until the client goes: it may still be writing.
            while matches!(server.read(&mut request).await, Ok(n) if n > 0) {}
        });
        let read = crate::http_client::get_over(client, "/health", cap);
        if let Ok(Ok(answer)) = tokio::time::timeout(std::time::Duration::from_secs(10), read).await {
            assert!(answer.body.len() <= cap, "a body of {} bytes past the cap", answer.body.len());
            let text = String::from_utf8_lossy(&answer.body);
            if let Err(error) = crate::health_cli::verdict(answer.status, &text) {
                let shown = format!("{error:#}");
                assert!(!shown.chars().any(|c| c != '\n' && crate::printable::unprintable(c)), "{shown:?}");
            }
        }
        serving.abort();
    });
}

/// A browser's sign-in request (issue 49, item 2): its `Cookie` header lines and its form
/// body, read as the HTTP port reads them: never a panic; a session id found is one the
/// header holds whole, and a token read from the form is one the form names.
pub fn sign_in_request(data: &[u8]) {
    let (cookies, form) = data.split_at(data.iter().position(|&b| b == 0).unwrap_or(data.len()));
    let mut headers = axum::http::HeaderMap::new();
    for line in cookies.split(|&b| b == b'\n') {
        if let Ok(value) = axum::http::HeaderValue::from_bytes(line) {
            headers.append(axum::http::header::COOKIE, value);
        }
    }
    if let Some(id) = crate::http::session::session_id(&headers) {
        let held = headers
            .get_all(axum::http::header::COOKIE)
            .iter()
            .any(|v| v.as_bytes().windows(id.len()).any(|w| w == id.as_bytes()));
        assert!(held && !id.is_empty() && id.len() <= 128, "{id:?}");
    }
    let _ = crate::http::session::form_field(form, "token");
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cli_answer_target_reads_whole_cut_endless_and_hostile_answers() {
        let answers: [&[u8]; 6] = [
            b"HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n{\"status\":\"up\"}",
            b"HTTP/1.1 503 X\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n",
            b"HTTP/1.1 401 X\r\nContent-Length: 12\r\n\r\n\x1b]0;pwned\x07\x1b",
            b"HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n{\"status\"",
            b"HTTP/1.1 200 OK\r\nX-A: ",
            b"",
        ];
        for answer in answers {
            super::cli_answer(answer);
        }
        let mut endless_head = b"HTTP/1.1 200 OK\r\n".to_vec();
        endless_head.extend(b"X-A: b\r\n".repeat(20_000));
        super::cli_answer(&endless_head);
    }
}
