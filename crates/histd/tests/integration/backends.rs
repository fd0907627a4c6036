//! The console, repeater and file backends.

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

#[test]
fn file_appends_each_flush_and_follows_logrotate() {
    let daemon = Daemon::start_process(
        "file",
        "{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 200, backends: ['file'], \
           file: { name: '$DIR/out/flush.log' } }",
    );
    let path = daemon.dir.join("out/flush.log");
    let read = |path: &std::path::Path| std::fs::read_to_string(path).unwrap_or_default();
    daemon.send_udp("jobs:2|c\nusers:ann|s\nusers:bob|s\nlat:5|ms");
    wait_until(|| read(&path).contains("c\tjobs\t2\n"), "the first flush in the file");
    let text = read(&path);
    assert!(text.contains("s\tusers\tann;bob\n"), "{text}");
    assert!(text.contains("t\tlat.mean_90\t5\n"), "{text}");
    // logrotate (create mode) moves the file and sends SIGHUP: the next flush opens a new one.
    let moved = daemon.dir.join("out/flush.log.1");
    std::fs::rename(&path, &moved).unwrap();
    let status = std::process::Command::new("kill").args(["-HUP", &daemon.pid().to_string()]).status().unwrap();
    assert!(status.success());
    daemon.send_udp("jobs:7|c");
    wait_until(|| read(&path).contains("c\tjobs\t7\n"), "a flush in the new file");
    assert!(!read(&moved).contains("c\tjobs\t7"), "nothing more written to the moved file");
    assert!(daemon.stat("file.points_out") >= 4.0);
    assert_eq!(daemon.stat("file.errors"), 0.0);
}
