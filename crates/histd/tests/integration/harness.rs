//! Starts daemons (in this process through `histd::start`, or as the real binary where a
//! test needs signals, standard output or its own process) on 127.0.0.1 ephemeral ports, and
//! a test carbon.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// How long any wait in a test may take before it fails.
pub const WAIT: Duration = Duration::from_secs(15);

/// A running daemon.
pub struct Daemon {
    mode: Mode,
    /// Bound addresses by protocol (`udp`, `tcp`, `mgmt`, `http`, `unix`, `unixgram`), in
    /// config order.
    pub addresses: BTreeMap<String, Vec<String>>,
    /// Its temporary directory (config file, sockets).
    pub dir: PathBuf,
}

enum Mode {
    /// `histd::start` on a runtime of its own; `None` once stopped.
    InProcess { runtime: Box<tokio::runtime::Runtime>, running: Option<histd::Running> },
    /// The real binary, and what it printed (its log after `ready` in `stderr`).
    Process { child: Child, stdout: Arc<Mutex<String>>, stderr: Arc<Mutex<String>> },
}

/// A fresh temporary directory for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("histd-test-{}-{name}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl Daemon {
    /// Starts a daemon in this process with `config` (a JS object literal; `$DIR` stands for
    /// the test's directory); returns once it is ready.
    pub fn start(name: &str, config: &str) -> Daemon {
        Daemon::try_start(name, config).unwrap_or_else(|error| panic!("{name}: {error}"))
    }

    /// As [`Daemon::start`], or the error `histd::start` gave.
    pub fn try_start(name: &str, config: &str) -> Result<Daemon, String> {
        let dir = temp_dir(name);
        let config = histd::Config::from_text(&config.replace("$DIR", dir.to_str().unwrap()))
            .unwrap_or_else(|error| panic!("{name}: {error:#}"));
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let running = runtime.block_on(histd::start(config)).map_err(|error| format!("{error:#}"))?;
        let addresses = addresses_of(&running.bound);
        Ok(Daemon { mode: Mode::InProcess { runtime: Box::new(runtime), running: Some(running) }, addresses, dir })
    }

    /// Starts `histd run` (the real binary) with `config`, and waits until it is ready.
    pub fn start_process(name: &str, config: &str) -> Daemon {
        Daemon::start_process_limited(name, config, None)
    }

    /// As [`Daemon::start_process`], with at most `open_files` file descriptors when given.
    pub fn start_process_limited(name: &str, config: &str, open_files: Option<u32>) -> Daemon {
        Daemon::start_process_with(name, config, open_files, &[])
    }

    /// As [`Daemon::start_process`], with `environment` set for the process (what a test must
    /// not set in its own, shared process: `SSL_CERT_FILE`).
    pub fn start_process_with_environment(name: &str, config: &str, environment: &[(&str, &str)]) -> Daemon {
        Daemon::start_process_with(name, config, None, environment)
    }

    fn start_process_with(name: &str, config: &str, open_files: Option<u32>, environment: &[(&str, &str)]) -> Daemon {
        let dir = temp_dir(name);
        let path = dir.join("config.js");
        std::fs::write(&path, config.replace("$DIR", dir.to_str().unwrap())).unwrap();
        let binary = env!("CARGO_BIN_EXE_histd");
        let mut command = match open_files {
            None => Command::new(binary),
            Some(limit) => {
                let mut shell = Command::new("sh");
                shell.args(["-c", &format!("ulimit -n {limit} && exec \"$0\" \"$@\""), binary]);
                shell
            }
        };
        let mut child = command
            .envs(environment.iter().copied())
            .args(["run", "--config", path.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("histd starts");
        let stdout = Arc::new(Mutex::new(String::new()));
        let mut out = child.stdout.take().unwrap();
        let sink = stdout.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 8192];
            while let Ok(n) = out.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let addresses = read_until_ready(&mut child, stderr.clone());
        Daemon { mode: Mode::Process { child, stdout, stderr }, addresses, dir }
    }

    /// The process id of a daemon started with [`Daemon::start_process`].
    pub fn pid(&self) -> u32 {
        match &self.mode {
            Mode::Process { child, .. } => child.id(),
            Mode::InProcess { .. } => panic!("an in-process daemon has no process of its own"),
        }
    }

    /// The first address bound for `proto`.
    pub fn address(&self, proto: &str) -> String {
        self.addresses.get(proto).and_then(|a| a.first()).cloned().unwrap_or_else(|| panic!("no {proto} listener"))
    }

    /// Sends one UDP datagram to the first UDP listener.
    pub fn send_udp(&self, payload: &str) {
        let target: SocketAddr = self.address("udp").parse().unwrap();
        let bind = if target.is_ipv6() { "[::1]:0" } else { "127.0.0.1:0" };
        let socket = UdpSocket::bind(bind).unwrap();
        socket.send_to(payload.as_bytes(), target).unwrap();
    }

    /// Sends `payload` on a new TCP connection to the first TCP listener, then closes it.
    pub fn send_tcp(&self, payload: &str) {
        let mut stream = TcpStream::connect(self.address("tcp")).unwrap();
        stream.write_all(payload.as_bytes()).unwrap();
    }

    /// Sends management `command` (a line) and reads the reply until `done` says it is whole.
    pub fn admin_until(&self, command: &str, done: impl Fn(&str) -> bool) -> String {
        let mut stream = TcpStream::connect(self.address("mgmt")).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        stream.write_all(command.as_bytes()).unwrap();
        let mut reply = Vec::new();
        let mut buffer = [0u8; 4096];
        while !done(&String::from_utf8_lossy(&reply)) {
            match stream.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => reply.extend_from_slice(&buffer[..n]),
            }
        }
        String::from_utf8(reply).unwrap()
    }

    /// Sends a command whose reply ends with `END\n\n`.
    pub fn admin(&self, command: &str) -> String {
        self.admin_until(&format!("{command}\n"), |r| r.ends_with("END\n\n"))
    }

    /// One value from the management `stats` reply.
    pub fn stat(&self, name: &str) -> f64 {
        let reply = self.admin("stats");
        let prefix = format!("{name}: ");
        let line = reply.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no {name} in {reply}"));
        line[prefix.len()..].parse().unwrap()
    }

    /// Waits until the daemon has received `lines` lines in all.
    pub fn wait_received(&self, lines: u64) {
        wait_until(|| self.stat("messages.metrics_received") as u64 >= lines, "lines to arrive");
    }

    /// What a daemon started with [`Daemon::start_process`] printed on standard output so far.
    pub fn stdout(&self) -> String {
        match &self.mode {
            Mode::Process { stdout, .. } => stdout.lock().unwrap().clone(),
            Mode::InProcess { .. } => panic!("an in-process daemon shares the test's standard output"),
        }
    }

    /// What a daemon started with [`Daemon::start_process`] logged after it was ready.
    pub fn stderr(&self) -> String {
        match &self.mode {
            Mode::Process { stderr, .. } => stderr.lock().unwrap().clone(),
            Mode::InProcess { .. } => panic!("an in-process daemon logs nowhere"),
        }
    }

    /// `GET path` on the HTTP API: status and body.
    pub fn http_get(&self, path: &str) -> (u16, String) {
        http(&self.address("http"), "GET", path, &[], "")
    }

    /// `GET path` answered 200 with JSON.
    pub fn http_json(&self, path: &str) -> serde_json::Value {
        let (status, body) = self.http_get(path);
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// Sends SIGKILL to a daemon started with [`Daemon::start_process`] and waits for the
    /// exit: no shutdown, no final flush.
    pub fn kill(mut self) {
        let Mode::Process { child, .. } = &mut self.mode else { panic!("only a process can be killed") };
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Stops the daemon as SIGTERM does (a process gets SIGTERM) and waits for it; true when
    /// it stopped cleanly (a process: exit status 0).
    pub fn terminate(mut self) -> bool {
        match &mut self.mode {
            Mode::InProcess { runtime, running } => {
                let running = running.take().expect("running");
                runtime.block_on(async { tokio::time::timeout(WAIT, running.stop()).await }).is_ok()
            }
            Mode::Process { child, .. } => terminate_process(child),
        }
    }
}

fn terminate_process(child: &mut Child) -> bool {
    let pid = child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            if !status.success() {
                eprintln!("histd exited with {status} after SIGTERM; stderr after ready is discarded");
            }
            return status.success();
        }
        assert!(started.elapsed() < WAIT, "histd did not stop after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        match &mut self.mode {
            Mode::InProcess { runtime, running } => {
                if let Some(running) = running.take() {
                    let _ = runtime.block_on(async { tokio::time::timeout(WAIT, running.stop()).await });
                }
            }
            Mode::Process { child, .. } => {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn addresses_of(bound: &histd::Bound) -> BTreeMap<String, Vec<String>> {
    let listening = &bound.listening;
    let text = |paths: &[PathBuf]| paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>();
    let mut addresses = BTreeMap::new();
    addresses.insert("udp".to_string(), listening.udp.iter().map(ToString::to_string).collect());
    addresses.insert("tcp".to_string(), listening.tcp.iter().map(ToString::to_string).collect());
    addresses.insert("unixgram".to_string(), text(&listening.unix_datagram));
    addresses.insert("unix".to_string(), text(&listening.unix_stream));
    addresses.insert("mgmt".to_string(), vec![bound.mgmt.to_string()]);
    addresses.insert("http".to_string(), bound.http.iter().map(ToString::to_string).collect());
    addresses.retain(|_, list: &mut Vec<String>| !list.is_empty());
    addresses
}

/// Reads the process's log until it says `ready` (or [`WAIT`] passes): the addresses of its
/// `listening` lines.
fn read_until_ready(child: &mut Child, after_ready: Arc<Mutex<String>>) -> BTreeMap<String, Vec<String>> {
    let stderr = child.stderr.take().unwrap();
    let (lines_sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if lines_sender.send(line).is_err() {
                break;
            }
        }
    });
    let mut addresses: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut log = String::new();
    let deadline = Instant::now() + WAIT;
    while let Ok(line) = lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        log.push_str(&line);
        log.push('\n');
        if line.contains(" listening ") {
            let field = |name: &str| line.split(' ').find_map(|w| w.strip_prefix(name)).unwrap().to_string();
            addresses.entry(field("proto=")).or_default().push(field("addr="));
        }
        if line.contains(" ready ") {
            std::thread::spawn(move || {
                lines.iter().for_each(|line| after_ready.lock().unwrap().push_str(&(line + "\n")))
            });
            return addresses;
        }
    }
    panic!("histd was not ready within {WAIT:?}:\n{log}");
}

/// Polls `condition` until it holds or [`WAIT`] passes.
pub fn wait_until(condition: impl FnMut() -> bool, what: &str) {
    assert!(eventually(condition), "timed out waiting for {what}");
}

/// The batch files a forward spool directory holds (none when it cannot be read).
pub fn spooled_batches(dir: &Path) -> usize {
    let batch = |entry: &std::fs::DirEntry| entry.file_name().to_string_lossy().ends_with(".batch");
    std::fs::read_dir(dir).map_or(0, |entries| entries.flatten().filter(batch).count())
}

/// Polls `condition` until it holds (true) or [`WAIT`] passes (false), for a test that says
/// more than "timed out" when it does not.
pub fn eventually(condition: impl FnMut() -> bool) -> bool {
    within(WAIT, condition)
}

/// Polls `condition` until it holds (true) or `limit` passes (false).
pub fn within(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while !condition() {
        if started.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// One flush as carbon received it: name → value, and the timestamp.
#[derive(Debug, Clone, Default)]
pub struct Flush {
    /// Values by metric name.
    pub values: BTreeMap<String, String>,
    /// Lines in arrival order.
    pub lines: Vec<String>,
}

impl Flush {
    /// The value of `name`, if sent.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }
}

/// A test carbon: a plaintext listener collecting lines, split into flushes on the last line
/// histd writes per flush (`graphiteStats.flush_length`).
pub struct Carbon {
    /// Its port.
    pub port: u16,
    lines: Arc<Mutex<Vec<(String, Instant)>>>,
    running: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Carbon {
    /// Listens on an ephemeral port.
    pub fn start() -> Carbon {
        Carbon::start_on(0, Arc::default())
    }

    /// Listens on `port` (one another carbon just left).
    pub fn start_on_port(port: u16) -> Carbon {
        Carbon::start_on(port, Arc::default())
    }

    fn start_on(port: u16, lines: Arc<Mutex<Vec<(String, Instant)>>>) -> Carbon {
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let running = Arc::new(AtomicBool::new(true));
        let thread = {
            let (lines, running) = (lines.clone(), running.clone());
            std::thread::spawn(move || accept_loop(listener, lines, running))
        };
        Carbon { port, lines, running, thread: Some(thread) }
    }

    /// Closes the listener and every connection.
    pub fn stop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }

    /// Listens again on the same port, keeping what was received.
    pub fn restart(&mut self) {
        self.stop();
        *self = Carbon::start_on(self.port, self.lines.clone());
    }

    /// Every line received so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().iter().map(|(line, _)| line.clone()).collect()
    }

    /// When each complete flush arrived (its last line).
    pub fn flush_arrivals(&self) -> Vec<Instant> {
        let lines = self.lines.lock().unwrap();
        lines.iter().filter(|(line, _)| line.contains("graphiteStats.flush_length")).map(|(_, at)| *at).collect()
    }

    /// The complete flushes received so far.
    pub fn flushes(&self) -> Vec<Flush> {
        let mut flushes = Vec::new();
        let mut current = Flush::default();
        let mut stamped = String::new();
        for line in self.lines() {
            let mut parts = line.split(' ');
            let (name, value) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
            let time = parts.next().unwrap_or_default();
            if !current.lines.is_empty() && (time != stamped || current.values.contains_key(name)) {
                // A global's late interval: lines without the timing and `flush_length` lines
                // of a flush, of their own second (or of the next flush's, a name again).
                flushes.push(std::mem::take(&mut current));
            }
            stamped = time.to_string();
            current.values.insert(name.to_string(), value.to_string());
            current.lines.push(line.clone());
            if name.contains("graphiteStats.flush_length") {
                flushes.push(std::mem::take(&mut current));
            }
        }
        flushes
    }

    /// The sum of `name`'s values over every complete flush received so far.
    pub fn total(&self, name: &str) -> f64 {
        self.flushes().iter().filter_map(|f| f.get(name)).map(|v| v.parse::<f64>().unwrap()).sum()
    }

    /// Waits for a flush for which `wanted` holds, and returns it.
    pub fn wait_flush(&self, wanted: impl Fn(&Flush) -> bool) -> Flush {
        let mut found = None;
        wait_until(
            || {
                found = self.flushes().into_iter().find(|f| wanted(f));
                found.is_some()
            },
            "a matching flush",
        );
        found.unwrap()
    }
}

impl Drop for Carbon {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(listener: TcpListener, lines: Arc<Mutex<Vec<(String, Instant)>>>, running: Arc<AtomicBool>) {
    let mut connections: Vec<(TcpStream, Vec<u8>)> = Vec::new();
    while running.load(Ordering::Relaxed) {
        if let Ok((stream, _)) = listener.accept() {
            stream.set_nonblocking(true).unwrap();
            connections.push((stream, Vec::new()));
        }
        let mut buffer = [0u8; 65536];
        connections.retain_mut(|(stream, pending)| loop {
            match stream.read(&mut buffer) {
                Ok(0) => return false,
                Ok(n) => {
                    pending.extend_from_slice(&buffer[..n]);
                    while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = pending.drain(..=end).collect();
                        let text = String::from_utf8_lossy(&line[..end]).into_owned();
                        lines.lock().unwrap().push((text, Instant::now()));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                Err(_) => return false,
            }
        });
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A config for a test: loopback ports chosen by the kernel, graphite to `carbon`, plus `extra`
/// keys (JS object literal body, with a trailing comma).
pub fn config(carbon: &Carbon, flush_ms: u64, extra: &str) -> String {
    format!(
        "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, graphiteHost: '127.0.0.1', graphitePort: {}, \
         flushInterval: {flush_ms}, {extra} }}",
        carbon.port
    )
}

/// Asserts two multi-line texts are equal; on a difference, fails with the lines that differ
/// (`-` wanted, `+` got, with their line numbers) instead of two escaped strings.
pub fn assert_text_eq(got: &str, want: &str) {
    if got == want {
        return;
    }
    let (got_lines, want_lines): (Vec<&str>, Vec<&str>) = (got.split('\n').collect(), want.split('\n').collect());
    let mut diff = String::new();
    for line in 0..got_lines.len().max(want_lines.len()) {
        let (g, w) = (got_lines.get(line), want_lines.get(line));
        if g != w {
            if let Some(w) = w {
                diff.push_str(&format!("{:>4} - {w:?}\n", line + 1));
            }
            if let Some(g) = g {
                diff.push_str(&format!("{:>4} + {g:?}\n", line + 1));
            }
        }
    }
    panic!("texts differ (- wanted, + got):\n{diff}");
}

#[test]
fn assert_text_eq_shows_the_lines_that_differ() {
    assert_text_eq("a\nb\n", "a\nb\n");
    let failure = std::panic::catch_unwind(|| assert_text_eq("a\nB\nc", "a\nb")).unwrap_err();
    let message = failure.downcast_ref::<String>().unwrap();
    assert!(message.ends_with("   2 - \"b\"\n   2 + \"B\"\n   3 + \"c\"\n"), "{message}");
}

/// One HTTP/1.0 request (so no server answers in chunks) with `headers` (`"Name: value\r\n"`
/// lines): status and body.
pub fn http(address: &str, method: &str, path: &str, body: &[u8], headers: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).unwrap_or_else(|e| panic!("{address}: {e}"));
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let head =
        format!("{method} {path} HTTP/1.0\r\nHost: {address}\r\nContent-Length: {}\r\n{headers}\r\n", body.len());
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0), body.to_string())
}

/// `text` percent-encoded for a query string.
pub fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A port nothing listens on now (bound and released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The resident memory of a daemon started with [`Daemon::start_process`], in KiB.
pub fn rss_kib(daemon: &Daemon) -> u64 {
    status_kib(daemon, "VmRSS:")
}

/// The most resident memory the daemon has had so far, in KiB.
pub fn peak_rss_kib(daemon: &Daemon) -> u64 {
    status_kib(daemon, "VmHWM:")
}

fn status_kib(daemon: &Daemon, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", daemon.pid())).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// One request an [`HttpCapture`] received.
#[derive(Debug, Clone)]
pub struct Captured {
    /// `PUT`, `POST`...
    pub method: String,
    /// The path and query.
    pub path: String,
    /// Header names (lower case) and values.
    pub headers: Vec<(String, String)>,
    /// The body as sent.
    pub body: Vec<u8>,
}

impl Captured {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// An HTTP receiver of the test's on 127.0.0.1: every request kept, answered 200 (HTTP/1.1,
/// connections kept alive).
pub struct HttpCapture {
    /// `127.0.0.1:port`.
    pub address: String,
    requests: Arc<Mutex<Vec<Captured>>>,
}

impl HttpCapture {
    /// Starts listening.
    pub fn start() -> HttpCapture {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let kept = kept.clone();
                std::thread::spawn(move || capture(stream, &kept));
            }
        });
        HttpCapture { address, requests }
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Captured> {
        self.requests.lock().unwrap().clone()
    }
}

/// Keeps each request of one connection and answers it 200.
fn capture(stream: TcpStream, kept: &Mutex<Vec<Captured>>) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = request_line.split_whitespace();
        let (method, path) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
            }
        }
        let length = headers.iter().find(|(n, _)| n == "content-length").map_or(0, |(_, v)| v.parse().unwrap());
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        kept.lock().unwrap().push(Captured { method, path, headers, body });
        writer.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").unwrap();
    }
}

/// A tool `scripts/test` prepares: the path in the environment variable `env` when set, else
/// `relative` to the workspace root (`target/tools/...`); a missing one fails the test saying
/// how `scripts/test` makes it.
pub fn prepared_tool(env: &str, relative: &str, how: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env) {
        return PathBuf::from(path);
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative);
    assert!(path.exists(), "{} is missing: scripts/test makes it ({how})", path.display());
    path
}

/// A certificate authority for a test, made with Debian's `openssl` (P-256 keys) in a
/// directory, and the certificates it issues.
pub struct TestCa {
    /// The CA's certificate (PEM): what a peer trusts.
    pub cert: PathBuf,
    key: PathBuf,
    dir: PathBuf,
    name: String,
}

impl TestCa {
    /// A new CA named `name` in `dir`.
    pub fn new(dir: &Path, name: &str) -> TestCa {
        let ca = TestCa {
            cert: dir.join(format!("{name}-ca.pem")),
            key: dir.join(format!("{name}-ca.key")),
            dir: dir.to_path_buf(),
            name: name.to_string(),
        };
        let subject = format!("/CN={name} test CA");
        ca.openssl(
            &[
                &["req", "-x509"],
                &NEW_KEY[..],
                &[&text(&ca.key), "-out", &text(&ca.cert), "-days", "2", "-subj", &subject],
            ]
            .concat(),
        );
        ca
    }

    /// A certificate and key for `localhost` and 127.0.0.1 (a server).
    pub fn server(&self) -> (PathBuf, PathBuf) {
        self.issue(
            "localhost",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
        )
    }

    /// A client certificate and key whose subject's CN is `name`.
    pub fn client(&self, name: &str) -> (PathBuf, PathBuf) {
        self.issue(name, "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    }

    fn issue(&self, common_name: &str, extensions: &str) -> (PathBuf, PathBuf) {
        let path = |file: &str| self.dir.join(format!("{}-{common_name}-{file}", self.name));
        let (cert, key, request, config) = (path("cert.pem"), path("key.pem"), path("csr.pem"), path("ext.cnf"));
        std::fs::write(&config, extensions).unwrap();
        let subject = format!("/CN={common_name}");
        self.openssl(&[&["req"], &NEW_KEY[..], &[&text(&key), "-out", &text(&request), "-subj", &subject]].concat());
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &text(&request),
            "-CA",
            &text(&self.cert),
            "-CAkey",
            &text(&self.key),
            "-CAcreateserial",
            "-out",
            &text(&cert),
            "-days",
            "2",
            "-extfile",
            &text(&config),
        ]);
        (cert, key)
    }

    fn openssl(&self, args: &[&str]) {
        let output = Command::new("openssl").args(args).current_dir(&self.dir).output().expect("openssl runs");
        assert!(output.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    }
}

/// `openssl req`'s arguments for a new P-256 key, unencrypted, written to the path after them.
const NEW_KEY: [&str; 6] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout"];

fn text(path: &Path) -> String {
    path.to_str().unwrap().to_string()
}
