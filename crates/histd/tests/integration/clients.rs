//! P3 (issue 48): histd's own tools (`health`, `query`, `top`) against a broken or hostile
//! server at their URL: headers or a body without end, a byte a second, escape sequences.
//! Each must end by itself within its deadline, with exit 1 and a reason, in bounded memory
//! (run under a 2 GB address-space limit: before the fix each one grew to 24 GB, or waited
//! past two minutes), and print nothing that drives the terminal.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

/// What the hostile server sends after reading the request.
#[derive(Debug, Clone, Copy)]
enum Hostile {
    /// One header whose value never ends.
    EndlessHeader,
    /// Header lines without end.
    EndlessHeaders,
    /// `Content-Length: 100000000000`, and a body at loopback speed.
    HugeBody,
    /// Chunks of 64 KiB without end.
    EndlessChunks,
    /// The status line, then a byte a second.
    Drip,
    /// A whole answer whose text carries terminal escape sequences.
    Escapes(u16),
}

impl Hostile {
    fn answer(self, stream: &mut TcpStream) -> std::io::Result<()> {
        let block = vec![b'a'; 64 * 1024];
        let started = Instant::now();
        // Every loop stops by itself: after 40 s, or when the client goes.
        let going = || started.elapsed() < Duration::from_secs(40);
        match self {
            Hostile::EndlessHeader => {
                stream.write_all(b"HTTP/1.1 200 OK\r\nX-A: ")?;
                while going() {
                    stream.write_all(&block)?;
                }
            }
            Hostile::EndlessHeaders => {
                stream.write_all(b"HTTP/1.1 200 OK\r\n")?;
                let lines = b"X-A: b\r\n".repeat(8 * 1024);
                while going() {
                    stream.write_all(&lines)?;
                }
            }
            Hostile::HugeBody => {
                stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000000000\r\n\r\n{\"status\":\"up\",\"x\":\"")?;
                while going() {
                    stream.write_all(&block)?;
                }
            }
            Hostile::EndlessChunks => {
                stream.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")?;
                while going() {
                    stream.write_all(b"10000\r\n")?;
                    stream.write_all(&block)?;
                    stream.write_all(b"\r\n")?;
                }
            }
            Hostile::Drip => {
                stream.write_all(b"HTTP/1.1 200 OK\r\n")?;
                while going() {
                    stream.write_all(b"X")?;
                    std::thread::sleep(Duration::from_secs(1));
                }
            }
            Hostile::Escapes(status) => {
                let body = "{\"status\":\"up\u{1b}]0;pwned\u{7}\u{1b}[2J\",\"error\":\"bad \u{1b}[31mred\u{202e}\"}";
                let head = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                stream.write_all(head.as_bytes())?;
                stream.write_all(body.as_bytes())?;
            }
        }
        Ok(())
    }
}

/// A server on an ephemeral port answering every connection as `hostile` does; its URL.
fn hostile_server(hostile: Hostile) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let _ = hostile.answer(&mut stream);
            });
        }
    });
    url
}

/// `histd ARGS` under a 2 GB address-space limit: its exit code (`None`: killed by a signal,
/// as an allocation past the limit aborts), standard output and error, and how long it took.
fn run_limited(args: &[String]) -> (Option<i32>, String, String, Duration) {
    let started = Instant::now();
    let output = Command::new("sh")
        .args(["-c", "ulimit -v 2000000 && exec \"$0\" \"$@\"", env!("CARGO_BIN_EXE_histd")])
        .args(args)
        .output()
        .unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code(), text(&output.stdout), text(&output.stderr), started.elapsed())
}

fn tool_args(tool: &str, url: &str) -> Vec<String> {
    let args: &[&str] = match tool {
        "health" => &["health", "--url"],
        "query" => &["query", "count(x)", "--url"],
        _ => &["top", "--once", "--interval", "0.1", "--url"],
    };
    args.iter().map(|arg| arg.to_string()).chain([url.to_string()]).collect()
}

#[test]
fn p3_health_query_and_top_read_bounded_answers_within_a_deadline() {
    let hostiles = [
        Hostile::EndlessHeader,
        Hostile::EndlessHeaders,
        Hostile::HugeBody,
        Hostile::EndlessChunks,
        Hostile::Drip,
        Hostile::Escapes(200),
        Hostile::Escapes(400),
        Hostile::Escapes(401),
        Hostile::Escapes(503),
    ];
    let runs: Vec<_> = hostiles
        .iter()
        .flat_map(|&hostile| ["health", "query", "top"].map(move |tool| (hostile, tool)))
        .map(|(hostile, tool)| {
            let url = hostile_server(hostile);
            let run = std::thread::spawn(move || run_limited(&tool_args(tool, &url)));
            (hostile, tool, run)
        })
        .collect();
    for (hostile, tool, run) in runs {
        let (code, stdout, stderr, took) = run.join().unwrap();
        let what = format!("{tool} against {hostile:?} ({took:?}): exit {code:?}\nstdout: {stdout}\nstderr: {stderr}");
        // health's deadline is 10 s, query's and top's 30 s (top polls twice with --once).
        assert!(took < Duration::from_secs(40), "{what}");
        // A 400 is the query's fault as the server tells it (exit 2); anything else is 1.
        let expected = match (tool, hostile) {
            ("query", Hostile::Escapes(400)) => 2,
            _ => 1,
        };
        assert_eq!(code, Some(expected), "{what}");
        assert!(!stdout.contains('\u{1b}') && !stderr.contains('\u{1b}'), "an escape reached the terminal: {what}");
        assert!(!stdout.contains('\u{202e}') && !stderr.contains('\u{202e}'), "{what}");
        let reason = match hostile {
            Hostile::EndlessHeader | Hostile::EndlessHeaders => "too large",
            Hostile::HugeBody | Hostile::EndlessChunks => "longer than",
            Hostile::Drip => "no answer within",
            Hostile::Escapes(401) => "HISTD_TOKEN",
            Hostile::Escapes(_) => "\\u{1b}",
        };
        assert!(stderr.contains(reason) || stdout.contains(reason), "'{reason}' not said: {what}");
    }
}

/// histd's tools reach a daemon that serves HTTPS (issue 49's first finding, through the same
/// client): `--url https://...` with the daemon's CA in `SSL_CERT_FILE`, and `top --config`
/// on a config with `http.tls`; a CA it does not trust is a failed request, not plain HTTP.
#[test]
fn health_query_and_top_reach_an_https_daemon() {
    let dir = crate::harness::temp_dir("cli-https-pki");
    let ca = crate::harness::TestCa::new(&dir, "cli");
    let stranger = crate::harness::TestCa::new(&dir, "stranger");
    let (cert, key) = ca.server();
    let port = crate::harness::free_port();
    let daemon = crate::harness::Daemon::start_process(
        "cli-https",
        &format!(
            "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: {port}, \
               flushInterval: 200, backends: ['store'], store: {{ dataDir: '$DIR/data' }}, \
               http: {{ tls: {{ certFile: '{}', keyFile: '{}' }} }} }}",
            cert.display(),
            key.display()
        ),
    );
    daemon.send_tcp("cli.https.hits:5|c\n");
    let histd = |args: &[&str], trusted: &std::path::Path| {
        let output =
            Command::new(env!("CARGO_BIN_EXE_histd")).args(args).env("SSL_CERT_FILE", trusted).output().unwrap();
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (output.status.code(), text(&output.stdout), text(&output.stderr))
    };
    let url = format!("https://localhost:{port}");
    let (code, stdout, stderr) = histd(&["health", "--url", &url], &ca.cert);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.starts_with("up ("), "{stdout}");
    let counted = || {
        let (code, stdout, _) =
            histd(&["query", "sum(cli.https.hits)", "--from", "-5m", "--format", "csv", "--url", &url], &ca.cert);
        code == Some(0) && stdout.lines().skip(1).any(|line| line.ends_with(",5"))
    };
    assert!(crate::harness::eventually(counted), "the query over https never answered 5");
    let config = daemon.dir.join("config.js");
    let (code, stdout, stderr) =
        histd(&["top", "--once", "--interval", "0.1", "--config", config.to_str().unwrap()], &ca.cert);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("cli.https.hits") || stdout.contains("series"), "{stdout}");
    let (code, _, stderr) = histd(&["health", "--url", &url], &stranger.cert);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("TLS"), "{stderr}");
    assert!(daemon.terminate());
}

/// Issue 49, item 1: the tools speak a guarded HTTPS edge by their own flags. A daemon serves
/// HTTPS (its certificate file carries its chain up to the CA), asks a read token, and takes
/// client certificates from its CA for the read role: `--ca-file` trusts the CA besides the
/// system's, `HISTD_TOKEN` or `--cert`/`--key` prove the caller, `--config` derives scheme,
/// address and CA from the daemon's own config; each failure says what is wrong.
#[test]
fn health_query_and_top_speak_a_guarded_https_edge_by_their_flags() {
    let dir = crate::harness::temp_dir("cli-edge-pki");
    let ca = crate::harness::TestCa::new(&dir, "edge");
    let stranger = crate::harness::TestCa::new(&dir, "edge-stranger");
    let (cert, key) = ca.server();
    let chain = dir.join("chain.pem");
    let chained = [std::fs::read(&cert).unwrap(), std::fs::read(&ca.cert).unwrap()].concat();
    std::fs::write(&chain, chained).unwrap();
    let (client_cert, client_key) = ca.client("reader");
    let (stranger_cert, stranger_key) = stranger.client("reader");
    let tokens = dir.join("read.tokens");
    std::fs::write(&tokens, "person 0123456789abcdef-read\n").unwrap();
    let mut permissions = std::fs::metadata(&tokens).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o600);
    std::fs::set_permissions(&tokens, permissions).unwrap();
    let port = crate::harness::free_port();
    let daemon = crate::harness::Daemon::start_process(
        "cli-edge",
        &format!(
            "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: {port}, \
               flushInterval: 200, backends: ['store'], store: {{ dataDir: '$DIR/data' }}, \
               http: {{ tokens: {{ read: '{}' }}, tls: {{ certFile: '{}', keyFile: '{}', clientCAFile: '{}', \
               clientCertRoles: ['read'] }} }} }}",
            tokens.display(),
            chain.display(),
            key.display(),
            ca.cert.display()
        ),
    );
    daemon.send_tcp("cli.edge.hits:5|c\n");
    let config = daemon.dir.join("config.js");
    let url = format!("https://localhost:{port}");
    let path = |p: &std::path::Path| p.to_str().unwrap().to_string();
    // No system roots: what a tool trusts comes from its flags alone.
    let empty = dir.join("no-roots.pem");
    std::fs::write(&empty, "").unwrap();
    let histd = |args: &[String], token: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_histd"));
        command.args(args).env("SSL_CERT_FILE", &empty).env_remove("HISTD_TOKEN");
        if let Some(token) = token {
            command.env("HISTD_TOKEN", token);
        }
        let output = command.output().unwrap();
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (output.status.code(), text(&output.stdout), text(&output.stderr))
    };
    let args = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    let token = Some("0123456789abcdef-read");
    let with_ca = |tool: &[&str]| [args(tool), args(&["--url", &url, "--ca-file", &path(&ca.cert)])].concat();

    // (arguments, HISTD_TOKEN, exit code, what stdout or stderr says)
    let cases: Vec<(Vec<String>, Option<&str>, i32, &str)> = vec![
        (with_ca(&["health"]), token, 0, "up ("),
        (args(&["health", "--url", &url]), token, 1, "signed by no CA this client trusts"),
        (
            args(&["health", "--url", &url, "--ca-file", &path(&stranger.cert)]),
            token,
            1,
            "signed by no CA this client trusts",
        ),
        (with_ca(&["health"]), None, 1, "HISTD_TOKEN"),
        (with_ca(&["health"]), Some("not-the-token-0000"), 1, "HTTP 403"),
        (
            [with_ca(&["health"]), args(&["--cert", &path(&client_cert), "--key", &path(&client_key)])].concat(),
            None,
            0,
            "up (",
        ),
        (
            [with_ca(&["health"]), args(&["--cert", &path(&stranger_cert), "--key", &path(&stranger_key)])].concat(),
            None,
            1,
            "client certificate",
        ),
        (args(&["health", "--config", &path(&config)]), token, 0, "up ("),
        // The token too: the first of the daemon's http.tokens.read.
        (args(&["health", "--config", &path(&config)]), None, 0, "up ("),
        (args(&["health", "--url", &url, "--cert", &path(&client_cert)]), token, 2, "--key"),
        (args(&["health", "--url", &url, "--ca-file", "/nonexistent/ca.pem"]), token, 2, "/nonexistent/ca.pem"),
        (args(&["top", "--once", "--interval", "0.1", "--config", &path(&config)]), token, 0, "cli.edge.hits"),
        (with_ca(&["query", "sum(cli.edge.hits)", "--from", "-5m", "--format", "csv"]), None, 1, "HISTD_TOKEN"),
    ];
    let counted = || {
        let query = [with_ca(&["query", "sum(cli.edge.hits)", "--from", "-5m", "--format", "csv"])].concat();
        let (code, stdout, _) = histd(&query, token);
        code == Some(0) && stdout.lines().skip(1).any(|line| line.ends_with(",5"))
    };
    assert!(
        crate::harness::eventually(counted),
        "the query over https with --ca-file and HISTD_TOKEN never answered 5"
    );
    for (arguments, token, code, said) in cases {
        let (got, stdout, stderr) = histd(&arguments, token);
        let what = format!("{arguments:?} (token {token:?}): exit {got:?}\n{stdout}{stderr}");
        assert_eq!(got, Some(code), "{what}");
        assert!(stdout.contains(said) || stderr.contains(said), "'{said}' not said: {what}");
    }
    assert!(daemon.terminate());
}
