//! The console and repeater backends.

use std::net::UdpSocket;
use std::time::Duration;

use crate::harness::{wait_until, Daemon};

#[test]
fn console_prints_each_flush() {
    let daemon = Daemon::start_process(
        "console",
        "{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 200, backends: ['./backends/console'], console: { prettyprint: true } }",
    );
    daemon.send_udp("shown:3|c\nlat:5|ms");
    wait_until(|| daemon.stdout().contains("counter shown"), "the console dump");
    let stdout = daemon.stdout();
    assert!(stdout.contains("Flushing stats at "), "{stdout}");
    let counter_line = stdout.lines().find(|l| l.starts_with("counter shown")).unwrap();
    assert!(counter_line.ends_with("count=3 rate=15"), "{counter_line}");
    assert!(stdout.lines().any(|l| l.starts_with("timer   lat") && l.contains("mean_90=5")), "{stdout}");
}

#[test]
fn repeater_forwards_raw_packets_bad_lines_included() {
    let downstream = UdpSocket::bind("127.0.0.1:0").unwrap();
    downstream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let port = downstream.local_addr().unwrap().port();
    let config = format!(
        "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 60000, backends: ['./backends/repeater'], \
           repeater: [ {{ host: '127.0.0.1', port: {port} }} ], repeaterProtocol: 'udp4' }}"
    );
    let daemon = Daemon::start("repeater", &config);
    daemon.send_udp("a:1|c\nnot a metric");
    let mut buffer = [0u8; 1024];
    let length = downstream.recv(&mut buffer).unwrap();
    assert_eq!(&buffer[..length], b"a:1|c\nnot a metric");
    wait_until(|| daemon.stat("repeater.points_out") == 1.0, "the repeater to count");
}
