//! Real external systems, from Debian's packages (`scripts/test` installs them): a
//! VictoriaMetrics shared by the tests of this binary, started once, and instances a test owns.
//! A shared service dies with the test process (`PR_SET_PDEATHSIG` on a thread that lives as
//! long as the process); an owned one when its handle drops.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Instant;

use super::harness::{free_port, http, temp_dir, url_encode, WAIT};

/// A service listening on 127.0.0.1.
pub struct Service {
    /// `127.0.0.1:port`.
    pub address: String,
    /// Its data directory (kept for a look after a failure).
    _dir: PathBuf,
    child: Option<Child>,
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn binary(name: &str, package: &str) -> PathBuf {
    let path = PathBuf::from("/usr/bin").join(name);
    assert!(path.exists(), "{name} is missing: scripts/test installs it (apt-get install {package})");
    path
}

/// `victoria-metrics` with its own data directory; queries see samples at once.
fn victoria_metrics_command(port: u16, dir: &std::path::Path) -> Command {
    let mut command = Command::new(binary("victoria-metrics", "victoria-metrics"));
    command
        .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
        .arg(format!("-storageDataPath={}", dir.display()))
        .arg("-search.latencyOffset=0s")
        .arg("-search.disableCache")
        .arg("-loggerLevel=ERROR")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

/// The VictoriaMetrics every test of this binary may write to (each with its own names).
pub fn shared_victoria_metrics() -> &'static Service {
    static SHARED: OnceLock<Service> = OnceLock::new();
    SHARED.get_or_init(|| {
        let (port, dir) = (free_port(), temp_dir("victoria-metrics"));
        spawn_for_the_process_lifetime(victoria_metrics_command(port, &dir));
        let service = Service { address: format!("127.0.0.1:{port}"), _dir: dir, child: None };
        service.wait_ready("/health");
        service
    })
}

/// A VictoriaMetrics of the caller's, on `port`, stopped when dropped.
pub fn own_victoria_metrics(port: u16) -> Service {
    let dir = temp_dir("victoria-metrics-own");
    let child = victoria_metrics_command(port, &dir).spawn().expect("victoria-metrics starts");
    let service = Service { address: format!("127.0.0.1:{port}"), _dir: dir, child: Some(child) };
    service.wait_ready("/health");
    service
}

/// A Prometheus of the caller's scraping `targets` every second, with the remote-write
/// receiver and native histograms on, stopped when dropped.
pub fn own_prometheus(targets: &[String]) -> Service {
    let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
    let config = format!(
        "global: {{ scrape_interval: 1s, evaluation_interval: 1s }}\n\
         scrape_configs:\n  - job_name: histd\n    static_configs: [ {{ targets: [{}] }} ]\n",
        targets.join(", ")
    );
    let flags = ["--storage.tsdb.path=", "--web.enable-remote-write-receiver", "--enable-feature=native-histograms"];
    own_prometheus_project("prometheus", &config, &flags)
}

/// An Alertmanager of the caller's (one route to a receiver that sends nothing on: the test
/// reads the alerts through its API), stopped when dropped.
pub fn own_alertmanager() -> Service {
    let config = "route: { receiver: keep, group_wait: 1s, group_interval: 1s }\nreceivers: [ { name: keep } ]\n";
    own_prometheus_project("prometheus-alertmanager", config, &["--storage.path=", "--cluster.listen-address="])
}

/// A program of the Prometheus project (Debian package and command `name`) with `config` as
/// its config file, listening on a free port, its flags `flags` (one ending in `path=` gets
/// its data directory), stopped when dropped; returned once it answers `/-/ready`.
fn own_prometheus_project(name: &str, config: &str, flags: &[&str]) -> Service {
    let (port, dir) = (free_port(), temp_dir(name));
    std::fs::write(dir.join("config.yml"), config).unwrap();
    let mut command = Command::new(binary(name, name));
    command
        .arg(format!("--config.file={}", dir.join("config.yml").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=error");
    for flag in flags {
        match flag.ends_with("path=") {
            true => command.arg(format!("{flag}{}", dir.join("data").display())),
            false => command.arg(flag),
        };
    }
    let child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("it starts");
    let service = Service { address: format!("127.0.0.1:{port}"), _dir: dir, child: Some(child) };
    service.wait_ready("/-/ready");
    service
}

/// An InfluxDB 1.x of the caller's (`influxd`, Debian's `influxdb`) on `port`, its data in
/// `dir` (a second one started on the same `dir` and `port` finds the first one's data),
/// stopped when dropped; returned once it answers `/ping`.
pub fn own_influxdb(dir: &std::path::Path, port: u16) -> Service {
    let config = format!(
        "reporting-disabled = true\nbind-address = \"127.0.0.1:{rpc}\"\n\
         [meta]\n  dir = \"{dir}/meta\"\n\
         [data]\n  dir = \"{dir}/data\"\n  wal-dir = \"{dir}/wal\"\n  query-log-enabled = false\n\
         [http]\n  bind-address = \"127.0.0.1:{port}\"\n  log-enabled = false\n\
         [logging]\n  level = \"error\"\n[monitor]\n  store-enabled = false\n\
         [continuous_queries]\n  enabled = false\n",
        rpc = free_port(),
        dir = dir.display()
    );
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("influxdb.conf"), config).unwrap();
    let child = Command::new(binary("influxd", "influxdb"))
        .arg("-config")
        .arg(dir.join("influxdb.conf"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("influxd starts");
    let service = Service { address: format!("127.0.0.1:{port}"), _dir: dir.to_path_buf(), child: Some(child) };
    service.wait_ready("/ping");
    service
}

impl Service {
    fn wait_ready(&self, path: &str) {
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            let ready = std::net::TcpStream::connect(&self.address).is_ok()
                && (200..300).contains(&http(&self.address, "GET", path, &[], "").0);
            if ready {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("{} did not answer {path} within {WAIT:?}", self.address);
    }

    /// An instant PromQL/MetricsQL query's result (`data.result`), an empty list on none.
    pub fn query(&self, query: &str) -> Vec<serde_json::Value> {
        let (status, body) = http(&self.address, "GET", &format!("/api/v1/query?query={}", url_encode(query)), &[], "");
        assert_eq!(status, 200, "{query}: {body}");
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{query}: {e}: {body}"));
        answer["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// The value of a query that has one result, if it has one.
    pub fn scalar(&self, query: &str) -> Option<f64> {
        let result = self.query(query);
        let value = result.first()?["value"][1].as_str()?.parse().ok()?;
        (result.len() == 1).then_some(value)
    }
}

/// Starts `command` from a thread that lives as long as this process, with the kernel told
/// to kill the child when that thread (so the process) ends.
fn spawn_for_the_process_lifetime(mut command: Command) {
    let (started, spawned) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: prctl is async-signal-safe and touches only the child's own state.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = command.spawn();
        let ok = child.is_ok();
        let _ = started.send(child.map(|_| ()).map_err(|e| e.to_string()));
        if ok {
            loop {
                std::thread::park();
            }
        }
    });
    spawned.recv().unwrap().expect("the service starts");
}

/// statsd_exporter v0.30.0 (`scripts/test` builds it with `go install` into
/// `target/tools/bin`, or `HISTD_STATSD_EXPORTER` names it) with `mapping`, stopped when
/// dropped; its UDP port is returned beside it.
pub fn own_statsd_exporter(mapping: &std::path::Path) -> (Service, u16) {
    let binary = std::env::var_os("HISTD_STATSD_EXPORTER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/tools/bin/statsd_exporter"));
    assert!(
        binary.exists(),
        "{} is missing: scripts/test installs it (go install github.com/prometheus/statsd_exporter@v0.30.0)",
        binary.display()
    );
    let (port, udp) = (free_port(), free_udp_port());
    let child = Command::new(binary)
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg(format!("--statsd.listen-udp=127.0.0.1:{udp}"))
        .arg("--statsd.listen-tcp=")
        .arg(format!("--statsd.mapping-config={}", mapping.display()))
        .arg("--log.level=error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("statsd_exporter starts");
    let service =
        Service { address: format!("127.0.0.1:{port}"), _dir: temp_dir("statsd-exporter"), child: Some(child) };
    service.wait_ready("/metrics");
    (service, udp)
}

fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
