//! Forwarding through a real Kafka: three KRaft brokers (Apache Kafka from Maven Central, the
//! classpath `scripts/test` writes) on loopback, started once for this test binary; a topic
//! of 6 partitions, replication factor 3, `min.insync.replicas` 2.
//!
//! Three locals produce; two globals in group A and one in group B consume. A broker is killed
//! and brought back mid-run, a global of group A is SIGKILLed mid-interval and restarted. Each
//! group stores every hit sent, once, and its merged circllhist is, bin for bin, that of one
//! histd fed every line. A local SIGKILLed while the brokers cannot take its batches sends
//! them after its restart.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use circllhist::Histogram;

use crate::forwarding::{
    assert_nothing_dropped, lines, reference, send, stored_histogram, stored_hits, wait_spool_empty_within, HITS,
    LATENCIES,
};
use crate::harness::{free_port, http, prepared_tool, spooled_batches, temp_dir, wait_until, within, Daemon, TestCa};
use crate::store_api::stored_count;

const FLUSH_MS: u64 = 500;
const PARTITIONS: i32 = 6;
/// How long a local has to empty its spool after a broker's failover.
const SPOOL_DRAIN: Duration = Duration::from_secs(90);

/// One broker (KRaft: broker and controller in one process), restartable on its ports.
struct Broker {
    properties: PathBuf,
    log: PathBuf,
    process: Option<Child>,
}

/// The three brokers of this test binary.
pub(crate) struct Cluster {
    brokers: Mutex<Vec<Broker>>,
    /// The brokers' addresses, `host:port,...`.
    pub(crate) bootstrap: String,
    classpath: String,
}

impl Broker {
    fn start(&mut self, classpath: &str) {
        let log = std::fs::File::create(&self.log).unwrap();
        let child = Command::new("java")
            .args([
                "-Xmx256m",
                "-Xms64m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                classpath,
                "kafka.Kafka",
            ])
            .arg(&self.properties)
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("java (Java 17) starts a Kafka broker");
        BROKER_PIDS.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(child.id());
        self.process = Some(child);
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.process.take() {
            let _ = child.kill();
            let _ = child.wait();
            BROKER_PIDS.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).retain(|&pid| pid != child.id());
        }
    }
}

/// The brokers' process ids: a static is never dropped, so the test binary kills them at its
/// exit (`atexit`), and they never outlive it.
static BROKER_PIDS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

extern "C" fn kill_brokers_at_exit() {
    let pids = BROKER_PIDS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    for &pid in pids.iter() {
        // SAFETY: a signal to a process this binary started.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    }
}

/// The brokers, started at the first call: storage formatted with one cluster id, three
/// processes, then waits until they elect a controller and take a topic.
pub(crate) fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let classpath_file = prepared_tool(
            "HISTD_KAFKA_CLASSPATH",
            "target/tools/kafka.classpath",
            "mvn dependency:build-classpath on crates/histd/tests/kafka/pom.xml",
        );
        let classpath = std::fs::read_to_string(classpath_file).unwrap().trim().to_string();
        let dir = temp_dir("kafka");
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let voters: Vec<String> =
            ports.iter().enumerate().map(|(i, (_, controller))| format!("{}@127.0.0.1:{controller}", i + 1)).collect();
        let cluster_id = "aGlzdGQtdGVzdHMtMDAwMQ";
        let mut brokers = Vec::new();
        for (index, (client, controller)) in ports.iter().enumerate() {
            let id = index as u32 + 1;
            let data = dir.join(format!("data{id}"));
            let properties = dir.join(format!("broker{id}.properties"));
            std::fs::write(&properties, broker_properties(id, *client, *controller, &voters.join(","), &data)).unwrap();
            let formatted = Command::new("java")
                .args(["-cp", &classpath, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c"])
                .arg(&properties)
                .output()
                .expect("java formats the broker's storage");
            assert!(formatted.status.success(), "{}", String::from_utf8_lossy(&formatted.stderr));
            brokers.push(Broker { properties, log: dir.join(format!("broker{id}.log")), process: None });
        }
        // SAFETY: registers a plain function, once.
        unsafe { libc::atexit(kill_brokers_at_exit) };
        for broker in &mut brokers {
            broker.start(&classpath);
        }
        let bootstrap = ports.iter().map(|(client, _)| format!("127.0.0.1:{client}")).collect::<Vec<_>>().join(",");
        let cluster = Cluster { brokers: Mutex::new(brokers), bootstrap, classpath };
        create_topic(&cluster.bootstrap, "histd-ready", 1);
        cluster
    })
}

fn broker_properties(id: u32, client: u16, controller: u16, voters: &str, data: &std::path::Path) -> String {
    format!(
        "process.roles=broker,controller\nnode.id={id}\n\
         listeners=PLAINTEXT://127.0.0.1:{client},CONTROLLER://127.0.0.1:{controller}\n\
         advertised.listeners=PLAINTEXT://127.0.0.1:{client}\n\
         controller.listener.names=CONTROLLER\n\
         listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
         controller.quorum.voters={voters}\nlog.dirs={}\n\
         num.partitions=1\ndefault.replication.factor=3\nmin.insync.replicas=2\n\
         offsets.topic.replication.factor=3\noffsets.topic.num.partitions=3\n\
         transaction.state.log.replication.factor=3\ntransaction.state.log.min.isr=2\n\
         group.initial.rebalance.delay.ms=0\nnum.network.threads=2\nnum.io.threads=2\n\
         background.threads=2\nlog.cleaner.enable=false\nauto.create.topics.enable=false\n",
        data.display()
    )
}

/// Creates `topic` on the cluster (replication factor 3, `min.insync.replicas` 2), retrying
/// while the brokers come up.
fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
    create_topic_with(bootstrap, topic, partitions, 3, &|_| {}, &[], None);
}

/// A global consuming `topic` in `group`, storing what it flushes; its data outlives it.
struct Global {
    name: String,
    data: PathBuf,
    topic: String,
    group: String,
    /// More keys of `global.kafka` (`, key: value`).
    kafka_keys: String,
    daemon: Option<Daemon>,
}

impl Global {
    fn new(name: &str, topic: &str, group: &str) -> Global {
        let (name, data, topic, group) = (name.into(), temp_dir(name), topic.into(), group.into());
        Global { name, data, topic, group, kafka_keys: String::new(), daemon: None }
    }

    fn start(&mut self) {
        let brokers = brokers_list();
        let config = format!(
            "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, \
               flushInterval: {FLUSH_MS}, backends: ['store'], store: {{ dataDir: '{}' }}, \
               global: {{ kafka: {{ brokers: [{brokers}], topic: '{}', group: '{}'{} }} }} }}",
            self.data.join("store").display(),
            self.topic,
            self.group,
            self.kafka_keys
        );
        self.daemon = Some(Daemon::start_process(&self.name, &config));
    }

    fn address(&self) -> String {
        self.daemon.as_ref().expect("running").address("http")
    }
}

/// The tests of this file one at a time: one kills brokers the other uses.
pub(crate) fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn brokers_list() -> String {
    cluster().bootstrap.split(',').map(|b| format!("'{b}'")).collect::<Vec<_>>().join(", ")
}

/// A local producing to `topic`; `delivery_timeout_ms`: how long librdkafka tries a batch
/// before the spool takes it back (30 s by default). Shorter than a leader's election, a batch
/// a dying leader took without acknowledging is produced again: its transaction is aborted, so
/// the first copy is never read.
fn local_config(source: &str, topic: &str, spool: &std::path::Path, delivery_timeout_ms: Option<u64>) -> String {
    let timeout = delivery_timeout_ms.map_or(String::new(), |ms| format!(", deliveryTimeoutMs: {ms}"));
    format!(
        "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, \
           flushInterval: {FLUSH_MS}, backends: ['forward'], forward: {{ source: '{source}', spoolDir: '{}', \
           kafka: {{ brokers: [{}], topic: '{topic}'{timeout} }} }} }}",
        spool.display(),
        brokers_list()
    )
}

/// A group whose members share out every partition, with every commit acknowledged and none
/// failing for the last 2 s. Only then is a member killed: one killed (or a member joining,
/// leaving, losing its session) while the coordinator fails over has the batches it flushed
/// since its last acknowledged commit read again by the next owner (README, global/kafka.rs).
fn settled(group: &[&Global]) -> bool {
    let stat = |global: &Global, name: &str| global.daemon.as_ref().expect("running").stat(&format!("messages.{name}"));
    let failed = |group: &[&Global]| group.iter().map(|g| stat(g, "forward_commits_failed")).sum::<f64>();
    let quiet = |group: &[&Global]| {
        group.iter().map(|g| stat(g, "forward_partitions_assigned")).sum::<f64>() == PARTITIONS as f64
            && group
                .iter()
                .all(|g| stat(g, "forward_partitions_assigned") > 0.0 && stat(g, "forward_commits_pending") == 0.0)
    };
    let before = failed(group);
    if !quiet(group) {
        return false;
    }
    std::thread::sleep(Duration::from_secs(2));
    quiet(group) && failed(group) == before
}

/// A global's log lines about its consumer (assignments, commits), for a failure's message.
fn consumer_log(stderr: &str) -> String {
    stderr.lines().filter(|line| line.contains("global.kafka")).collect::<Vec<_>>().join("\n")
}

/// What a group stored: its globals' hits summed, their histograms merged.
fn group_totals(globals: &[&Global]) -> (f64, Histogram) {
    let hits = globals.iter().map(|g| stored_hits(&g.address())).sum();
    let histograms: Vec<Histogram> = globals.iter().map(|g| stored_histogram(&g.address())).collect();
    (hits, Histogram::merge_all(&histograms))
}

#[test]
fn two_consumer_groups_each_merge_every_batch_exactly_through_a_broker_and_a_global_killed() {
    let _serial = serial();
    let cluster = cluster();
    let topic = "histd-fleet";
    create_topic(&cluster.bootstrap, topic, PARTITIONS);
    let mut a1 = Global::new("kafka-a1", topic, "dc-a");
    let mut a2 = Global::new("kafka-a2", topic, "dc-a");
    let mut b1 = Global::new("kafka-b1", topic, "dc-b");
    for global in [&mut a1, &mut a2, &mut b1] {
        global.start();
    }
    // The faults below come once each group has shared out the partitions: a member joining
    // while the coordinator fails over is the documented exception (see `settled`).
    assert!(within(Duration::from_secs(90), || settled(&[&a1, &a2]) && settled(&[&b1])), "the groups never formed");
    let reference = reference();
    let locals: Vec<Daemon> = (0..3)
        .map(|i| {
            let spool = temp_dir(&format!("kafka-spool{i}"));
            // 5 s, below the failover of the broker killed below: batches in flight to it are
            // produced again (sessions before transactions merged some of them twice).
            let config = local_config(&format!("host-{i}"), topic, &spool, Some(5000));
            Daemon::start(&format!("kafka-local{i}"), &config)
        })
        .collect();

    send(0..10, &locals, &reference);
    cluster.brokers.lock().unwrap()[1].kill();
    send(10..20, &locals, &reference);
    {
        let mut brokers = cluster.brokers.lock().unwrap();
        brokers[1].start(&cluster.classpath);
    }
    send(20..25, &locals, &reference);
    // The coordinator may have been on the broker killed: group A acknowledges commits again
    // before one of its members is killed.
    assert!(
        within(Duration::from_secs(90), || settled(&[&a1, &a2])),
        "group A never settled after the broker's return"
    );
    // Mid-interval, with every flushed batch's offset acknowledged (the documented exception:
    // a global killed while its group's coordinator does not acknowledge commits, as while the
    // broker just restarted hands its leadership back, has those batches read again): a1 has
    // merged batches it has not flushed.
    let a1_daemon = a1.daemon.take().expect("running");
    let a1_address = a1_daemon.address("http");
    let a1_flushed = within(Duration::from_secs(60), || {
        http(&a1_address, "GET", "/api/v1/series?match=spread.*", &[], "").1.contains("spread.")
    });
    assert!(a1_flushed, "a1 was given partitions and flushed their series before it is killed");
    let mid = |elapsed: f64| (0.4..0.6).contains(&(elapsed * 1000.0 / FLUSH_MS as f64));
    let at_mid_interval = within(Duration::from_secs(60), || {
        let elapsed = a1_daemon.http_json("/api/v1/live?limit=1")["interval"]["elapsed_s"].as_f64().unwrap_or(0.0);
        mid(elapsed) && a1_daemon.stat("messages.forward_commits_pending") == 0.0
    });
    assert!(at_mid_interval, "a1's interval was never seen at its middle with its commits acknowledged");
    let killed_a1_log = a1_daemon.stderr();
    a1_daemon.kill();
    send(25..35, &locals, &reference);
    a1.start();
    send(35..45, &locals, &reference);

    // A batch in flight to the killed broker waits out librdkafka's 30 s delivery timeout
    // before the spool sends it again; on a loaded machine, more.
    locals.iter().for_each(|local| wait_spool_empty_within(local, SPOOL_DRAIN));
    let sent_hits = (45 * 3 * HITS) as f64;
    let sent_latencies = 45 * 3 * LATENCIES;
    let reference_address = reference.address("http");
    assert!(within(Duration::from_secs(30), || stored_histogram(&reference_address).count() == sent_latencies));
    let single = stored_histogram(&reference_address);
    for (name, group) in [("A", vec![&a1, &a2]), ("B", vec![&b1])] {
        let stored = within(Duration::from_secs(120), || {
            let (hits, histogram) = group_totals(&group);
            hits == sent_hits && histogram.count() == sent_latencies
        });
        let (hits, histogram) = group_totals(&group);
        let stats: Vec<String> = group
            .iter()
            .map(|g| {
                let stats = g.daemon.as_ref().unwrap().admin("stats");
                stats.lines().filter(|l| l.contains("forward_")).collect::<Vec<_>>().join(", ")
            })
            .collect();
        let logs: Vec<String> = group
            .iter()
            .map(|g| consumer_log(&g.daemon.as_ref().unwrap().stderr()))
            .chain(std::iter::once(format!("a1 killed: {}", consumer_log(&killed_a1_log))))
            .collect();
        assert!(
            stored,
            "group {name}: {hits} of {sent_hits} hits, {} of {sent_latencies} latencies; {stats:?}; {logs:#?}",
            histogram.count()
        );
        assert_eq!(histogram, single, "group {name}'s histogram is the single histd's, bin for bin");
    }
    assert_eq!(stored_histogram(&reference.address("http")).count(), sent_latencies);
    for global in [&a1, &a2] {
        let (_, series) = http(&global.address(), "GET", "/api/v1/series?match=spread.*", &[], "");
        assert!(series.contains("spread."), "every member of group A owns some partitions: {series}");
    }
    locals.iter().for_each(assert_nothing_dropped);
}

#[test]
fn a_local_killed_with_batches_the_brokers_refused_sends_them_after_its_restart() {
    let _serial = serial();
    let cluster = cluster();
    let topic = "histd-killed";
    create_topic(&cluster.bootstrap, topic, 3);
    let mut global = Global::new("kafka-late", topic, "late");
    let spool = temp_dir("kafka-spool-killed");
    let config = local_config("host-killed", topic, &spool, Some(5000));
    // With two brokers of three down, acks=all cannot be met (min.insync.replicas 2).
    {
        let mut brokers = cluster.brokers.lock().unwrap();
        brokers[0].kill();
        brokers[2].kill();
    }
    let local = Daemon::start_process("kafka-local-killed", &config);
    let text: String = (0..5).map(|round| lines(round, 0)).collect();
    local.send_tcp(&text);
    wait_until(|| local.stat("forward.buffered_bytes") > 0.0, "a flush to wait in the spool");
    std::thread::sleep(Duration::from_millis(3 * FLUSH_MS));
    local.kill();
    assert!(std::fs::read_dir(&spool).unwrap().count() > 0, "batches were spooled to disk");
    {
        let mut brokers = cluster.brokers.lock().unwrap();
        brokers[0].start(&cluster.classpath);
        brokers[2].start(&cluster.classpath);
    }
    global.start();
    let local = Daemon::start_process("kafka-local-killed", &config);
    wait_spool_empty_within(&local, SPOOL_DRAIN);
    let sent = (5 * HITS) as f64;
    let address = global.address();
    // The brokers have just come back: the group's coordinator may take a while.
    let stored = within(Duration::from_secs(60), || stored_hits(&address) == sent);
    let daemon = global.daemon.as_ref().unwrap();
    let stats = daemon.admin("stats");
    let forward: Vec<&str> = stats.lines().filter(|l| l.contains("forward")).collect();
    assert!(stored, "{} of {sent} hits; {forward:?}; {}", stored_hits(&address), daemon.stderr());
    assert_eq!(stored_histogram(&address).count(), 5 * LATENCIES);
}

/// Issue 36, item 4: one path over HTTP, one through Kafka; each gets every batch, exact.
#[test]
fn a_local_sends_every_batch_over_http_and_through_kafka() {
    let _serial = serial();
    let cluster = cluster();
    let topic = "histd-paths";
    create_topic(&cluster.bootstrap, topic, 3);
    let mut consumer = Global::new("kafka-paths-log", topic, "paths");
    consumer.start();
    let http_global = Daemon::start_process(
        "kafka-paths-http",
        &format!(
            "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, \
               flushInterval: {FLUSH_MS}, backends: ['store'], store: {{ dataDir: '$DIR/store' }}, global: {{ accept: true }} }}"
        ),
    );
    let reference = reference();
    let config = format!(
        "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, \
           flushInterval: {FLUSH_MS}, backends: ['forward'], forward: {{ source: 'host-paths', paths: [ \
             {{ name: 'http', nodes: ['http://{}'] }}, \
             {{ name: 'log', kafka: {{ brokers: [{}], topic: '{topic}' }} }} ] }} }}",
        http_global.address("http"),
        brokers_list()
    );
    let local = Daemon::start("kafka-paths-local", &config);
    send(0..10, std::slice::from_ref(&local), &reference);
    wait_until(
        || local.stat("forward.http.buffered_bytes") == 0.0 && local.stat("forward.log.buffered_bytes") == 0.0,
        "both paths to deliver",
    );
    let hits = (10 * HITS) as f64;
    let reference_address = reference.address("http");
    assert!(within(Duration::from_secs(30), || stored_histogram(&reference_address).count() == 10 * LATENCIES));
    let single = stored_histogram(&reference_address);
    for address in [http_global.address("http"), consumer.address()] {
        let stored = within(Duration::from_secs(60), || {
            stored_hits(&address) == hits && stored_histogram(&address).count() == 10 * LATENCIES
        });
        assert!(stored, "{address}: {} of {hits} hits", stored_hits(&address));
        assert_eq!(stored_histogram(&address), single, "{address}: the single histd's histogram");
    }
    let consumer = consumer.daemon.as_ref().expect("running");
    let committed = within(Duration::from_secs(30), || consumer.stat("messages.forward_commits_pending") == 0.0);
    assert!(committed, "the coordinator acknowledged every commit: {}", consumer_log(&consumer.stderr()));
}

/// Issue 35: TLS and SASL to the brokers, against a real broker that asks for both. A broker of
/// its own (apart from the cluster) listens with SASL_SSL only: SCRAM-SHA-512, a certificate
/// from a test CA. A local produces and a global consumes with `tls.caFile` and `sasl`: every
/// increment is stored once. A local with a wrong password delivers nothing, keeps its
/// batches, and its log says the broker refused it.
#[test]
fn tls_and_sasl_reach_a_broker_that_asks_for_both() {
    let _serial = serial();
    let classpath = cluster().classpath.clone();
    let dir = temp_dir("kafka-secure");
    let ca = TestCa::new(&dir, "kafka");
    let (cert, key) = ca.server();
    let keystore = dir.join("broker.pem");
    let pem = |path: &std::path::Path| std::fs::read_to_string(path).unwrap();
    std::fs::write(&keystore, pem(&key) + &pem(&cert)).unwrap();
    let (client, controller) = (free_port(), free_port());
    let properties = dir.join("secure.properties");
    std::fs::write(
        &properties,
        format!(
            "process.roles=broker,controller\nnode.id=1\n\
             listeners=SASL_SSL://127.0.0.1:{client},CONTROLLER://127.0.0.1:{controller}\n\
             advertised.listeners=SASL_SSL://127.0.0.1:{client}\n\
             controller.listener.names=CONTROLLER\ninter.broker.listener.name=SASL_SSL\n\
             listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT\n\
             controller.quorum.voters=1@127.0.0.1:{controller}\nlog.dirs={}\n\
             sasl.enabled.mechanisms=SCRAM-SHA-512\nsasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n\
             listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"histd\" password=\"histd-secret-1\";\n\
             ssl.keystore.type=PEM\nssl.keystore.location={}\n\
             ssl.truststore.type=PEM\nssl.truststore.location={}\n\
             num.partitions=1\ndefault.replication.factor=1\nmin.insync.replicas=1\n\
             offsets.topic.replication.factor=1\noffsets.topic.num.partitions=1\n\
             transaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\n\
             group.initial.rebalance.delay.ms=0\nnum.network.threads=2\nnum.io.threads=2\n\
             background.threads=2\nlog.cleaner.enable=false\nauto.create.topics.enable=false\n",
            dir.join("data").display(),
            keystore.display(),
            ca.cert.display()
        ),
    )
    .unwrap();
    let formatted = Command::new("java")
        .args(["-cp", &classpath, "kafka.tools.StorageTool", "format", "-t", "aGlzdGQtc2VjdXJlLTAwMQ", "-c"])
        .arg(&properties)
        .args(["--add-scram", "SCRAM-SHA-512=[name=histd,password=histd-secret-1]"])
        .output()
        .expect("java formats the broker's storage");
    assert!(formatted.status.success(), "{}", String::from_utf8_lossy(&formatted.stderr));
    let mut broker = Broker { properties, log: dir.join("secure.log"), process: None };
    broker.start(&classpath);
    let bootstrap = format!("127.0.0.1:{client}");
    let secure = |config: &mut rdkafka::ClientConfig| {
        config
            .set("security.protocol", "SASL_SSL")
            .set("ssl.ca.location", ca.cert.to_str().unwrap())
            .set("sasl.mechanism", "SCRAM-SHA-512")
            .set("sasl.username", "histd")
            .set("sasl.password", "histd-secret-1");
    };
    create_topic_with(&bootstrap, "histd-secure", 2, 1, &secure, &[], Some(&broker.log));
    let password = dir.join("password");
    std::fs::write(&password, "histd-secret-1\n").unwrap();
    let wrong = dir.join("wrong-password");
    std::fs::write(&wrong, "not-the-password\n").unwrap();
    let kafka = |password: &std::path::Path| {
        format!(
            "brokers: ['{bootstrap}'], topic: 'histd-secure', tls: {{ caFile: '{}' }}, \
             sasl: {{ mechanism: 'SCRAM-SHA-512', username: 'histd', passwordFile: '{}' }}",
            ca.cert.display(),
            password.display()
        )
    };
    let global = Daemon::start_process(
        "kafka-secure-global",
        &format!(
            "{{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: {FLUSH_MS}, \
               backends: ['store'], store: {{ dataDir: '$DIR/store' }}, \
               global: {{ kafka: {{ {}, group: 'secure' }} }} }}",
            kafka(&password)
        ),
    );
    let local = |name: &str, password: &std::path::Path| {
        Daemon::start_process(
            name,
            &format!(
                "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, \
                   flushInterval: {FLUSH_MS}, backends: ['forward'], \
                   forward: {{ source: '{name}', kafka: {{ {} }} }} }}",
                kafka(password)
            ),
        )
    };
    let good = local("kafka-secure-local", &password);
    let refused = local("kafka-secure-refused", &wrong);
    let stored = |name: &str| stored_count(&global, name);
    for round in 0..5 {
        good.send_tcp("secure.hits:10|c\n");
        refused.send_tcp("secure.refused:10|c\n");
        std::thread::sleep(Duration::from_millis(FLUSH_MS * (round % 2 + 1)));
    }
    let all_stored = within(Duration::from_secs(60), || stored("secure.hits") == 50.0);
    assert!(
        all_stored,
        "{} of 50 stored through TLS and SASL\nlocal:\n{}\nglobal:\n{}",
        stored("secure.hits"),
        good.stderr(),
        consumer_log(&global.stderr())
    );
    assert!(good.stat("forward.buffered_bytes") == 0.0 && good.stat("forward.dropped_points.rejected") == 0.0);
    let told = within(Duration::from_secs(30), || {
        refused.stderr().contains("forward.kafka: the brokers refused this client: check forward.kafka.sasl")
    });
    assert!(told, "the refused local says why:\n{}", refused.stderr());
    assert_eq!(stored("secure.refused"), 0.0, "nothing from a local the broker refused");
    assert!(refused.stat("forward.buffered_bytes") > 0.0, "its batches are kept");
    drop((good, refused, global));
    broker.kill();
}

/// Creates `topic` on the brokers at `bootstrap` (`replication` copies, `min.insync.replicas`
/// one less, at least 1) with the client settings `configure` adds, retrying while they come
/// up; `log` (the broker's) is shown when they never do.
fn create_topic_with(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication: i32,
    configure: &dyn Fn(&mut rdkafka::ClientConfig),
    topic_config: &[(&str, &str)],
    log: Option<&std::path::Path>,
) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut config = rdkafka::ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    configure(&mut config);
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = config.create().unwrap();
    let in_sync = (replication - 1).max(1).to_string();
    let started = Instant::now();
    loop {
        let new = topic_config.iter().fold(
            NewTopic::new(topic, partitions, TopicReplication::Fixed(replication)).set("min.insync.replicas", &in_sync),
            |new, (key, value)| new.set(key, value),
        );
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        let created = runtime.block_on(admin.create_topics([&new], &options));
        let error = match created.as_deref() {
            Ok([Ok(_)]) => return,
            Ok([Err((_, code))]) if *code == rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists => return,
            Ok(other) => format!("{other:?}"),
            Err(error) => error.to_string(),
        };
        let log = log.map_or(String::new(), |log| std::fs::read_to_string(log).unwrap_or_default());
        assert!(started.elapsed() < Duration::from_secs(90), "the brokers never took topic {topic}: {error}\n{log}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Issue 35: a local restarted while no broker can be reached cuts its flushes by the
/// partition count it remembers in `forward.spoolDir` and spools them to disk at once (they
/// were held in memory until the brokers answered, and a crash lost them): killed then, it
/// sends them after a restart with the brokers back.
#[test]
fn a_local_started_without_brokers_spools_by_the_partitions_it_remembers() {
    let _serial = serial();
    let cluster = cluster();
    let topic = "histd-remembered";
    create_topic(&cluster.bootstrap, topic, 3);
    let mut global = Global::new("kafka-remembered-global", topic, "remembered");
    global.start();
    let consumer = global.daemon.as_ref().expect("running");
    let spool = temp_dir("kafka-remembered-spool");
    let first = Daemon::start_process("kafka-remembered-1", &local_config("remembered", topic, &spool, None));
    first.send_tcp("remembered.hits:1|c\n");
    assert!(
        within(Duration::from_secs(60), || stored_count(consumer, "remembered.hits") == 1.0),
        "the first run's flush"
    );
    assert_eq!(
        std::fs::read_to_string(spool.join("kafka-partitions")).unwrap().trim(),
        "3",
        "the partition count kept"
    );
    assert!(first.terminate());
    // No broker takes the first batch: it is produced and awaited (up to deliveryTimeoutMs,
    // 30 s) while the next flushes come; they go to disk meanwhile, not to the queue.
    let unreachable = local_config("remembered", topic, &spool, None).replace(&brokers_list(), "'127.0.0.1:1'");
    let second = Daemon::start_process("kafka-remembered-2", &unreachable);
    for round in 1..=3 {
        second.send_tcp(&"remembered.hits:10|c\n".repeat(round));
        let spooled = within(Duration::from_secs(10), || spooled_batches(&spool) >= round);
        let files = spooled_batches(&spool);
        assert!(spooled, "flush {round} spooled to disk while the first awaits the brokers: {files} files");
    }
    second.kill();
    let third = Daemon::start_process("kafka-remembered-3", &local_config("remembered", topic, &spool, None));
    let all = within(Duration::from_secs(60), || stored_count(consumer, "remembered.hits") == 61.0);
    assert!(all, "{} of 61 stored after the restart\n{}", stored_count(consumer, "remembered.hits"), third.stderr());
    assert!(third.terminate());
}

/// Issue 35: a send a local's earlier run left open (its batches in the log, its transaction
/// never committed: the run killed mid-send, or its partition's leader dead before it
/// acknowledged) is aborted when the local starts again under the same transactional id, and a
/// global never merges what it held. The earlier run's producer is fenced: it cannot commit.
#[test]
fn a_transaction_an_earlier_run_left_open_is_aborted_and_never_merged() {
    let _serial = serial();
    let cluster = cluster();
    let (earlier_topic, topic) = ("histd-txn-earlier", "histd-txn");
    create_topic(&cluster.bootstrap, earlier_topic, 3);
    create_topic(&cluster.bootstrap, topic, 3);
    // Real batches of an earlier run: a local produces them to a topic of their own.
    let spool = temp_dir("kafka-txn-spool-earlier");
    let earlier = Daemon::start_process("kafka-txn-earlier", &local_config("host-txn", earlier_topic, &spool, None));
    earlier.send_tcp("txn.hits:1000|c\n");
    wait_until(
        || earlier.stat("forward.points_out") > 0.0 && earlier.stat("forward.buffered_bytes") == 0.0,
        "the earlier run's batches to be produced",
    );
    assert!(earlier.terminate());
    let batches = read_topic(&cluster.bootstrap, earlier_topic);
    // Those batches, in a transaction under the id the local uses (`histd-<source>`), in the
    // log but never committed: what a run killed mid-send leaves.
    let open = open_transaction(&cluster.bootstrap, "histd-host-txn", topic, &batches);
    let mut global = Global::new("kafka-txn-global", topic, "txn");
    global.start();
    let consumer = global.daemon.as_ref().expect("running");
    let spool = temp_dir("kafka-txn-spool");
    let local = Daemon::start_process("kafka-txn-local", &local_config("host-txn", topic, &spool, None));
    local.send_tcp("txn.hits:1|c\n");
    // A global reads committed batches only, and none past a transaction still open: the
    // local's own arrives once its start has aborted the open one.
    let stored = within(Duration::from_secs(60), || stored_count(consumer, "txn.hits") == 1.0);
    assert!(
        stored,
        "{} stored, 1 expected\nlocal:\n{}\nglobal:\n{}",
        stored_count(consumer, "txn.hits"),
        local.stderr(),
        consumer_log(&consumer.stderr())
    );
    std::thread::sleep(Duration::from_millis(4 * FLUSH_MS));
    assert_eq!(stored_count(consumer, "txn.hits"), 1.0, "the open transaction's 1000 are never merged");
    use rdkafka::producer::Producer as _;
    assert!(open.commit_transaction(Duration::from_secs(10)).is_err(), "the earlier run was fenced");
    assert!(local.terminate());
}

/// Every batch committed to `topic`: (partition, key, payload), read until none came for 2 s.
fn read_topic(bootstrap: &str, topic: &str) -> Vec<(i32, Vec<u8>, Vec<u8>)> {
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    use rdkafka::Message as _;
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("{topic}-reader"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let (started, mut last) = (Instant::now(), Instant::now());
    let mut batches = Vec::new();
    while started.elapsed() < Duration::from_secs(60) && (batches.is_empty() || last.elapsed() < Duration::from_secs(2))
    {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            let key = message.key().unwrap_or_default().to_vec();
            batches.push((message.partition(), key, message.payload().unwrap_or_default().to_vec()));
            last = Instant::now();
        }
    }
    assert!(!batches.is_empty(), "no batch in {topic}");
    batches
}

/// A producer under `transactional_id` that produced `batches` to `topic` in a transaction it
/// leaves open (acknowledged by the brokers, not committed).
fn open_transaction(
    bootstrap: &str,
    transactional_id: &str,
    topic: &str,
    batches: &[(i32, Vec<u8>, Vec<u8>)],
) -> rdkafka::producer::BaseProducer {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
    let producer: BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", transactional_id)
        .set("transaction.timeout.ms", "600000")
        .create()
        .unwrap();
    producer.init_transactions(Duration::from_secs(30)).unwrap();
    producer.begin_transaction().unwrap();
    for (partition, key, payload) in batches {
        let record = BaseRecord::to(topic).partition(*partition).key(key).payload(payload);
        producer.send(record).map_err(|(error, _)| error).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    producer
}

/// Issue 35, "a batch is merged into the interval it belongs to": a global that starts after
/// its local flushed five intervals into the topic reads them all at once, yet stores each
/// in the interval it belongs to (a late interval each, stamped with the global's flush at
/// the first grid point at or after its end + `global.batchWaitMs`), never all in the one
/// open when it read them: the global's points are the local's, one for one, each 2 to 4 s
/// later. The local flushes every 2 s, the global every second: a local flush delayed by a
/// busy machine (its interval's end moves with it) then still ends in another of the global's
/// intervals than the next one (at 1 s each, a flush late by a few hundred ms put two local
/// intervals' ends in one global interval, and the global rightly merged them).
#[test]
fn a_backlog_read_at_once_is_stored_in_the_intervals_it_belongs_to() {
    let _serial = serial();
    let cluster = cluster();
    let topic = "histd-placed";
    create_topic(&cluster.bootstrap, topic, 3);
    let (local_dir, global_dir) = (temp_dir("kafka-placed-local"), temp_dir("kafka-placed-global"));
    let local = Daemon::start_process(
        "kafka-placed-local",
        &format!(
            "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, \
               flushInterval: 2000, backends: ['forward', 'store'], store: {{ dataDir: '{}' }}, \
               forward: {{ source: 'placed', spoolDir: '{}', kafka: {{ brokers: [{}], topic: '{topic}' }} }} }}",
            local_dir.join("store").display(),
            local_dir.join("spool").display(),
            brokers_list()
        ),
    );
    for round in 0..5 {
        local.send_tcp(&format!("placed.hits:{}|c\n", 1 << round));
        std::thread::sleep(Duration::from_millis(1000));
    }
    let points = |address: &str| -> Vec<(u64, f64)> {
        let path =
            format!("/api/v1/query?expr={}&from=-10m&to=now&step=1", crate::harness::url_encode("sum(placed.hits)"));
        let (status, body) = http(address, "GET", &path, &[], "");
        assert_eq!(status, 200, "{body}");
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
        let points = answer["points"].as_array().unwrap().iter();
        points.filter_map(|p| Some((p[0].as_u64()?, p[1].as_f64()?))).filter(|(_, v)| *v != 0.0).collect()
    };
    let total = |points: &[(u64, f64)]| points.iter().map(|(_, v)| v).sum::<f64>();
    let local_address = local.address("http");
    wait_until(|| total(&points(&local_address)) == 31.0, "the local stored every round");
    wait_spool_empty_within(&local, SPOOL_DRAIN);
    // Past the wait: every batch's flush is before the global's first.
    std::thread::sleep(Duration::from_millis(2500));
    let config = format!(
        "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, \
           flushInterval: 1000, backends: ['store'], store: {{ dataDir: '{}' }}, \
           global: {{ kafka: {{ brokers: [{}], topic: '{topic}', group: 'placed' }} }} }}",
        global_dir.join("store").display(),
        brokers_list()
    );
    let global = Daemon::start_process("kafka-placed-global", &config);
    let global_address = global.address("http");
    let read = within(Duration::from_secs(60), || total(&points(&global_address)) == 31.0);
    assert!(read, "{:?}; {}", points(&global_address), consumer_log(&global.stderr()));
    let (sent, merged) = (points(&local_address), points(&global_address));
    assert_eq!(
        sent.iter().map(|(_, v)| *v).collect::<Vec<_>>(),
        merged.iter().map(|(_, v)| *v).collect::<Vec<_>>(),
        "one point for each of the local's: {sent:?} {merged:?}"
    );
    for ((at, _), (placed_at, _)) in sent.iter().zip(&merged) {
        assert!((at + 2..=at + 4).contains(placed_at), "{sent:?} {merged:?}");
    }
    assert_eq!(global.stat("messages.forward_batches_late"), sent.len() as f64);
}

/// P5 (issue 48): a backlog of late batches in front of a current one. 600 tiny batches, each
/// an interval of its own a day back, then one of now, in one partition: every one is merged
/// (late ones as late), and the current one on time. The reading thread paused and resumed
/// fetching at every `global.maxLateIntervals` (16) late intervals, about 32 a second: the
/// backlog took 19 s and made the current batch late too.
#[test]
fn p5_a_backlog_of_late_batches_does_not_hold_the_current_one_back() {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
    const LATE: u64 = 600;
    let _serial = serial();
    let cluster = cluster();
    let topic = "histd-late-flood";
    create_topic(&cluster.bootstrap, topic, 1);
    let producer: BaseProducer =
        rdkafka::ClientConfig::new().set("bootstrap.servers", &cluster.bootstrap).create().unwrap();
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let batch = |start_ms: u64, interval_ms: u64, value: f64| {
        let id = fleet::format::BatchId {
            source: "flood".into(),
            interval_start_ms: start_ms,
            interval_ms,
            part: "p".into(),
            chunk: 0,
        };
        let mut writer = fleet::format::BatchWriter::new(id);
        writer.counter("flood.hits", value);
        fleet::format::compress(&writer.finish())
    };
    let day_ago = now_ms - 86_400_000;
    let mut bodies: Vec<Vec<u8>> = (0..LATE).map(|i| batch(day_ago + i * 10_000, 10_000, 1.0)).collect();
    bodies.push(batch(now_ms - 1_000, 1_000, 1_000.0));
    for body in &bodies {
        producer.send(BaseRecord::to(topic).partition(0).key("flood").payload(body)).map_err(|(e, _)| e).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let config = format!(
        "{{ address: '127.0.0.1', port: 0, server: './servers/tcp', mgmt_port: 0, http_port: 0, \
           flushInterval: 5000, backends: ['store'], store: {{ dataDir: '$DIR/store' }}, \
           global: {{ kafka: {{ brokers: [{}], topic: '{topic}', group: 'flood' }} }} }}",
        brokers_list()
    );
    let global = Daemon::start_process("kafka-late-flood", &config);
    let merged = || global.stat("messages.forward_batches_merged");
    assert!(within(Duration::from_secs(60), || merged() == (LATE + 1) as f64), "{} merged", merged());
    assert_eq!(global.stat("messages.forward_batches_late"), LATE as f64, "the current batch was merged on time");
}

/// Issue 48: a Kafka global's memory after a rebalance storm comes back to within a few MB:
/// another member joins and leaves its group again and again (each a rebalance that takes
/// partitions away and gives them back: the reading thread's offsets, commits and the
/// standing per partition), while a local keeps producing; what the global held is measured
/// after as many rebalances as warmed it up.
#[test]
fn a_rebalance_storm_leaves_no_memory_behind() {
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    const STORM: usize = 3;
    let _serial = serial();
    let cluster = cluster();
    let topic = "histd-rebalance-storm";
    create_topic(&cluster.bootstrap, topic, PARTITIONS);
    let local = Daemon::start_process(
        "kafka-storm-local",
        &local_config("storm", topic, &temp_dir("kafka-storm-local").join("spool"), None),
    );
    let mut global = Global::new("kafka-storm-global", topic, "storm");
    // Heartbeats every 1.5 s (a quarter of the session): a member hears of a rebalance sooner.
    global.kafka_keys = ", sessionTimeoutMs: 6000".into();
    global.start();
    let daemon = global.daemon.as_ref().expect("running");
    let assigned = || daemon.stat("messages.forward_partitions_assigned");
    let rebalance = |round: usize| {
        local.send_tcp(&format!("storm.hits:{round}|c\n"));
        let member: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &cluster.bootstrap)
            .set("group.id", "storm")
            .set("session.timeout.ms", "6000")
            .create()
            .unwrap();
        member.subscribe(&[topic]).unwrap();
        let shared = within(Duration::from_secs(30), || {
            let _ = member.poll(Duration::from_millis(50));
            assigned() < PARTITIONS as f64
        });
        assert!(shared, "round {round}: the group gave the newcomer partitions");
        member.unsubscribe();
        drop(member);
        assert!(within(Duration::from_secs(30), || assigned() == PARTITIONS as f64), "round {round}: all back");
    };
    assert!(within(Duration::from_secs(30), || assigned() == PARTITIONS as f64), "the global took the topic");
    (0..STORM).for_each(rebalance);
    std::thread::sleep(Duration::from_secs(2));
    let before = crate::harness::rss_kib(daemon);
    (STORM..2 * STORM).for_each(rebalance);
    std::thread::sleep(Duration::from_secs(2));
    let grown = crate::harness::rss_kib(daemon).saturating_sub(before);
    assert!(grown < 4 * 1024, "{STORM} rebalances grew the global by {grown} KiB");
}

/// Each batch's `codecs.hits`, the batches a local produced to `topic` (one a flush), in order.
fn hits_batches(bootstrap: &str, topic: &str) -> Vec<(f64, Vec<u8>)> {
    read_topic(bootstrap, topic)
        .into_iter()
        .filter_map(|(_, _, payload)| {
            let batch = fleet::format::decode(&payload, 1 << 20).expect("a local's batch decodes");
            let hits = batch.interval.counters.iter().find(|(key, _)| key == "codecs.hits")?.1;
            Some((hits, payload))
        })
        .collect()
}

/// Produces `payload` to partition 0 of `topic` in a record batch of its own, compressed with
/// `codec` (`none`, `gzip`, `snappy`, `lz4`, `zstd`).
fn produce_with(bootstrap: &str, topic: &str, codec: &str, payload: &[u8]) {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
    let producer: BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("compression.codec", codec)
        .create()
        .unwrap_or_else(|error| panic!("a producer with {codec}: {error}"));
    producer.send(BaseRecord::to(topic).partition(0).key("0").payload(payload)).map_err(|(error, _)| error).unwrap();
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// Damages the record batch at `offset` of a partition's log on disk (while its broker
/// serves it, as a bad disk would): its compressed records changed. The batch header stays
/// whole, so the broker still hands it out.
fn damage_batch(partition_dir: &std::path::Path, offset: i64) {
    let segment = std::fs::read_dir(partition_dir)
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|e| e == "log"))
        .expect("a log segment");
    let mut bytes = std::fs::read(&segment).unwrap();
    let mut at = 0;
    // A record batch: base offset (8), length (4) of what follows, then 49 header bytes.
    while at + 12 <= bytes.len() {
        let base = i64::from_be_bytes(bytes[at..at + 8].try_into().unwrap());
        let length = u32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        if base == offset {
            // All of the compressed records, the codec's own header first (bytes flipped
            // inside a stored deflate block inflate, to garbage that histd's own decoder then
            // refuses: not what is tested here).
            let damaged = at + 61..at + 12 + length;
            bytes[damaged.clone()].iter_mut().for_each(|byte| *byte ^= 0x5a);
            use std::io::{Seek, SeekFrom, Write};
            let mut file = std::fs::OpenOptions::new().write(true).open(&segment).unwrap();
            file.seek(SeekFrom::Start(damaged.start as u64)).unwrap();
            file.write_all(&bytes[damaged]).unwrap();
            return;
        }
        at += 12 + length;
    }
    panic!("no batch at offset {offset} in {}", segment.display());
}

/// P2 (issue 48): a global reads whatever Kafka stores. Batches compressed with each codec
/// Kafka offers (zstd among them: the bundled client lacked it, and one zstd batch stopped its
/// partition for good, uncounted) and a topic whose broker recompresses everything with zstd
/// are merged. A record batch damaged in the broker's log is found (librdkafka names no
/// partition), skipped, counted, named in `/health`, and what follows it is merged.
#[test]
fn p2_every_codec_and_a_zstd_topic_are_read_and_a_damaged_batch_is_skipped_and_named() {
    let _serial = serial();
    let cluster = cluster();
    let source = "histd-codecs-source";
    create_topic(&cluster.bootstrap, source, 1);
    let spool = temp_dir("kafka-codecs-spool");
    let local = Daemon::start_process("kafka-codecs-local", &local_config("codecs", source, &spool, None));
    for round in 0..8 {
        local.send_tcp(&format!("codecs.hits:{}|c\n", 1 << round));
        std::thread::sleep(Duration::from_millis(FLUSH_MS * 2));
    }
    wait_until(|| local.stat("forward.buffered_bytes") == 0.0, "the local's batches produced");
    assert!(local.terminate());
    let batches = hits_batches(&cluster.bootstrap, source);
    assert!(batches.len() >= 7, "a batch a flush: {:?}", batches.iter().map(|b| b.0).collect::<Vec<_>>());
    // Five codecs, one batch each, to a topic of one replica (its log is damaged below).
    let codecs_topic = "histd-codecs";
    create_topic_with(&cluster.bootstrap, codecs_topic, 1, 1, &|_| {}, &[], None);
    let codecs = ["none", "gzip", "snappy", "lz4", "zstd"];
    for (codec, (_, payload)) in codecs.iter().zip(&batches) {
        produce_with(&cluster.bootstrap, codecs_topic, codec, payload);
    }
    // A topic the broker recompresses with zstd, whatever producers send.
    let zstd_topic = "histd-zstd-topic";
    create_topic_with(&cluster.bootstrap, zstd_topic, 1, 3, &|_| {}, &[("compression.type", "zstd")], None);
    produce_with(&cluster.bootstrap, zstd_topic, "none", &batches[5].1);
    let mut codecs_global = Global::new("kafka-codecs-global", codecs_topic, "codecs");
    let mut zstd_global = Global::new("kafka-zstd-global", zstd_topic, "zstd-topic");
    codecs_global.start();
    zstd_global.start();
    let sum = |global: &Global| stored_count(global.daemon.as_ref().expect("running"), "codecs.hits");
    let five: f64 = batches[..5].iter().map(|b| b.0).sum();
    let merged = within(Duration::from_secs(60), || sum(&codecs_global) == five && sum(&zstd_global) == batches[5].0);
    let log = |global: &Global| consumer_log(&global.daemon.as_ref().expect("running").stderr());
    assert!(
        merged,
        "stored {} of {five} (none, gzip, snappy, lz4, zstd) and {} of {} (zstd topic)\n{}\n{}",
        sum(&codecs_global),
        sum(&zstd_global),
        batches[5].0,
        log(&codecs_global),
        log(&zstd_global)
    );
    assert!(zstd_global.daemon.take().expect("running").terminate());
    // A damaged batch (offset 5) and a whole one behind it, read by the group's next run.
    assert!(codecs_global.daemon.take().expect("running").terminate());
    produce_with(&cluster.bootstrap, codecs_topic, "gzip", &batches[6].1);
    produce_with(&cluster.bootstrap, codecs_topic, "none", &batches.last().expect("batches").1);
    let brokers_dir = cluster.brokers.lock().unwrap()[0].properties.parent().unwrap().to_path_buf();
    let partition_dir = (1..=3)
        .map(|id| brokers_dir.join(format!("data{id}")).join(format!("{codecs_topic}-0")))
        .find(|dir| dir.exists())
        .expect("the partition's one replica");
    damage_batch(&partition_dir, 5);
    let mut rerun = Global::new("kafka-codecs-rerun", codecs_topic, "codecs");
    rerun.kafka_keys = ", skipUnreadableAfterMs: 30000".into();
    rerun.start();
    let daemon = rerun.daemon.as_ref().expect("running");
    let last = batches.last().expect("batches").0;
    // Held first: /health says degraded and names it.
    let held = within(Duration::from_secs(60), || daemon.http_json("/health")["status"] == "degraded");
    let health = daemon.http_json("/health");
    assert!(held, "{health}\n{}", log(&rerun));
    let named = &health["kafka_unreadable_batches"]["held"][0];
    assert_eq!((named["partition"].as_i64(), named["offset"].as_i64()), (Some(0), Some(5)), "{health}");
    let skipped = within(Duration::from_secs(60), || sum(&rerun) == last);
    assert!(skipped, "stored {} of {last} behind the damaged batch\n{}", sum(&rerun), log(&rerun));
    assert_eq!(daemon.stat("messages.forward_batches_unreadable"), 1.0, "{}", log(&rerun));
    let health = daemon.http_json("/health");
    let named = &health["kafka_unreadable_batches"]["skipped"][0];
    assert_eq!((named["partition"].as_i64(), named["offset"].as_i64()), (Some(0), Some(5)), "{health}");
    assert_eq!(health["status"], "up", "a skipped batch leaves nothing held");
    assert!(daemon.stderr().contains("an unreadable record skipped"), "{}", log(&rerun));
    assert!(rerun.daemon.take().expect("running").terminate());
}

/// Produces `payload` to partition 0 of `topic`, with `signature` in its `histd-signature`
/// header when given.
fn produce_signed(bootstrap: &str, topic: &str, payload: &[u8], signature: Option<&[u8]>) {
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
    let producer: BaseProducer = rdkafka::ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    let mut record = BaseRecord::to(topic).partition(0).key("0").payload(payload);
    if let Some(signature) = signature {
        record = record.headers(OwnedHeaders::new().insert(Header { key: "histd-signature", value: Some(signature) }));
    }
    producer.send(record).map_err(|(error, _)| error).unwrap();
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// A file holding `text`, readable by its owner alone (as a secret file should be).
fn secret_file(dir: &std::path::Path, name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// P4 (issue 48): with `global.kafka.signingKeys` a global merges a batch only when it is
/// signed with the key of the source it names. A copy of a local's batch sent first without
/// its signature, or signed with another key, is refused and counted, and does not make the
/// real one a duplicate; a local with `forward.kafka.signingKeyFile` signs its own.
#[test]
fn p4_only_batches_signed_by_their_source_are_merged() {
    let _serial = serial();
    let cluster = cluster();
    let dir = temp_dir("kafka-signed");
    let (web_key, other_key) = ("6f1d2c3b4a5968778695a4b3c2d1e0f1aa", "a1b2c3d4e5f60718293a4b5c6d7e8f90bb");
    let keys = secret_file(&dir, "sources.keys", &format!("# source key\nsigned-web {web_key}\n"));
    let local_key = secret_file(&dir, "web.key", &format!("{web_key}\n"));
    // A real batch of source signed-web, taken from a topic of its own.
    let staging = "histd-signed-staging";
    create_topic(&cluster.bootstrap, staging, 1);
    let staged =
        Daemon::start_process("kafka-signed-staged", &local_config("signed-web", staging, &dir.join("spool-a"), None));
    staged.send_tcp("signed.hits:7|c\n");
    wait_until(|| staged.stat("forward.points_out") > 0.0 && staged.stat("forward.buffered_bytes") == 0.0, "produced");
    assert!(staged.terminate());
    let batch = read_topic(&cluster.bootstrap, staging).remove(0).2;
    let sign = |key: &str| {
        ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key.as_bytes()), &batch).as_ref().to_vec()
    };
    let topic = "histd-signed";
    create_topic(&cluster.bootstrap, topic, 1);
    produce_signed(&cluster.bootstrap, topic, &batch, None);
    produce_signed(&cluster.bootstrap, topic, &batch, Some(&sign(other_key)));
    produce_signed(&cluster.bootstrap, topic, &batch, Some(&sign(web_key)));
    produce_signed(&cluster.bootstrap, topic, &batch, Some(&sign(web_key)));
    let mut global = Global::new("kafka-signed-global", topic, "signed");
    global.kafka_keys = format!(", signingKeys: '{}'", keys.display());
    global.start();
    let daemon = global.daemon.as_ref().expect("running");
    let stat = |name: &str| daemon.stat(&format!("messages.{name}"));
    let read = within(Duration::from_secs(60), || stat("forward_batches_duplicate") == 1.0);
    assert!(read, "{}", consumer_log(&daemon.stderr()));
    assert_eq!((stat("forward_refused_signatures"), stat("forward_batches_merged")), (2.0, 1.0));
    assert!(within(Duration::from_secs(30), || stored_count(daemon, "signed.hits") == 7.0), "the real batch stored");
    // A local that signs its own: merged.
    let config = local_config("signed-web", topic, &dir.join("spool-b"), None)
        .replace(&format!("topic: '{topic}'"), &format!("topic: '{topic}', signingKeyFile: '{}'", local_key.display()));
    let local = Daemon::start_process("kafka-signed-local", &config);
    local.send_tcp("signed.live:3|c\n");
    let merged = within(Duration::from_secs(60), || stored_count(daemon, "signed.live") == 3.0);
    assert!(merged, "the signing local's batch: {}\n{}", local.stderr(), consumer_log(&daemon.stderr()));
    assert_eq!(stat("forward_refused_signatures"), 2.0);
    assert!(local.terminate());
    assert!(global.daemon.take().expect("running").terminate());
}

/// The broker (its index in the cluster) coordinating `group`: the leader of the partition of
/// `__consumer_offsets` Kafka keeps the group in (`Utils.abs(hashCode(group)) % partitions`,
/// Java's string hash).
fn coordinator_of(group: &str) -> usize {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let hash = group.encode_utf16().fold(0i32, |hash, unit| hash.wrapping_mul(31).wrapping_add(unit as i32));
    let consumer: BaseConsumer =
        rdkafka::ClientConfig::new().set("bootstrap.servers", &cluster().bootstrap).create().unwrap();
    let metadata = consumer.fetch_metadata(Some("__consumer_offsets"), Duration::from_secs(10)).unwrap();
    let partitions = metadata.topics()[0].partitions();
    let wanted = hash.checked_abs().unwrap_or(0) % partitions.len() as i32;
    let leader = partitions.iter().find(|p| p.id() == wanted).expect("the group's partition").leader();
    assert!((1..=3).contains(&leader), "a leader among the three brokers: {leader}");
    leader as usize - 1
}

/// Issue 49, items 4 and 7: a global SIGKILLed while its group's coordinator does not answer
/// (flushes stored, their commits not made) and restarted 1 s later gets its own partitions
/// back at once (a static member: its instance id is kept in its data directory), passes over
/// what its store holds past the group's commit, and the group counts every increment once:
/// before, those batches were merged again (+3.4 % in a chaos run) and the group stalled for
/// `sessionTimeoutMs`.
#[test]
fn a_global_killed_before_its_commits_rejoins_as_itself_and_merges_nothing_twice() {
    let _serial = serial();
    let cluster = cluster();
    let topic = "histd-rejoin";
    let group = "rejoin";
    create_topic(&cluster.bootstrap, topic, PARTITIONS);
    let mut g1 = Global::new("kafka-rejoin-1", topic, group);
    let mut g2 = Global::new("kafka-rejoin-2", topic, group);
    for global in [&mut g1, &mut g2] {
        global.kafka_keys = ", sessionTimeoutMs: 30000".into();
        global.start();
    }
    assert!(within(Duration::from_secs(90), || settled(&[&g1, &g2])), "the group never formed");
    let instance = std::fs::read_to_string(g1.data.join("store/kafka-instance-id")).unwrap();
    assert!(instance.starts_with("histd-"), "g1 keeps its instance id in its data directory: {instance}");
    let reference = reference();
    let locals: Vec<Daemon> = (0..2)
        .map(|i| {
            let spool = temp_dir(&format!("kafka-rejoin-spool{i}"));
            Daemon::start(&format!("kafka-rejoin-local{i}"), &local_config(&format!("host-{i}"), topic, &spool, None))
        })
        .collect();
    send(0..10, &locals, &reference);
    assert!(stored_everything(&g1, &g2, 10), "the group stores what the locals send");

    // The coordinator is killed while batches flow: g1 flushes what it had read, and its
    // commits fail until another broker coordinates the group. (A coordinator only paused
    // would take the commit from its socket when it goes on.) Tried again until g1 is seen
    // with flushed batches whose commit waits.
    let mut round = 10;
    let mut caught = false;
    for _ in 0..5 {
        let coordinator = coordinator_of(group);
        let (a1, a2) = (round, round + 60);
        let merged = || g1.daemon.as_ref().expect("running").stat("messages.forward_batches_merged");
        let before = merged();
        std::thread::scope(|scope| {
            scope.spawn(|| send(a1..a2, &locals, &reference));
            // Just after g1 merged a batch: its flush and commit are still to come.
            within(Duration::from_secs(20), || merged() > before);
            cluster.brokers.lock().unwrap()[coordinator].kill();
        });
        round += 60;
        // The batch waits for its flush (`global.batchWaitMs`, 2 s, past its interval's end);
        // the brokers fence the coordinator after 9 s.
        let g1_daemon = g1.daemon.as_ref().expect("running");
        caught = within(Duration::from_secs(6), || g1_daemon.stat("messages.forward_commits_pending") > 0.0);
        if caught {
            let killed = g1.daemon.take().expect("running");
            let killed_log = killed.stderr();
            killed.kill();
            eprintln!("g1 killed with commits pending: {}", consumer_log(&killed_log));
        }
        cluster.brokers.lock().unwrap()[coordinator].start(&cluster.classpath);
        if caught {
            break;
        }
        locals.iter().for_each(|local| wait_spool_empty_within(local, SPOOL_DRAIN));
        assert!(stored_everything(&g1, &g2, round), "the group stored what was sent");
        assert!(within(Duration::from_secs(90), || settled(&[&g1, &g2])), "the group settled again");
    }
    assert!(caught, "g1 was never seen with a commit waiting for the killed coordinator");
    std::thread::sleep(Duration::from_secs(1));
    g1.start();
    send(round..round + 5, &locals, &reference);
    round += 5;
    locals.iter().for_each(|local| wait_spool_empty_within(local, SPOOL_DRAIN));
    let logs = |global: &Global| consumer_log(&global.daemon.as_ref().expect("running").stderr());
    assert!(stored_everything(&g1, &g2, round), "{} hits; {}", g1_hits_plus(&g1, &g2), logs(&g1));
    // A restarted global reads a backlog through its late intervals: every counter is waited
    // for (one counted twice never equals what was sent).
    assert_every_counter_once(&[&g1, &g2], round, 2, &logs(&g1));
    let g1_daemon = g1.daemon.as_ref().expect("running");
    assert!(
        g1_daemon.stat("messages.forward_batches_already_stored") > 0.0,
        "g1 passed over what its store held past the commit; {}",
        logs(&g1)
    );

    // Killed and restarted 5 s later with the coordinator up: g1 gets its partitions back at
    // once, and what is sent after its restart is stored group-wide within 25 s (the group
    // waited `sessionTimeoutMs` for a member that left no id).
    assert!(within(Duration::from_secs(90), || settled(&[&g1, &g2])), "the group settled after the failover");
    g1.daemon.take().expect("running").kill();
    std::thread::sleep(Duration::from_secs(5));
    g1.start();
    let restarted = Instant::now();
    send(round..round + 5, &locals, &reference);
    round += 5;
    let caught_up = stored_everything(&g1, &g2, round);
    let staleness = restarted.elapsed();
    eprintln!("issue 49: data sent after the restart stored group-wide {:.1} s after it", staleness.as_secs_f64());
    assert!(caught_up && staleness < Duration::from_secs(25), "stored after {staleness:?}; {}", logs(&g1));

    assert_every_counter_once(&[&g1, &g2], round, 2, &logs(&g1));
    let (_, histogram) = group_totals(&[&g1, &g2]);
    let reference_address = reference.address("http");
    let sent_latencies = round * 2 * LATENCIES;
    assert!(within(Duration::from_secs(30), || stored_histogram(&reference_address).count() == sent_latencies));
    assert_eq!(histogram, stored_histogram(&reference_address), "the group's histogram is the single histd's");
    for global in [&g1, &g2] {
        let daemon = global.daemon.as_ref().expect("running");
        assert_eq!(daemon.stat("messages.forward_batches_possibly_twice"), 0.0, "{}", global.name);
    }
    // Kafka in the views (item 5): /health names the partitions, their lag and the commits;
    // `histd health` says it in its line.
    let g1_daemon = g1.daemon.as_ref().expect("running");
    // Published every 5 s: a global restarted moments ago shows its first commit at the next look.
    let shown =
        within(Duration::from_secs(20), || g1_daemon.http_json("/health")["kafka"]["last_commit_age_s"].is_u64());
    let health = g1_daemon.http_json("/health");
    let kafka = &health["kafka"];
    assert!(shown && kafka["topic"] == topic && kafka["group"] == group, "{health}");
    assert_eq!(kafka["instance_id"].as_str(), Some(instance.trim()), "{health}");
    assert!(kafka["lag"].as_i64().is_some_and(|lag| lag >= 0) && kafka["falling_behind"] == false, "{health}");
    assert!(kafka["last_commit_age_s"].as_u64().is_some_and(|age| age < 30), "{health}");
    let line = Command::new(env!("CARGO_BIN_EXE_histd"))
        .args(["health", "--url", &format!("http://{}", g1.address())])
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&line.stdout);
    assert!(line.starts_with("up (") && line.contains("Kafka: ") && line.contains(topic), "{line}");
    locals.iter().for_each(assert_nothing_dropped);
}

/// True once the two globals store every hit of `rounds` rounds from two locals (within
/// 120 s).
fn stored_everything(g1: &Global, g2: &Global, rounds: u64) -> bool {
    let sent_hits = (rounds * 2 * HITS) as f64;
    within(Duration::from_secs(120), || g1_hits_plus(g1, g2) >= sent_hits)
}

/// Every counter of [`lines`] as the group stored it: `api.hits`, then `spread.0` to
/// `spread.15` (each on a partition of its own choosing, so a batch read twice shows).
fn every_counter(group: &[&Global]) -> Vec<f64> {
    let total = |name: &str| -> f64 {
        let path = format!("/api/v1/query?expr=sum({name})&from=-1h&to=now&step=1d");
        let sum = |global: &&Global| -> f64 {
            let (status, body) = http(&global.address(), "GET", &path, &[], "");
            assert_eq!(status, 200, "{body}");
            let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
            answer["points"].as_array().unwrap().iter().filter_map(|p| p[1].as_f64()).sum()
        };
        group.iter().map(sum).sum()
    };
    let spread = (0..16).map(|k| total(&format!("spread.{k}")));
    std::iter::once(total("api.hits")).chain(spread).collect()
}

/// Waits (120 s at most) until `group` stores every counter of `rounds` rounds from `locals`
/// locals exactly once, then that it stays so; fails with what it holds and `log`.
fn assert_every_counter_once(group: &[&Global], rounds: u64, locals: u64, log: &str) {
    let sent = every_counter_sent(rounds, locals);
    let reached = within(Duration::from_secs(120), || every_counter(group) == sent);
    std::thread::sleep(Duration::from_secs(2));
    let stored = every_counter(group);
    assert!(reached, "not every counter arrived once: {stored:?} of {sent:?}; {log}");
    assert_eq!(stored, sent, "every increment once (and it stays so); {log}");
}

/// What [`every_counter`] holds when `rounds` rounds from `locals` locals were stored once.
fn every_counter_sent(rounds: u64, locals: u64) -> Vec<f64> {
    let spread = (0..16).map(|_| (rounds * locals) as f64);
    std::iter::once((rounds * locals * HITS) as f64).chain(spread).collect()
}

/// Both globals' stored hits.
fn g1_hits_plus(g1: &Global, g2: &Global) -> f64 {
    stored_hits(&g1.address()) + stored_hits(&g2.address())
}

/// A seeded schedule of faults (item 7): every 6 to 12 s one of a broker SIGKILLed and
/// restarted 3 to 6 s later, a global SIGKILLed and restarted 1 to 5 s later, or a global
/// paused with SIGSTOP for 6 s; the same seed makes the same schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// A broker (its index) killed, and restarted after this many seconds.
    Broker(usize, u64),
    /// A global (its index) killed, and restarted after this many seconds.
    Global(usize, u64),
    /// A global (its index) paused for 6 s.
    Pause(usize),
}

/// A small seeded generator (xorshift64*): the schedule is the seed's.
struct Seeded(u64);

impl Seeded {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// The faults of `seed` over `seconds`, each with the second it starts at, among `globals`.
fn chaos_schedule(seed: u64, seconds: u64, globals: usize) -> Vec<(u64, Fault)> {
    let mut random = Seeded(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut schedule = Vec::new();
    let mut at = 6 + random.below(7);
    while at < seconds {
        let fault = match random.below(3) {
            0 => Fault::Broker(random.below(3) as usize, 3 + random.below(4)),
            1 => Fault::Global(random.below(globals as u64) as usize, 1 + random.below(5)),
            _ => Fault::Pause(random.below(globals as u64) as usize),
        };
        schedule.push((at, fault));
        at += 6 + random.below(7);
    }
    schedule
}

/// Issue 49, item 7: nothing counted twice through faults. Two locals send all the time; two
/// globals in group A and one in group B read; a seeded schedule of faults runs for
/// `HISTD_CHAOS_SECONDS` (45) with seed `HISTD_CHAOS_SEED` (1): brokers SIGKILLed and
/// restarted, globals SIGKILLed and restarted, globals paused. At the end each group stores
/// every increment once and the single histd's histogram bin for bin. `scripts/chaos` runs it
/// longer, for several seeds.
#[test]
fn a_seeded_schedule_of_faults_leaves_both_groups_exact() {
    let _serial = serial();
    let cluster = cluster();
    let seed: u64 = std::env::var("HISTD_CHAOS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let seconds: u64 = std::env::var("HISTD_CHAOS_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(45);
    let topic = format!("histd-chaos-{seed}");
    create_topic(&cluster.bootstrap, &topic, PARTITIONS);
    let mut globals: Vec<Global> = [("a1", "chaos-a"), ("a2", "chaos-a"), ("b1", "chaos-b")]
        .iter()
        .map(|(name, group)| Global::new(&format!("kafka-chaos-{name}"), &topic, &format!("{group}-{seed}")))
        .collect();
    globals.iter_mut().for_each(Global::start);
    let formed = within(Duration::from_secs(90), || settled(&[&globals[0], &globals[1]]) && settled(&[&globals[2]]));
    assert!(formed, "the groups never formed");
    let reference = reference();
    let locals: Vec<Daemon> = (0..2)
        .map(|i| {
            let spool = temp_dir(&format!("kafka-chaos-spool{i}"));
            Daemon::start(&format!("kafka-chaos-local{i}"), &local_config(&format!("chaos-{i}"), &topic, &spool, None))
        })
        .collect();
    let schedule = chaos_schedule(seed, seconds, globals.len());
    eprintln!("chaos seed {seed}, {seconds} s: {schedule:?}");
    let sending = std::sync::atomic::AtomicBool::new(true);
    let rounds = std::thread::scope(|scope| {
        let sender = scope.spawn(|| {
            let mut round = 0;
            while sending.load(std::sync::atomic::Ordering::Relaxed) {
                send(round..round + 1, &locals, &reference);
                round += 1;
                std::thread::sleep(Duration::from_millis(80));
            }
            round
        });
        let started = Instant::now();
        for (at, fault) in &schedule {
            std::thread::sleep(Duration::from_secs(*at).saturating_sub(started.elapsed()));
            match *fault {
                Fault::Broker(index, back_after) => {
                    cluster.brokers.lock().unwrap()[index].kill();
                    std::thread::sleep(Duration::from_secs(back_after));
                    cluster.brokers.lock().unwrap()[index].start(&cluster.classpath);
                }
                Fault::Global(index, back_after) => {
                    globals[index].daemon.take().expect("running").kill();
                    std::thread::sleep(Duration::from_secs(back_after));
                    globals[index].start();
                }
                Fault::Pause(index) => {
                    let pid = globals[index].daemon.as_ref().expect("running").pid() as libc::pid_t;
                    // SAFETY: signals to a process this test started.
                    unsafe { libc::kill(pid, libc::SIGSTOP) };
                    std::thread::sleep(Duration::from_secs(6));
                    unsafe { libc::kill(pid, libc::SIGCONT) };
                }
            }
        }
        std::thread::sleep(Duration::from_secs(seconds).saturating_sub(started.elapsed()));
        sending.store(false, std::sync::atomic::Ordering::Relaxed);
        sender.join().expect("the sender")
    });
    locals.iter().for_each(|local| wait_spool_empty_within(local, SPOOL_DRAIN));
    let sent = every_counter_sent(rounds, locals.len() as u64);
    let reference_address = reference.address("http");
    let sent_latencies = rounds * locals.len() as u64 * LATENCIES;
    assert!(within(Duration::from_secs(30), || stored_histogram(&reference_address).count() == sent_latencies));
    let single = stored_histogram(&reference_address);
    for (name, members) in [("A", vec![&globals[0], &globals[1]]), ("B", vec![&globals[2]])] {
        // Backlogs read after a fault arrive through late intervals: every counter is waited
        // for (one counted twice never equals what was sent).
        let reached = within(Duration::from_secs(120), || every_counter(&members) == sent);
        std::thread::sleep(Duration::from_secs(3));
        let stored = every_counter(&members);
        let twice: f64 = members
            .iter()
            .map(|g| g.daemon.as_ref().expect("running").stat("messages.forward_batches_possibly_twice"))
            .sum();
        let logs: Vec<String> =
            members.iter().map(|g| consumer_log(&g.daemon.as_ref().expect("running").stderr())).collect();
        assert!(reached, "group {name}: {stored:?} of {sent:?}; {logs:#?}");
        assert_eq!(stored, sent, "group {name}, seed {seed}: every increment once ({twice} possibly twice); {logs:#?}");
        let (_, histogram) = group_totals(&members);
        assert_eq!(histogram, single, "group {name}, seed {seed}: the single histd's histogram, bin for bin");
    }
    locals.iter().for_each(assert_nothing_dropped);
}
