//! Leaks made impossible to miss (issue 48, P1): tens of thousands of connections of every
//! kind a daemon accepts (HTTP, HTTPS, statsd TCP, management) are opened and closed, and its
//! resident memory must come back to within a few MB of where it was. Before the fix each
//! finished HTTP connection kept ~5 KB and each statsd TCP connection ~2 KB until shutdown.
//!
//! `HISTD_SOAK_CONNECTIONS` sets how many connections of each kind (default 12,000; the
//! pasted run in BENCHMARKS.md used 100,000).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};

use socket2::{Domain, Socket, Type};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use crate::harness::{rss_kib, temp_dir, Daemon, TestCa};

/// How much resident memory may grow across one kind's connections: the allocator's own
/// slack, not a per-connection cost (12,000 leaking connections of 2 KB would be 24 MB; a
/// debug build's HTTP connection leaked ~350 B, 4 MB, where a release build's leaked 5 KB).
const ALLOWED_GROWTH_KIB: u64 = 2 * 1024;

/// How long after the last connection memory is read again: two flushes of the daemons
/// below (a statsd connection's table is given back at the flush after it closes).
const SETTLE: Duration = Duration::from_millis(2_500);

/// Client threads opening connections side by side.
const CLIENTS: usize = 4;

fn connections() -> usize {
    std::env::var("HISTD_SOAK_CONNECTIONS").ok().and_then(|n| n.parse().ok()).unwrap_or(12_000)
}

/// One connection of some kind, opened, used and closed; `false` if it failed.
type Connect = Arc<dyn Fn() -> bool + Send + Sync>;

/// `total` connections made by [`CLIENTS`] threads; how many succeeded.
fn churn(connect: &Connect, total: usize) -> usize {
    let threads: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let connect = connect.clone();
            let share = total / CLIENTS + usize::from(client < total % CLIENTS);
            std::thread::spawn(move || (0..share).filter(|_| connect()).count())
        })
        .collect();
    threads.into_iter().map(|thread| thread.join().unwrap()).sum()
}

/// Warms the daemon up with as many connections as are then measured (its allocator's
/// arenas, and what a flush interval's closed connections hold until the flush, reach their
/// high-water mark), then measures its memory across the rest; asserts it came back.
fn assert_flat(daemon: &Daemon, kind: &str, connect: Connect) {
    let total = connections();
    let warmed = churn(&connect, total);
    assert!(warmed > 0, "{kind}: no connection succeeded");
    std::thread::sleep(SETTLE);
    let before = rss_kib(daemon);
    let started = Instant::now();
    let made = churn(&connect, total);
    let took = started.elapsed();
    std::thread::sleep(SETTLE);
    let after = rss_kib(daemon);
    eprintln!(
        "soak {kind}: {made} of {total} connections in {:.1} s; RSS {before} KiB before, {after} KiB after ({:+} KiB)",
        took.as_secs_f64(),
        after as i64 - before as i64
    );
    assert!(made * 10 >= total * 9, "{kind}: only {made} of {total} connections succeeded");
    assert!(
        after <= before + ALLOWED_GROWTH_KIB,
        "{kind}: RSS grew from {before} KiB to {after} KiB across {made} connections ({} B each)",
        (after - before) * 1024 / made.max(1) as u64
    );
}

/// Reads a connection to its end (the daemon closes first, so the TIME_WAIT is its own and
/// this process's ephemeral ports are not used up).
fn read_to_end(stream: &mut impl Read) -> bool {
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).is_ok() && !answer.is_empty()
}

fn http_health(address: String) -> Connect {
    Arc::new(move || {
        let Ok(mut stream) = TcpStream::connect(&address) else { return false };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let request = format!("GET /health HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).is_ok() && read_to_end(&mut stream)
    })
}

fn https_health(address: String, ca: &std::path::Path) -> Connect {
    let mut roots = RootCertStore::empty();
    for certificate in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(certificate.unwrap()).unwrap();
    }
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let config = Arc::new(config);
    Arc::new(move || {
        let Ok(tcp) = TcpStream::connect(&address) else { return false };
        let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
        let name = ServerName::try_from("localhost").unwrap();
        let Ok(tls) = ClientConnection::new(config.clone(), name) else { return false };
        let mut stream = StreamOwned::new(tls, tcp);
        let request = format!("GET /health HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
        if stream.write_all(request.as_bytes()).is_err() {
            return false;
        }
        let mut answer = Vec::new();
        // The daemon may close without a TLS close_notify: what was read is the answer.
        let _ = stream.read_to_end(&mut answer);
        answer.starts_with(b"HTTP/1.1 200")
    })
}

/// A statsd TCP connection with one line, closed as a statsd client closes it (its write
/// side first), then read to the daemon's close. The client's side is the one left in
/// TIME_WAIT: each connection comes from one of 200 loopback addresses (127.0.0.2 on), so
/// 24,000 of them do not use up the ephemeral ports of 127.0.0.1 that other tests connect from.
fn statsd_line(address: String) -> Connect {
    let next = Arc::new(AtomicUsize::new(0));
    let target: SocketAddr = address.parse().unwrap();
    Arc::new(move || {
        let source = Ipv4Addr::new(127, 0, 0, 2 + (next.fetch_add(1, Ordering::Relaxed) % 200) as u8);
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        if socket.bind(&SocketAddr::from((source, 0)).into()).is_err() || socket.connect(&target.into()).is_err() {
            return false;
        }
        let mut stream = TcpStream::from(socket);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        if stream.write_all(b"soak.connections:1|c\n").is_err() || stream.shutdown(Shutdown::Write).is_err() {
            return false;
        }
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).is_ok()
    })
}

/// A management connection: `health`, then `quit`, which the daemon answers by closing.
fn management_health(address: String) -> Connect {
    Arc::new(move || {
        let Ok(mut stream) = TcpStream::connect(&address) else { return false };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        stream.write_all(b"health\nquit\n").is_ok() && read_to_end(&mut stream)
    })
}

/// P1 and the soak of issue 48: HTTP, statsd TCP and management connections by the
/// thousand leave the daemon's memory where it was, and every statsd line is counted.
#[test]
fn p1_connections_of_every_kind_leave_no_memory_behind() {
    let daemon = Daemon::start_process(
        "p1-soak",
        "{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, mgmt_address: '127.0.0.1', \
           http_port: 0, flushInterval: 1000, backends: [] }",
    );
    assert_flat(&daemon, "http", http_health(daemon.address("http")));
    assert_flat(&daemon, "statsd tcp", statsd_line(daemon.address("tcp")));
    assert_flat(&daemon, "management", management_health(daemon.address("mgmt")));
    let lines = (2 * connections()) as f64;
    crate::harness::wait_until(|| daemon.stat("messages.metrics_received") >= lines, "every statsd line counted");
    assert!(daemon.terminate());
}

/// P1 over TLS: each finished HTTPS connection kept ~5 KB too.
#[test]
fn p1_https_connections_leave_no_memory_behind() {
    let dir = temp_dir("p1-pki");
    let ca = TestCa::new(&dir, "soak");
    let (cert, key) = ca.server();
    let daemon = Daemon::start_process(
        "p1-soak-tls",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 1000, backends: [], \
               http: {{ tls: {{ certFile: '{}', keyFile: '{}' }} }} }}",
            cert.display(),
            key.display()
        ),
    );
    assert_flat(&daemon, "https", https_health(daemon.address("http"), &ca.cert));
    assert!(daemon.terminate());
}

/// The soak of issue 48 across a reload storm: a daemon reloaded (SIGHUP) 300 times after 100
/// to warm up, each reload applied before the next, keeps its memory where it was.
#[test]
fn reloads_by_the_hundred_leave_no_memory_behind() {
    let daemon = Daemon::start_process(
        "soak-reloads",
        "{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, flushInterval: 1000, \
           backends: ['store'], store: { dataDir: '$DIR/data' } }",
    );
    let reloaded = |count: u32| {
        for _ in 0..count {
            let before = daemon.stat("messages.config_reloads");
            // SAFETY: a signal to the daemon this test started.
            unsafe { libc::kill(daemon.pid() as libc::pid_t, libc::SIGHUP) };
            crate::harness::wait_until(|| daemon.stat("messages.config_reloads") > before, "a reload applied");
        }
    };
    reloaded(100);
    std::thread::sleep(SETTLE);
    let before = rss_kib(&daemon);
    reloaded(300);
    std::thread::sleep(SETTLE);
    let after = rss_kib(&daemon);
    eprintln!(
        "soak reloads: 300 reloads; RSS {before} KiB before, {after} KiB after ({:+} KiB)",
        after as i64 - before as i64
    );
    assert!(after <= before + ALLOWED_GROWTH_KIB, "RSS grew from {before} KiB to {after} KiB across 300 reloads");
    assert_eq!(daemon.stat("messages.config_reload_failures"), 0.0);
    assert!(daemon.terminate());
}
