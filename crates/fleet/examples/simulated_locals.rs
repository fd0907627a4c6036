//! A global histd fed by N simulated locals (issue 53, item 3): every interval each local sends
//! its flush of the same 100k series (90k counters, 10k timers of 150 values, as
//! `benches/forward.rs` cuts them: the series names a fleet shares) in the forward format, as
//! the forward backend would (its own `source`, one identity per interval): posted to the
//! global's `POST /api/v1/forward` (503 answered by waiting and posting again), or, with
//! `KAFKA=BROKERS/TOPIC/PARTITIONS` in the environment, produced to the topic the global
//! consumes, each part to the partition it was cut for (acks all, no transactions). Then it reports what the
//! global spent: its CPU time per series merged (from /proc), the series it merged and the
//! batches that came too late for their flush (its management `stats`), its peak memory, and
//! how long the global took to take one interval of every local.
//!
//! Usage: simulated_locals GLOBAL_HTTP GLOBAL_ADMIN GLOBAL_PID LOCALS INTERVALS [INTERVAL_MS]
//! (`RAW_VALUES_LIMIT=0` in the environment: the locals' `forward.rawValuesLimit`, 8192 when unset)
//! (`bench/global-merge.sh` starts the global and runs this for 10, 50 and 100 locals.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fleet::cut::{cut, CutSettings};
use fleet::ring::{Node, Ring};

#[path = "../../histd/benches/flush_of_100k.rs"]
mod flush_of_100k;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        eprintln!("usage: simulated_locals GLOBAL_HTTP GLOBAL_ADMIN GLOBAL_PID LOCALS INTERVALS [INTERVAL_MS]");
        std::process::exit(2);
    }
    let (http, admin) = (args[0].clone(), args[1].clone());
    let pid: u32 = args[2].parse().expect("a pid");
    let locals: usize = args[3].parse().expect("a number of locals");
    let intervals: usize = args[4].parse().expect("a number of intervals");
    let interval_ms: u64 = args.get(5).map_or(10_000, |ms| ms.parse().expect("milliseconds"));

    let mut snapshot = flush_of_100k::snapshot(interval_ms, true);
    snapshot.interval = Duration::from_millis(interval_ms);
    let kafka = std::env::var("KAFKA").ok().map(|spec| Kafka::new(&spec));
    // `forward.rawValuesLimit`: 0 sends every timer as its totals and histogram only.
    let raw_values_limit = std::env::var("RAW_VALUES_LIMIT").map_or(8192, |limit| limit.parse().expect("a number"));
    let ring = match &kafka {
        Some(kafka) => Ring::new((0..kafka.partitions).map(|p| Node::new(p.to_string())).collect()),
        None => Ring::new(vec![Node::new(format!("http://{http}"))]),
    };
    let max_batch_bytes = kafka.as_ref().map_or(8 << 20, |kafka| kafka.max_part_bytes);
    let mut connections: Vec<Option<TcpStream>> = (0..locals).map(|_| None).collect();
    let idle_rss = memory_kb(pid, "VmRSS");
    let (cpu_before, merged_before, late_before) =
        (cpu_ns(pid), stat(&admin, "forward_series_merged"), stat(&admin, "forward_batches_late"));
    let mut takes = Vec::new();
    let mut series_sent = 0u64;
    let start = now_ms() / interval_ms * interval_ms + interval_ms;
    for k in 0..intervals as u64 {
        // Every local's flush is cut before its interval ends (on this one core it takes
        // seconds for 100 locals), so all of them are sent from the end on, as a fleet's are.
        let end = start + k * interval_ms;
        snapshot.flushed_at_ms = end;
        snapshot.timestamp = end / 1000;
        let mut bodies = Vec::with_capacity(locals);
        for local in 0..locals {
            let settings = CutSettings {
                source: format!("local-{local:03}"),
                prefix_stats: "statsd".into(),
                set_members_limit: 1000,
                raw_values_limit,
                max_batch_bytes,
            };
            let parts = cut(&snapshot, &settings, &ring, 0);
            series_sent += parts.iter().map(|part| part.series).sum::<u64>();
            bodies.push((settings.source, parts));
        }
        sleep_until(end);
        let taking = Instant::now();
        for (local, (source, parts)) in bodies.iter().enumerate() {
            match &kafka {
                Some(kafka) => kafka.produce(source, parts),
                None => parts.iter().for_each(|part| post(&http, &mut connections[local], &part.body)),
            }
        }
        takes.push(taking.elapsed().as_secs_f64());
    }
    sleep_until(start + intervals as u64 * interval_ms + 3_000); // the last interval's flush
    let cpu = (cpu_ns(pid) - cpu_before) as f64 / 1e9;
    let merged = stat(&admin, "forward_series_merged") - merged_before;
    let late = stat(&admin, "forward_batches_late") - late_before;
    takes.sort_by(f64::total_cmp);
    let median_take = takes[takes.len() / 2];
    println!(
        "| {locals} | {} | {series_sent} | {merged} | {cpu:.2} | {:.2} | {:.3} | {median_take:.2} | {late} | {:.1} | {:.1} |",
        intervals,
        merged as f64 / cpu / 1e6,
        cpu * 1e6 / merged.max(1) as f64,
        idle_rss as f64 / 1024.0,
        memory_kb(pid, "VmHWM") as f64 / 1024.0,
    );
}

/// A producer to the topic the global consumes.
struct Kafka {
    producer: fleet::kafka::Producer,
    partitions: usize,
    max_part_bytes: usize,
    runtime: tokio::runtime::Runtime,
}

impl Kafka {
    /// `BROKERS/TOPIC/PARTITIONS` (`127.0.0.1:19191/histd-bench/6`).
    fn new(spec: &str) -> Kafka {
        let mut fields = spec.split('/');
        let (brokers, topic, partitions) = (fields.next().unwrap(), fields.next().unwrap(), fields.next().unwrap());
        let settings = fleet::kafka::ProducerSettings {
            cluster: fleet::kafka::KafkaSettings {
                brokers: brokers.split(',').map(str::to_string).collect(),
                topic: topic.to_string(),
                client_id: "simulated-locals".to_string(),
                tls: None,
                sasl: None,
            },
            acks: fleet::kafka::Acks::All,
            compression: "none".to_string(),
            max_message_bytes: fleet::kafka::DEFAULT_MAX_MESSAGE_BYTES,
            delivery_timeout: Duration::from_secs(30),
            transactional_id: None,
            signing_key_file: None,
        };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let producer = runtime.block_on(async { fleet::kafka::Producer::new(&settings) }).expect("a producer");
        Kafka {
            producer,
            partitions: partitions.parse().expect("a partition count"),
            max_part_bytes: settings.max_part_bytes(),
            runtime,
        }
    }

    /// Produces a local's parts, each to its partition, and waits for the brokers' acks.
    fn produce(&self, source: &str, parts: &[fleet::cut::Part]) {
        self.runtime.block_on(async {
            let mut acks = Vec::new();
            for part in parts {
                acks.push(self.producer.produce(part.node, source, &part.body).expect("queued"));
            }
            for ack in acks {
                ack.await.expect("the brokers took the batch");
            }
        });
    }
}

/// Posts one batch, again after a wait while the global answers 503 (busy).
fn post(http: &str, connection: &mut Option<TcpStream>, body: &[u8]) {
    for _ in 0..600 {
        let stream = connection.get_or_insert_with(|| {
            let stream = TcpStream::connect(http).expect("the global's HTTP port");
            // The head and the body go at once, as an HTTP client's do (Nagle's wait for the
            // head's acknowledgement cost each post tens of milliseconds).
            stream.set_nodelay(true).expect("TCP_NODELAY");
            stream
        });
        let head = format!(
            "POST /api/v1/forward HTTP/1.1\r\nHost: {http}\r\nContent-Type: {}\r\nContent-Encoding: snappy\r\nContent-Length: {}\r\n\r\n",
            fleet::format::CONTENT_TYPE,
            body.len()
        );
        let sent = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body));
        match sent.and_then(|()| answer(stream)) {
            Ok(200..=299) => return,
            Ok(503 | 429) => std::thread::sleep(Duration::from_millis(100)),
            Ok(status) => panic!("the global answered {status}"),
            Err(_) => {
                *connection = None;
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    panic!("the global did not take a batch in a minute");
}

/// Reads one answer; its status.
fn answer(stream: &mut TcpStream) -> std::io::Result<u16> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        if header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(status)
}

/// A counter of the global's management `stats`.
fn stat(admin: &str, name: &str) -> u64 {
    let mut stream = TcpStream::connect(admin).expect("the global's management port");
    stream.write_all(b"stats\n").unwrap();
    let mut reply = String::new();
    let mut buffer = [0u8; 65536];
    while !reply.contains("END") {
        let read = stream.read(&mut buffer).unwrap_or(0);
        if read == 0 {
            break;
        }
        reply.push_str(&String::from_utf8_lossy(&buffer[..read]));
    }
    let value = reply.lines().find_map(|line| line.split_once(": ").filter(|(key, _)| key.ends_with(name)));
    value.and_then(|(_, value)| value.trim().parse::<f64>().ok()).unwrap_or(0.0) as u64
}

/// User plus system CPU time of `pid`, nanoseconds.
fn cpu_ns(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the global's /proc");
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks * 10_000_000 // USER_HZ is 100 on Linux
}

/// A `/proc/PID/status` field in kB.
fn memory_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|line| line.starts_with(field)).unwrap_or_default();
    line.split_whitespace().nth(1).and_then(|kb| kb.parse().ok()).unwrap_or(0)
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

fn sleep_until(ms: u64) {
    let now = now_ms();
    if ms > now {
        std::thread::sleep(Duration::from_millis(ms - now));
    }
}
