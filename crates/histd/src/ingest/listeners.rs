//! The metric listeners of a running daemon. All are opened at start; at a reload the ones the
//! new config adds are opened, the ones it drops are drained and closed, and the ones it keeps
//! are not touched (their sockets, readers and connections go on, so nothing in flight is
//! lost); a kept UDP listener takes a new receive buffer and a kept Unix socket a new mode in
//! place. Opening is done apart from starting ([`Ingress::open`], [`Ingress::start`]), so a
//! reload that fails later (a backend that cannot start) closes what it opened and changes
//! nothing.

use crate::clock::lock;
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;

use super::allow::AllowSwitch;
use super::recv::{set_receive_buffer, ReceiveBuffer};
use super::{
    open_udp, report_receive_buffer, serve_streams, spawn_datagram_reader, BatchShape, DatagramSocket, DatagramSource,
    Stopping, StreamContext, UdpSettings,
};
use super::{IngestConfig, Listener, UnixPath};

/// The addresses the metric listeners are bound to (port 0 in the config becomes the port the
/// kernel chose), in config order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listening {
    /// UDP listeners.
    pub udp: Vec<SocketAddr>,
    /// TCP listeners.
    pub tcp: Vec<SocketAddr>,
    /// Unix datagram sockets.
    pub unix_datagram: Vec<PathBuf>,
    /// Unix stream sockets.
    pub unix_stream: Vec<PathBuf>,
}

/// Every metric listener of the daemon, and what starting another one needs.
#[derive(Debug)]
pub struct Ingress {
    /// The `ingest` settings in force at start (they take a restart).
    ingest: IngestConfig,
    /// What stream connections share (and the shards and tap readers use).
    streams: StreamContext,
    running: Mutex<RunningSet>,
}

#[derive(Debug, Default)]
struct RunningSet {
    listeners: Vec<RunningListener>,
    /// Set by [`Ingress::stop_all`]: nothing starts after it.
    stopped: bool,
}

/// One listener at work.
#[derive(Debug)]
struct RunningListener {
    listener: Listener,
    bound: BoundTo,
    /// Datagram readers stop when it is set.
    flag: Arc<AtomicBool>,
    /// Stream listeners stop when it turns true.
    stop: watch::Sender<bool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// UDP sockets (a new receive buffer is applied to them) and the buffer granted.
    udp: Vec<Arc<DatagramSource>>,
    granted: Option<ReceiveBuffer>,
    /// The sources it takes (`allow`), changed in place by a reload.
    allow: Arc<AllowSwitch>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum BoundTo {
    Udp(SocketAddr),
    Tcp(SocketAddr),
    UnixDatagram(PathBuf),
    UnixStream(PathBuf),
}

/// Sockets bound for listeners not started yet: [`Ingress::start`] starts them,
/// [`Opened::close`] gives them up.
#[derive(Debug, Default)]
pub struct Opened {
    sockets: Vec<(usize, Listener, Socket)>,
}

#[derive(Debug)]
enum Socket {
    Udp(Vec<UdpSocket>, ReceiveBuffer),
    UnixDatagram(UnixDatagram),
    Tcp(TcpListener),
    UnixStream(UnixListener),
}

/// What a reload does to the listeners: the new ones opened, the ones dropped named, the kept
/// ones' new settings.
#[derive(Debug, Default)]
pub struct ListenerPlan {
    /// Listeners the new config adds, bound.
    pub opened: Opened,
    retire: Vec<usize>,
    adjust: Vec<(usize, Listener)>,
    receive_buffer: usize,
}

impl ListenerPlan {
    /// Whether it changes anything.
    pub fn is_empty(&self) -> bool {
        self.opened.sockets.is_empty() && self.retire.is_empty() && self.adjust.is_empty()
    }
}

impl Opened {
    /// Closes the sockets (and removes the Unix socket files they made).
    pub fn close(self) {
        for (_, listener, _) in self.sockets {
            if let Listener::UnixDatagram(unix) | Listener::UnixStream(unix) = listener {
                let _ = std::fs::remove_file(unix.path);
            }
        }
    }
}

impl Ingress {
    /// No listener yet; `streams` is what stream connections share.
    pub fn new(ingest: IngestConfig, streams: StreamContext) -> Ingress {
        Ingress { ingest, streams, running: Mutex::default() }
    }

    /// Binds every listener of `listeners` (none may be running yet).
    pub async fn open_all(&self, listeners: &[Listener]) -> anyhow::Result<Opened> {
        check_addresses_free(listeners.iter().enumerate())?;
        let mut opened = Opened::default();
        for (index, listener) in listeners.iter().enumerate() {
            match open(index, listener, self.udp_settings(self.ingest.receive_buffer)).await {
                Ok(socket) => opened.sockets.push((index, listener.clone(), socket)),
                Err(error) => {
                    opened.close();
                    return Err(error);
                }
            }
        }
        Ok(opened)
    }

    /// What changes from the listeners running to `listeners`: the added ones bound (an error
    /// names the `servers` entry; nothing is left open then), the dropped ones and the kept
    /// ones with new settings named. `receive_buffer` is `udpReceiveBufferBytes` in the new
    /// config. Nothing running is touched until [`Ingress::apply`].
    pub async fn plan(&self, listeners: &[Listener], receive_buffer: usize) -> anyhow::Result<ListenerPlan> {
        let running: Vec<Listener> = lock(&self.running).listeners.iter().map(|r| r.listener.clone()).collect();
        let mut kept = vec![false; running.len()];
        let mut plan = ListenerPlan { receive_buffer, ..ListenerPlan::default() };
        let mut added = Vec::new();
        for (index, listener) in listeners.iter().enumerate() {
            let same = (0..running.len()).find(|&r| !kept[r] && same_place(&running[r], listener));
            match same {
                Some(r) => {
                    kept[r] = true;
                    plan.adjust.push((r, listener.clone()));
                }
                None => added.push((index, listener)),
            }
        }
        plan.retire = (0..running.len()).filter(|&r| !kept[r]).collect();
        check_addresses_free(added.iter().copied())?;
        for (index, listener) in added {
            match open(index, listener, self.udp_settings(receive_buffer)).await {
                Ok(socket) => plan.opened.sockets.push((index, listener.clone(), socket)),
                Err(error) => {
                    plan.opened.close();
                    return Err(error);
                }
            }
        }
        Ok(plan)
    }

    /// Carries a plan out: kept listeners take their new settings, new ones start, dropped
    /// ones stop reading (each drains what its socket holds, its connections deliver what
    /// they sent, within `shutdownDrainMs`) and close. Returns what changed, for the log.
    pub async fn apply(&self, plan: ListenerPlan) -> anyhow::Result<Vec<String>> {
        let ListenerPlan { opened, retire, adjust, receive_buffer } = plan;
        let mut changes = Vec::new();
        let retired: Vec<RunningListener> = {
            let mut running = lock(&self.running);
            for (position, listener) in adjust {
                if let Some(change) = running.listeners[position].adjust(listener, receive_buffer)? {
                    changes.push(change);
                }
            }
            let mut retired = Vec::new();
            for (position, listener) in std::mem::take(&mut running.listeners).into_iter().enumerate() {
                match retire.contains(&position) {
                    true => retired.push(listener),
                    false => running.listeners.push(listener),
                }
            }
            retired
        };
        for listener in &retired {
            changes.push(format!("closed {}", listener.bound));
        }
        let started = self.start(opened)?;
        changes.extend(started.into_iter().map(|bound| format!("opened {bound}")));
        stop(retired).await;
        self.publish_receive_buffer();
        Ok(changes)
    }

    /// Starts readers (UDP, Unix datagram) or accept loops (TCP, Unix stream) on opened
    /// sockets; after [`Ingress::stop_all`] they are closed instead.
    pub fn start(&self, opened: Opened) -> anyhow::Result<Vec<String>> {
        let mut running = lock(&self.running);
        if running.stopped {
            opened.close();
            return Ok(Vec::new());
        }
        let mut started = Vec::new();
        for (index, listener, socket) in opened.sockets {
            let listener = self.start_one(index, listener, socket)?;
            started.push(listener.bound.to_string());
            running.listeners.push(listener);
        }
        drop(running);
        self.publish_receive_buffer();
        Ok(started)
    }

    /// Stops every listener (for shutdown) and waits until each has drained and ended.
    pub async fn stop_all(&self) {
        let all = {
            let mut running = lock(&self.running);
            running.stopped = true;
            std::mem::take(&mut running.listeners)
        };
        stop(all).await;
    }

    /// Where the listeners are bound now.
    pub fn listening(&self) -> Listening {
        let mut listening = Listening::default();
        for running in &lock(&self.running).listeners {
            match &running.bound {
                BoundTo::Udp(address) => listening.udp.push(*address),
                BoundTo::Tcp(address) => listening.tcp.push(*address),
                BoundTo::UnixDatagram(path) => listening.unix_datagram.push(path.clone()),
                BoundTo::UnixStream(path) => listening.unix_stream.push(path.clone()),
            }
        }
        listening
    }

    /// The UDP ports listened on (the live view reads their receive queues).
    pub fn udp_ports(&self) -> Vec<u16> {
        let mut ports: Vec<u16> = self.listening().udp.iter().map(SocketAddr::port).collect();
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    fn start_one(&self, index: usize, listener: Listener, socket: Socket) -> anyhow::Result<RunningListener> {
        let context = || format!("cannot listen on {listener:?} (servers[{index}] / port / address, --port)");
        let (stop, stop_receiver) = watch::channel(false);
        let flag = Arc::new(AtomicBool::new(false));
        let stopping =
            Stopping { flag: flag.clone(), drain_limit: self.ingest.shutdown_drain, edges: self.streams.edges.clone() };
        let shape =
            BatchShape { datagrams: self.ingest.batch_datagrams, datagram_bytes: self.ingest.max_datagram_bytes };
        let mut running = RunningListener {
            listener: listener.clone(),
            bound: BoundTo::Udp(SocketAddr::from(([0, 0, 0, 0], 0))),
            flag,
            stop,
            threads: Vec::new(),
            task: None,
            udp: Vec::new(),
            granted: None,
            allow: AllowSwitch::new(listener.allow().clone()),
        };
        let allow = running.allow.clone();
        let reader = |name: String, source: Arc<DatagramSource>| {
            let shard = self.streams.shards.register();
            let (tap, allow) = (self.streams.tap.view(), allow.view());
            spawn_datagram_reader(name, source, shard, stopping.clone(), tap, shape, allow)
        };
        match socket {
            Socket::Udp(sockets, granted) => {
                let bound = sockets[0].local_addr()?;
                report_receive_buffer(bound, granted);
                let readers = self.ingest.readers;
                tracing::info!(proto = %"udp", addr = %bound, readers, mode = ?self.ingest.mode, "listening");
                let sources = sockets
                    .into_iter()
                    .map(|socket| DatagramSource::new(DatagramSocket::Udp(socket)))
                    .collect::<std::io::Result<Vec<_>>>()?;
                for number in 0..readers {
                    let source = sources[number % sources.len()].clone();
                    running.threads.push(reader(format!("udp-{index}-{number}"), source).with_context(context)?);
                }
                running.bound = BoundTo::Udp(bound);
                running.udp = sources;
                running.granted = Some(granted);
            }
            Socket::UnixDatagram(socket) => {
                let Listener::UnixDatagram(unix) = &listener else { unreachable!("opened for its listener") };
                tracing::info!(proto = %"unixgram", addr = %unix.path.display(), "listening");
                let source = DatagramSource::new(DatagramSocket::Unix(socket))?;
                running.threads.push(reader(format!("unixgram-{index}"), source).with_context(context)?);
                running.bound = BoundTo::UnixDatagram(unix.path.clone());
            }
            Socket::Tcp(socket) => {
                let bound = socket.local_addr()?;
                tracing::info!(proto = %"tcp", addr = %bound, "listening");
                let serving = serve_streams(socket, self.streams.clone(), allow.clone(), stop_receiver);
                running.task = Some(tokio::spawn(serving));
                running.bound = BoundTo::Tcp(bound);
            }
            Socket::UnixStream(socket) => {
                let Listener::UnixStream(unix) = &listener else { unreachable!("opened for its listener") };
                tracing::info!(proto = %"unix", addr = %unix.path.display(), "listening");
                let serving = serve_streams(socket, self.streams.clone(), allow.clone(), stop_receiver);
                running.task = Some(tokio::spawn(serving));
                running.bound = BoundTo::UnixStream(unix.path.clone());
            }
        }
        Ok(running)
    }

    /// How UDP listeners are opened: the reader settings in force, `receive_buffer` asked.
    fn udp_settings(&self, receive_buffer: usize) -> UdpSettings {
        UdpSettings { readers: self.ingest.readers, mode: self.ingest.mode, receive_buffer }
    }

    /// The smallest UDP receive buffer granted, as `receive_buffer_bytes` (0 without UDP).
    fn publish_receive_buffer(&self) {
        let running = lock(&self.running);
        let smallest = running.listeners.iter().filter_map(|r| r.granted).map(|g| g.kernel as u64).min();
        self.streams.edges.receive_buffer_bytes.set(smallest.unwrap_or(0));
    }
}

impl RunningListener {
    /// Takes a kept listener's new settings in place: a UDP receive buffer, a socket mode.
    fn adjust(&mut self, new: Listener, default_buffer: usize) -> anyhow::Result<Option<String>> {
        let allow_changed = self.listener.allow() != new.allow();
        if allow_changed {
            self.allow.set(new.allow().clone());
        }
        let change = match (&self.listener, &new) {
            (Listener::Udp(_, old, _), Listener::Udp(address, buffer, _)) => {
                let asked = buffer.unwrap_or(default_buffer);
                if old.is_some() == buffer.is_some() && self.granted.is_some_and(|g| g.asked == asked) {
                    None
                } else {
                    let mut smallest: Option<ReceiveBuffer> = None;
                    for source in &self.udp {
                        let granted = set_receive_buffer(source.socket().fd(), asked)
                            .with_context(|| format!("cannot set the receive buffer of {address}"))?;
                        smallest =
                            Some(smallest.map_or(granted, |s| if granted.kernel < s.kernel { granted } else { s }));
                    }
                    if let Some(granted) = smallest {
                        report_receive_buffer(*address, granted);
                        self.granted = Some(granted);
                    }
                    Some(format!("receive buffer of {} now {asked} bytes", self.bound))
                }
            }
            (
                Listener::UnixDatagram(old) | Listener::UnixStream(old),
                Listener::UnixDatagram(unix) | Listener::UnixStream(unix),
            ) if old.mode != unix.mode => {
                set_socket_mode(unix)?;
                Some(format!("mode of {} now {:o}", self.bound, unix.mode.unwrap_or(0)))
            }
            _ => None,
        };
        let change = match (change, allow_changed) {
            (change, false) => change,
            (None, true) => Some(format!("sources allowed on {} now {:?}", self.bound, new.allow().effective())),
            (Some(change), true) => Some(format!("{change}; sources allowed now {:?}", new.allow().effective())),
        };
        self.listener = new;
        Ok(change)
    }
}

impl std::fmt::Display for BoundTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BoundTo::Udp(address) => write!(f, "udp {address}"),
            BoundTo::Tcp(address) => write!(f, "tcp {address}"),
            BoundTo::UnixDatagram(path) => write!(f, "unixgram {}", path.display()),
            BoundTo::UnixStream(path) => write!(f, "unix {}", path.display()),
        }
    }
}

/// Whether two entries are the same listener (protocol and address or path; their settings
/// may differ).
fn same_place(a: &Listener, b: &Listener) -> bool {
    match (a, b) {
        (Listener::Udp(a, ..), Listener::Udp(b, ..)) | (Listener::Tcp(a, _), Listener::Tcp(b, _)) => a == b,
        (Listener::UnixDatagram(a), Listener::UnixDatagram(b)) | (Listener::UnixStream(a), Listener::UnixStream(b)) => {
            a.path == b.path
        }
        _ => false,
    }
}

/// Binds one listener's socket(s); a UDP listener gets `readers` sockets in reuseport mode.
async fn open(index: usize, listener: &Listener, udp: UdpSettings) -> anyhow::Result<Socket> {
    let context = || format!("cannot listen on {listener:?} (servers[{index}] / port / address, --port)");
    Ok(match listener {
        Listener::Udp(address, buffer, _) => {
            let settings = UdpSettings { receive_buffer: buffer.unwrap_or(udp.receive_buffer), ..udp };
            let (sockets, granted) = open_udp(*address, settings).with_context(context)?;
            Socket::Udp(sockets, granted)
        }
        Listener::UnixDatagram(unix) => {
            let socket = UnixDatagram::bind(prepare_socket_file(unix)?).with_context(context)?;
            set_socket_mode(unix)?;
            Socket::UnixDatagram(socket)
        }
        Listener::Tcp(address, _) => Socket::Tcp(TcpListener::bind(address).await.with_context(context)?),
        Listener::UnixStream(unix) => {
            let socket = UnixListener::bind(prepare_socket_file(unix)?).with_context(context)?;
            set_socket_mode(unix)?;
            Socket::UnixStream(socket)
        }
    })
}

/// Tells each listener to stop and waits for its readers to drain their sockets and its
/// connections to finish; removes their socket files.
async fn stop(listeners: Vec<RunningListener>) {
    for listener in &listeners {
        listener.flag.store(true, Ordering::Relaxed);
        let _ = listener.stop.send(true);
    }
    for listener in listeners {
        let threads = listener.threads;
        let _ = tokio::task::spawn_blocking(move || threads.into_iter().for_each(|t| drop(t.join()))).await;
        if let Some(task) = listener.task {
            let _ = task.await;
        }
        if let BoundTo::UnixDatagram(path) | BoundTo::UnixStream(path) = listener.bound {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Checks UDP and TCP addresses before anything is bound, so that a start or reload that
/// cannot succeed takes nothing: a UDP port is bound with `SO_REUSEPORT`, which the kernel
/// lets another process's reuseport socket share, so a second histd would silently take half
/// the datagrams (and one that failed later, on a TCP port, took some before it exited). A
/// port another process holds is refused, naming the key.
fn check_addresses_free<'a>(listeners: impl Iterator<Item = (usize, &'a Listener)>) -> anyhow::Result<()> {
    for (index, listener) in listeners {
        let in_use = |proto: &str, address: &SocketAddr, error: std::io::Error| {
            anyhow::anyhow!(
                "cannot listen on {proto} {address} (servers[{index}] / port / address, --port): {error}; \
                 another process holds it (histd does not share a port)"
            )
        };
        match listener {
            Listener::Udp(address, ..) if address.port() != 0 => {
                drop(std::net::UdpSocket::bind(address).map_err(|e| in_use("UDP", address, e))?);
            }
            Listener::Tcp(address, _) if address.port() != 0 => {
                drop(std::net::TcpListener::bind(address).map_err(|e| in_use("TCP", address, e))?);
            }
            _ => {}
        }
    }
    Ok(())
}

/// Removes a stale socket file (never any other kind of file) so the path can be bound.
fn prepare_socket_file(unix: &UnixPath) -> anyhow::Result<&Path> {
    use std::os::unix::fs::FileTypeExt;
    if let Ok(metadata) = std::fs::symlink_metadata(&unix.path) {
        anyhow::ensure!(
            metadata.file_type().is_socket(),
            "{} exists and is not a socket (servers[].socket)",
            unix.path.display()
        );
        std::fs::remove_file(&unix.path)
            .with_context(|| format!("cannot remove the stale socket {}", unix.path.display()))?;
    }
    Ok(&unix.path)
}

fn set_socket_mode(unix: &UnixPath) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(mode) = unix.mode {
        std::fs::set_permissions(&unix.path, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("cannot chmod {} to {mode:o} (servers[].socket_mod)", unix.path.display()))?;
    }
    Ok(())
}
