//! Several senders and several readers: totals are exact; kernel drops are seen and counted.

use std::net::UdpSocket;
use std::time::Duration;

use crate::harness::{config, wait_until, Carbon, Daemon};

/// Eight sender sockets, 500 datagrams of 25 lines each, into `readers` reader threads.
fn exact_totals_with(mode: &str) {
    let carbon = Carbon::start();
    let extra = format!("udpReaders: 4, udpReaderMode: '{mode}', percentThreshold: [50],");
    let daemon = Daemon::start(&format!("concurrent-{mode}"), &config(&carbon, 60_000, &extra));
    let target = daemon.address("udp");
    let senders: Vec<_> = (0..8)
        .map(|sender| {
            let target = target.clone();
            std::thread::spawn(move || {
                let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
                for datagram in 0..500 {
                    let lines: String = (0..25)
                        .map(|line| format!("c.{}:1|c\nt:{}|ms\n", line % 5, sender * 1000 + datagram))
                        .collect();
                    socket.send_to(lines.as_bytes(), &target).unwrap();
                    if datagram % 50 == 0 {
                        std::thread::sleep(Duration::from_millis(1)); // stay well inside the buffer
                    }
                }
            })
        })
        .collect();
    senders.into_iter().for_each(|s| s.join().unwrap());
    daemon.wait_received(8 * 500 * 50);
    assert_eq!(daemon.stat("messages.kernel_drops"), 0.0);
    assert!(daemon.terminate());
    let flush = carbon.wait_flush(|f| f.get("stats_counts.c.0").is_some());
    for key in 0..5 {
        assert_eq!(flush.get(&format!("stats_counts.c.{key}")), Some("20000"), "counter c.{key}");
    }
    assert_eq!(flush.get("stats.timers.t.count"), Some("100000"));
    assert_eq!(flush.get("stats_counts.statsd.packets_received"), Some("4000"));
    assert_eq!(flush.get("stats_counts.statsd.metrics_received"), Some("200000"));
}

#[test]
fn several_senders_and_reuseport_readers_give_exact_totals() {
    exact_totals_with("reuseport");
}

#[test]
fn several_senders_and_a_shared_socket_give_exact_totals() {
    exact_totals_with("shared");
}

/// `RcvbufErrors` of the UDP line in /proc/net/snmp.
fn rcvbuf_errors() -> u64 {
    let snmp = std::fs::read_to_string("/proc/net/snmp").unwrap();
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next().unwrap(), udp.next().unwrap());
    let column = names.split_whitespace().position(|n| n == "RcvbufErrors").unwrap();
    values.split_whitespace().nth(column).unwrap().parse().unwrap()
}

/// The bytes queued on the UDP sockets bound to `port` (the kernel's `rx_queue`).
fn udp_queue_bytes(port: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/udp").unwrap();
    let local = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|fields| fields[1].ends_with(&local))
        .map(|fields| u64::from_str_radix(fields[4].split(':').nth(1).unwrap(), 16).unwrap())
        .sum()
}

#[test]
fn kernel_drops_match_the_kernels_own_count() {
    let carbon = Carbon::start();
    let extra = "udpReaders: 1, udpReceiveBufferBytes: 4096, flush_counts: true,";
    let daemon = Daemon::start("kernel-drops", &config(&carbon, 60_000, extra));
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let datagram = "drop.me:1|c\n".repeat(80);
    let before = rcvbuf_errors();
    for _ in 0..20_000 {
        socket.send_to(datagram.as_bytes(), daemon.address("udp")).unwrap();
    }
    let port = daemon.address("udp").parse::<std::net::SocketAddr>().unwrap().port();
    wait_until(|| udp_queue_bytes(port) == 0, "the reader to empty its socket");
    daemon.send_udp("marker:1|c"); // the drop counter rides on the next datagram received
    wait_until(|| daemon.admin("counters").contains("marker"), "the marker");
    let kernel = rcvbuf_errors() - before;
    let reported = daemon.stat("messages.kernel_drops") as u64;
    assert!(kernel > 0, "the tiny buffer must overflow");
    assert_eq!(reported, kernel, "histd's count equals the kernel's RcvbufErrors delta");
    let received = daemon.stat("messages.packets_received") as u64;
    assert_eq!(received + reported, 20_001, "every datagram is either received or counted as dropped");
    assert_eq!(daemon.stat("messages.receive_buffer_bytes"), 8192.0, "4096 asked, read back doubled");
}

/// Counter keys stay with their readers between takes, and closed TCP connections hand their
/// last interval over: totals are exact across connections that come and go, UDP readers that
/// keep their keys, a deleted counter that comes back, and the final flush.
#[test]
fn counters_add_up_across_readers_that_come_and_go() {
    let carbon = Carbon::start();
    let extra = "udpReaders: 2, servers: [{ server: './servers/udp', address: '127.0.0.1', port: 0 }, \
                 { server: './servers/tcp', address: '127.0.0.1', port: 0 }],";
    let daemon = Daemon::start("counters-come-and-go", &config(&carbon, 60_000, extra));
    let counters = |wanted: &str| {
        let reply = daemon.admin("counters");
        assert!(reply.contains(wanted), "{wanted} in {reply}");
    };
    daemon.send_tcp("persist.a:1|c\npersist.a:2|c\n");
    daemon.send_udp("persist.b:2|c\n");
    daemon.wait_received(3);
    counters("'persist.a': 3,\n  'persist.b': 2,");
    daemon.send_tcp("persist.a:5|c\n");
    daemon.send_udp("persist.a:1|c\npersist.c:7|c\n");
    daemon.wait_received(6);
    counters("'persist.a': 9,\n  'persist.b': 2,\n  'persist.c': 7,");
    assert_eq!(daemon.admin("delcounters persist.b"), "deleted: persist.b\nEND\n\n");
    counters("'persist.a': 9,\n  'persist.c': 7,");
    daemon.send_udp("persist.b:1|c\n");
    daemon.wait_received(7);
    counters("'persist.a': 9,\n  'persist.b': 1,\n  'persist.c': 7,");
    assert!(daemon.terminate());
    let flush = carbon.wait_flush(|f| f.get("stats_counts.persist.a").is_some());
    let got = ["a", "b", "c"].map(|k| flush.get(&format!("stats_counts.persist.{k}")).map(str::to_string));
    assert_eq!(got, [Some("9".into()), Some("1".into()), Some("7".into())]);
}
