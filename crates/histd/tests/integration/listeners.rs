//! Every listener kind feeds the same metrics.

use std::io::Write;
use std::net::TcpStream;
use std::os::unix::net::{UnixDatagram, UnixStream};

use crate::harness::{Carbon, Daemon};

#[test]
fn udp_tcp_and_unix_sockets_feed_one_table() {
    let carbon = Carbon::start();
    let config = format!(
        "{{ servers: [ {{ server: './servers/udp', address: '127.0.0.1', port: 0 }}, \
           {{ server: './servers/tcp', address: '127.0.0.1', port: 0 }}, \
           {{ server: 'udp', address: '::1', address_ipv6: true, port: 0 }}, \
           {{ server: './servers/tcp', socket: '$DIR/stream.sock', socket_mod: '660' }}, \
           {{ server: './servers/udp', socket: '$DIR/dgram.sock' }} ], \
           mgmt_port: 0, http_port: 0, graphiteHost: '127.0.0.1', graphitePort: {}, flushInterval: 60000 }}",
        carbon.port
    );
    let daemon = Daemon::start("listeners", &config);
    daemon.send_udp("hits:1|c");
    let v6: std::net::SocketAddr = daemon.addresses["udp"][1].parse().unwrap();
    std::net::UdpSocket::bind("[::1]:0").unwrap().send_to(b"hits:10|c", v6).unwrap();
    let mut tcp = TcpStream::connect(daemon.address("tcp")).unwrap();
    tcp.write_all(b"hits:100|c\nhits:1000|c").unwrap();
    drop(tcp); // the last line has no newline: still counted at close
    let mut unix = UnixStream::connect(daemon.dir.join("stream.sock")).unwrap();
    unix.write_all(b"hits:10000|c\n").unwrap();
    drop(unix);
    UnixDatagram::unbound().unwrap().send_to(b"hits:100000|c", daemon.dir.join("dgram.sock")).unwrap();
    let mode = std::fs::metadata(daemon.dir.join("stream.sock"))
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777);
    assert_eq!(mode.unwrap(), 0o660);
    daemon.wait_received(6);
    let dir = daemon.dir.clone();
    assert!(daemon.terminate());
    let flush = carbon.wait_flush(|f| f.get("stats_counts.hits").is_some());
    assert_eq!(flush.get("stats_counts.hits"), Some("111111"));
    assert!(!dir.join("stream.sock").exists(), "socket files are removed at exit");
}
