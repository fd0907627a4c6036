//! Every config key histd knows, with its default and meaning, in one table: README's
//! configuration table is this table (a test renders it and compares), and the keys a config
//! has but histd did not read are derived from what the readers recorded ([`unread_keys`]).

use serde_json::{Map, Value};

use crate::config_reader::keys::{etsy, histd, unused};
pub use crate::config_reader::keys::{KeyDoc, OnReload, Origin};
use crate::config_reader::KeysRead;

/// The keys no backend owns, in README's order (each backend's follow, from its folder).
pub const COMMON: &[KeyDoc] = &[
    etsy(&["servers"], "one UDP server", "listeners: `[{server, address, port, ...}]`; when absent the top-level `server`, `address`, `port`, `address_ipv6`, `socket`, `socket_mod` and `recvBufferSize` describe the one listener"),
    etsy(&["servers[].server", "server"], "`./servers/udp`", "`./servers/udp` or `./servers/tcp` (also `udp`, `tcp`)"),
    etsy(&["servers[].address", "address"], "0.0.0.0 (`::` with `address_ipv6`)", "the address to listen on"),
    etsy(&["servers[].port", "port"], "8125", "the port to listen on (0: any free port)"),
    etsy(&["servers[].address_ipv6", "address_ipv6"], "false", "listen on IPv6 when no address is given"),
    etsy(&["servers[].socket", "socket"], "none", "a Unix socket path instead of an address: `udp` makes it a datagram socket, `tcp` a stream socket"),
    etsy(&["servers[].socket_mod", "socket_mod"], "none", "the socket file's mode (a number, or an octal string like `'0660'`)"),
    etsy(&["servers[].recvBufferSize", "recvBufferSize"], "`udpReceiveBufferBytes`", "SO_RCVBUF asked for this UDP listener (Node's name)"),
    histd(&["servers[].allow", "allow"], "none (every source)", "the networks a UDP or TCP listener takes lines from (`[\"10.0.0.0/8\", \"::1\"]`); datagrams from elsewhere are dropped (`messages.refused_ingest_datagrams`), connections closed at once (`messages.refused_ingest_connections`); a reload changes it in place"),
    etsy(&["mgmt_address"], "127.0.0.1", "the management interface's address"),
    etsy(&["mgmt_port"], "8126", "the management interface's port"),
    histd(&["http_address"], "127.0.0.1", "the HTTP API's address"),
    histd(&["http_port"], "8127", "the HTTP API's port"),
    etsy(&["backends"], "`[\"graphite\"]`", "where flushes go: `graphite`, `console`, `repeater`, `store`, `prometheus`, `forward`, `otlp`, `file`, `circonus`, `influx` (also spelled `./backends/graphite`); `histd run` with no config uses `store`"),
    etsy(&["flushInterval"], "10000", "milliseconds between flushes, on a fixed grid from start (at most a day: 86400000)"),
    etsy(&["percentThreshold"], "90", "timer percentiles to compute (a number or a list; negative: the lowest)"),
    etsy(&["calculatedTimerMetrics"], "all", "which timer statistics to send (`count`, `mean`, `upper_90`, ...)"),
    etsy(&["histogram"], "none", "`[{metric, bins}]`: Etsy's per-timer bin counts (`bins`: ascending limits, `'inf'` last)"),
    etsy(&["histogram[].metric"], "", "the timer names a rule applies to (a substring; `''` for all)"),
    etsy(&["histogram[].bins"], "", "the rule's bin limits"),
    etsy(&["deleteIdleStats"], "false", "the default of the four `delete*` keys"),
    etsy(&["deleteCounters"], "`deleteIdleStats`", "forget counters that received nothing in an interval (else send 0)"),
    etsy(&["deleteTimers"], "`deleteIdleStats`", "forget idle timers"),
    etsy(&["deleteSets"], "`deleteIdleStats`", "forget idle sets"),
    etsy(&["deleteGauges"], "`deleteIdleStats`", "forget idle gauges (see `gaugesMaxTTL`)"),
    etsy(&["gaugesMaxTTL"], "1", "with `deleteGauges`: intervals a gauge stays after its last update"),
    etsy(&["prefixStats"], "`statsd`", "the prefix of histd's own metrics"),
    etsy(&["keyNameSanitize"], "true", "Etsy's key sanitising (spaces to `_`, `/` to `-`, other characters dropped)"),
    etsy(&["debug"], "false", "log at debug level"),
    etsy(&["healthStatus"], "`up`", "the management `health` state at start: `up` or `down`"),
    histd(&["udpReaders"], "the cores histd may run on", "reader threads per UDP listener"),
    histd(&["udpReaderMode"], "`reuseport`", "`reuseport`: a socket per reader (the kernel spreads senders over them); `shared`: one socket all readers read (for many cores fed by few clients). Measured in BENCHMARKS.md"),
    histd(&["udpReceiveBufferBytes"], "16777216 (16 MiB)", "the receive buffer asked for each UDP socket: about this many bytes of datagrams wait in the kernel before it drops. histd sets it with `SO_RCVBUFFORCE` when privileged (past `net.core.rmem_max`), else `SO_RCVBUF` (capped at `net.core.rmem_max`; histd then logs the size granted and the sysctl that raises it). The kernel doubles what is set (half pays for its bookkeeping), so `SO_RCVBUF` and `messages.receive_buffer_bytes` read back twice this value; a peer compared with histd should be given the same setting"),
    histd(&["udpBatchDatagrams"], "32", "datagrams read per `recvmmsg`"),
    histd(&["maxDatagramBytes"], "65536", "longer datagrams are cut and counted in `truncated_datagrams`"),
    histd(&["shutdownDrainMs"], "2000", "at shutdown, how long UDP and Unix datagram readers keep reading what their sockets hold, and stream connections what their clients still send, before the final flush; datagrams still queued then are dropped and counted in `messages.shutdown_unread_datagrams`, connections still sending are cut and counted in `messages.shutdown_cut_connections`"),
    histd(&["streamPendingBytes"], "67108864 (64 MiB)", "bytes of partial lines (no newline yet) held across all TCP and Unix stream connections, at least 1 MiB; past it (or past 1 MiB on one connection) a line is discarded whole, up to its newline, and counted in `messages.bad_lines.too_long`; the bytes held are `messages.stream_pending_bytes`"),
    histd(&["histdSelfMetrics"], "false", "also flush histd's own counters beyond Etsy's (`<prefixStats>.bad_lines.<reason>`, `kernel_drops`, `truncated_datagrams`, `timers_over_sample_limit`) and graphite's `graphiteStats.retry_buffer_bytes`, `dropped_lines`, `errors`; off, every backend gets Etsy's names and `numStats` for the same input (the values are always in the management `stats` and `/health`)"),
    histd(&["sinkQueueBytes"], "67108864 (64 MiB)", "flushes (estimated in memory bytes) that the console, store, otlp, circonus, influx and file backends may have waiting, and packets the repeater may have waiting; past it new ones are dropped for that backend and counted in `<backend>.queue_full_drops` (an empty queue always takes one flush). Graphite's bound is `graphite.retryBufferBytes`"),
    histd(&["global.accept"], "false", "accept batches from local histd on `POST /api/v1/forward` (the HTTP port) and merge them into this histd's flushes; off, they are answered 503 and the local tries another node"),
    histd(&["global.tagSource"], "none", "a tag name: each forwarded series gets `;<name>=<source>`, keeping hosts apart instead of merging them"),
    histd(&["global.dedupBatches"], "100000", "batch identities remembered, so a batch sent twice (a retry, a spool replayed after a crash) is merged once; the oldest are forgotten first (`messages.forward_ids_forgotten`)"),
    histd(&["global.journalDir"], "none", "each batch is written here (synced) before it is acknowledged and removed once every backend has taken the flush that carried it (the store wrote it, forward spooled it, ...): a global killed (SIGKILL, a crash) in between merges it again at its next start. Without it such a global loses what it acknowledged since its last flush"),
    histd(&["global.maxBatchBytes"], "67108864 (64 MiB)", "the largest batch accepted, decompressed, and the most memory its entries may take once decoded (a larger one is answered 400, counted in `messages.forward_batches_refused`)"),
    histd(&["global.maxBytesInFlight"], "536870912 (512 MiB)", "bodies, decompressed batches and decoded entries of every forwarded request at once (at least 3 × `global.maxBatchBytes`): each request reserves its body, its batch decompressed and up to 24 times that for its entries (within `global.maxBatchBytes`) before they are read, so what requests hold stays within it (the buffer the last batch was decompressed into, kept for the next, counts in it too); past it a request is answered 503 with `Retry-After: 1` and counted in `messages.forward_batches_busy` (the local keeps its batch and sends it again)"),
    histd(&["global.batchWaitMs"], "2000", "a forwarded batch whose interval ends at `e` belongs to this global's flush at the first grid point at or after `e` + this wait: one that comes earlier waits for that flush, one that comes after it is late and flushed in an interval of its own, stamped with that flush's time (the store merges it into the points written there; see \"Late batches\")"),
    histd(&["global.maxLateIntervals"], "16", "late intervals (forwarded batches that came after the flush they belong to) held or in the backends' hands at once; when they fill it, those held go to the backends at once instead of with the next flush; a batch that would start one more meanwhile is answered 503 with `Retry-After: 1` (HTTP, counted in `messages.forward_batches_busy`), and a Kafka global pauses fetching"),
    histd(&["global.dedupBytes"], "33554432 (32 MiB)", "the memory the remembered batch identities may take; past it the oldest are forgotten too (`messages.forward_ids_forgotten`)"),
    histd(&["maxStreamConnections"], "4096", "TCP and Unix stream connections open at once, across stream listeners (each holds a table); more are closed at once and counted in `messages.refused_stream_connections`"),
    histd(&["connectionIdleTimeoutMs"], "600000 (10 minutes)", "a statsd stream or management connection that sends nothing for this long is closed and counted in `messages.idle_closed_connections` (0: never)"),
    histd(&["httpMaxConnections"], "256", "HTTP connections open at once; more are closed at once and counted in `messages.refused_api_connections`"),
    histd(&["httpMaxConnectionsPerAddress"], "64", "HTTP connections open at once from one client address (0: no cap), so one address cannot take every slot of `httpMaxConnections`; more are closed at once and counted in `messages.refused_address_connections`. Behind a proxy or load balancer every client has its address: raise it or set 0"),
    histd(&["maxStreamLineBytes"], "1048576 (1 MiB)", "the longest statsd line a TCP or Unix stream connection may send (at least 65536); a longer one is discarded whole (never parsed in pieces) and counted in `messages.bad_lines.too_long`"),
    histd(&["mgmtMaxConnections"], "16", "management connections served at once (each may hold a full dump while its client reads it); more are closed at once and counted in `messages.refused_management_connections`"),
    histd(&["mgmtMaxLineBytes"], "65536 (64 KiB)", "the longest management command line; a longer one is answered `ERROR`, discarded whole and counted in `messages.refused_management_lines`"),
    histd(&["queryMaxSteps"], "11000", "the most steps one `/api/v1/query` or `/api/v1/heatmap` answers (the range divided by the step); more is answered 400 naming `step` and counted in `messages.refused_api_requests`"),
    histd(&["queryMaxSeries"], "100000", "the most series one `/api/v1/series` listing gives (`limit` at most this); more is answered 400 naming `limit`"),
    histd(&["httpHeaderTimeoutMs"], "10000", "how long an HTTP client may take to send a request's headers; then the connection is closed and counted in `messages.http_header_timeouts`"),
    histd(&["http.hostnames"], "none", "host names a request's `Host` header may carry besides IP addresses and `localhost` (the names clients reach this histd by); any other name is refused with 403 and counted in `messages.refused_http_hosts` (DNS rebinding)"),
    histd(&["http.tokens.read", "http.tokens.write", "http.tokens.admin"], "none (the role is open)", "a file of tokens for the role (`NAME TOKEN` or `TOKEN` a line, at least 16 characters; read again on SIGHUP): `read` is the page, queries, `/metrics`, `/health`; `write` is `POST /api/v1/forward` (the name is the credential a batch's identity is bound to); `admin` is reload, clear and `DELETE /api/v1/series` (admin tokens open every route, any token `/health`). Requests send `Authorization: Bearer TOKEN`; none is 401, a wrong one 403, counted in `messages.refused_http_credentials`"),
    histd(&["http.tls.certFile", "http.tls.keyFile"], "none (plain HTTP)", "serve HTTPS on the HTTP port with this certificate chain and key (PEM; read again on SIGHUP, so they rotate without a restart; turning HTTPS on or off takes one). Failed handshakes are counted in `messages.http_tls_failures`"),
    histd(&["http.tls.clientCAFile"], "none", "check client certificates against these CA certificates (PEM): mutual TLS"),
    histd(&["http.tls.requireClientCert"], "false", "refuse, at the handshake, a connection without a client certificate from `clientCAFile` (else it may go on and present a token)"),
    histd(&["http.tls.clientCertRoles"], "none", "the roles a verified client certificate opens (`[\"write\"]` for locals with certificates): its subject's CN is the credential's name (batch identities are bound to it)"),
    histd(&["http.openToNetwork"], "false", "allow the `admin` and `read` roles (and `write`, with `global.accept`) without tokens on an HTTP address other than loopback; without it histd refuses to start so, naming this key"),
    histd(&["httpBodyTimeoutMs"], "30000", "how long an HTTP client may take to send a request's body (a forwarded batch); then it is answered 408, the connection closed and counted in `messages.http_body_timeouts`"),
    histd(&["httpAnswerBytes"], "268435456 (256 MiB)", "what `/metrics` answers not yet taken by their clients may hold at once (a client that asks and never reads holds its whole answer); past it a scrape is answered 503 with `Retry-After` and counted in `messages.refused_api_answers`"),
    histd(&["mgmtFirstCommandTimeoutMs"], "10000", "a management connection that sends no command at all for this long is closed and counted in `messages.idle_closed_connections` (after its first command `connectionIdleTimeoutMs` applies), so silent connections cannot hold `mgmtMaxConnections`"),
    histd(&["timerSampleLimit"], "8192", "raw values kept per timer and interval (16 KiB while they are whole milliseconds, 32 KiB while whole thousandths, 64 KiB otherwise); past it the percentile statistics come from the timer's histogram, and `messages.timers_over_sample_limit` in `stats` counts the timers this happened to"),
    histd(&["maxSeries", "maxSeries.counters", "maxSeries.timers", "maxSeries.gauges", "maxSeries.sets"], "`{counters: 1000000, timers: 200000, gauges: 1000000, sets: 100000}`", "series kept of each type (a number sets all four): a new series past it is folded into the series `__overflow__` of its type, counted in `budget.folded_series.max_series`"),
    histd(&["idleTTL", "idleTTL.counters", "idleTTL.timers", "idleTTL.gauges", "idleTTL.sets"], "none (kept, as Etsy does)", "how long a series may go without a value before it is deleted: a duration (`10m`, `1h`, `7d`) or milliseconds, for every type or per type (`{counters: '1h', gauges: '1d'}`). Until then an idle counter, timer or set is flushed as zero and a gauge as its last value; then it is forgotten (memory given back, no more zeros), counted in `budget.idle_expired.<type>`. Rounded up to whole flushes; the `delete*` keys still delete after one idle flush"),
    histd(&["maxSeriesPerName"], "10000", "tag sets one metric name may have: past it a new one is folded into `<name>.__overflow__` (`budget.folded_series.series_per_name`)"),
    histd(&["maxTagValues"], "10000", "values one tag key may take, and tag keys one type may use: past it a new series is folded into `<name>.__overflow__` (`budget.folded_series.tag_values`)"),
    histd(&["maxSetMembers"], "10000", "members a set keeps exactly per interval; past it a HyperLogLog sketch counts them (about 0.8% error, 16 KiB), counted in `budget.sets_sketched`"),
    histd(&["alerts"], "none", "alert rules, evaluated after every flush on the flush itself: `[{name, expr, over, above | below, for, labels, summary}]` (docs/views.md: Alerts)"),
    histd(&["alerts[].name"], "required", "the rule's name, unique: Alertmanager's `alertname`, and `<prefixStats>.alerts.<name>.value` / `.state` (0 inactive, 1 pending, 2 firing), gauges kept like any series"),
    histd(&["alerts[].expr"], "required", "an expression of the query language: `count_above(api.latency{route=/login}, 1500)`, `inverse_quantile(...)`, `quantile(...)`, `rate(errors)`, `cumulative(...)`"),
    histd(&["alerts[].over"], "required", "the window the expression is evaluated on: a duration (`5m`) or milliseconds, one to 360 flushes"),
    histd(&["alerts[].above", "alerts[].below"], "one of them", "the threshold the value breaches the rule above (or below)"),
    histd(&["alerts[].for"], "0", "how long the breach must last before the alert fires (a single bad flush does not fire a rule with a `for`)"),
    histd(&["alerts[].labels"], "none", "labels sent with its notifications: `{severity: \"page\"}`"),
    histd(&["alerts[].summary"], "`{{name}}: {{expr}} over {{over}} is {{value}} ({{comparison}} {{threshold}})`", "the notification's text; `{{value}}`, `{{threshold}}`, `{{comparison}}`, `{{over}}`, `{{name}}`, `{{expr}}`, `{{labels.NAME}}` are filled in: `{{value}} people waited more than 1.5 s in the last {{over}}`"),
    histd(&["alerting.alertmanagers"], "none", "Alertmanager URLs (`http://127.0.0.1:9093`): firing and resolved alerts through its v2 API, a firing one sent again every `resendEvery`"),
    histd(&["alerting.webhooks"], "none", "`[{url, format}]`: each change of an alert's state POSTed to `url`"),
    histd(&["alerting.webhooks[].url"], "required", "`http://host:port/path`, or `https://` (over TLS, checked as for remote write: Slack's and Mattermost's hooks)"),
    histd(&["alerting.webhooks[].format"], "`json`", "`json` (every field of the alert) or `slack` (`{\"text\": ...}`, as Slack's and Mattermost's incoming webhooks take it)"),
    histd(&["alerting.externalURL"], "the HTTP address", "histd's web page as the readers of notifications reach it: their links open the rule's series and threshold there"),
    histd(&["alerting.resendEvery"], "`1m`", "how often a firing alert is sent to Alertmanager again (it forgets an alert not renewed before its `endsAt`, 4 of these)"),
    histd(&["alerting.timeoutMs"], "5000", "how long one delivery may take; a failed one is tried again (1 s, 2 s, ... 30 s apart, each ±20 % so that senders do not retry in step) until delivered, refused (a 4xx, counted in `dropped_points.rejected`) or replaced by newer news of its rule"),
    histd(&["alerting.maxQueued"], "1000", "notifications waiting per destination; more are dropped and counted in `alerts.<destination>.queue_full_drops`"),
    unused(&["title"], "the process title: histd's is `histd`"),
    unused(&["log"], "histd logs to standard error; `--log-level` or `debug` set the level"),
    unused(&["dumpMessages"], "histd never logs per packet; the console or repeater backend shows traffic"),
    unused(&["automaticConfigReload"], "histd does not watch the file: it reloads it on SIGHUP (`systemctl reload`) or `POST /-/reload`"),
    unused(&["keyFlush"], "Etsy's periodic log of the busiest keys is not implemented"),
];

/// Every key histd knows, in README's order: those no backend owns (the global's and the Kafka
/// cluster's among them), then each backend's.
pub fn all() -> impl Iterator<Item = &'static KeyDoc> {
    let fleet = crate::global::config::KEYS.iter().chain(crate::kafka_config::CLUSTER_KEYS);
    COMMON.iter().chain(fleet).chain(super::backends::keys())
}

/// The documentation of the key at `path` as read (`servers[2].port` finds `servers[].port`).
pub fn doc_of(path: &str) -> Option<&'static KeyDoc> {
    let pattern = without_indices(path);
    all().find(|doc| doc.keys.contains(&pattern.as_str()))
}

/// `servers[2].port` → `servers[].port`.
pub fn without_indices(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push('[');
            }
            ']' => {
                in_index = false;
                out.push(']');
            }
            _ if in_index => {}
            _ => out.push(c),
        }
    }
    out
}

/// The paths of the keys in `raw` that no reader read, in the config's order: the whole key
/// where nothing below it was read, else the unread keys inside it (`graphite.globalPrefx`).
pub fn unread_keys(raw: &Map<String, Value>, read: &KeysRead) -> Vec<String> {
    let mut unread = Vec::new();
    collect_unread(raw, "", read, &mut unread);
    unread
}

fn collect_unread(object: &Map<String, Value>, path: &str, read: &KeysRead, unread: &mut Vec<String>) {
    for (key, value) in object {
        let full = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
        if !read.contains(&full) {
            unread.push(full);
            continue;
        }
        match value {
            Value::Object(inner) if read.any_below(&full) => collect_unread(inner, &full, read, unread),
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    let element = format!("{full}[{index}]");
                    if let (Value::Object(inner), true) = (item, read.any_below(&element)) {
                        collect_unread(inner, &element, read, unread);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Why `path`, present in the config, is not used: said once per key at start.
pub fn why_unused(path: &str) -> String {
    match doc_of(path) {
        Some(doc) if doc.origin == Origin::EtsyUnused => format!("Etsy's key, not used by histd: {}", doc.meaning),
        Some(_) => "not used where it stands (another key takes precedence)".to_string(),
        None => match suggestion(path) {
            Some(known) => format!("not a key histd or Etsy statsd knows (did you mean `{known}`?): ignored"),
            None => "not a key histd or Etsy statsd knows: ignored (a typo, or another backend's settings)".to_string(),
        },
    }
}

/// True when `path` is a key neither histd nor Etsy statsd knows (a typo, or a third-party
/// backend's settings).
pub fn is_unknown(path: &str) -> bool {
    doc_of(path).is_none()
}

/// The known key closest to `path` when it is close enough to be what was meant: at most two
/// edits away (three for keys over 12 characters), letter case ignored.
pub fn suggestion(path: &str) -> Option<&'static str> {
    let typed = without_indices(path).to_ascii_lowercase();
    let allowed = if typed.len() > 12 { 3 } else { 2 };
    all()
        .flat_map(|doc| doc.keys.iter().copied())
        .map(|known| (crate::config_reader::edit_distance(&typed, &known.to_ascii_lowercase()), known))
        .filter(|(distance, _)| *distance <= allowed)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, known)| known)
}

/// README's configuration table, rendered from [`all`].
pub fn markdown_table() -> String {
    let mut table = String::from("| key | default | meaning |\n|---|---|---|\n");
    for doc in all() {
        let keys = doc.keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
        let meaning = match doc.origin {
            Origin::Etsy => doc.meaning.to_string(),
            Origin::Histd => format!("(histd) {}", doc.meaning),
            Origin::EtsyUnused => format!("accepted, no effect: {}", doc.meaning),
        };
        let reload = match doc.on_reload {
            OnReload::InPlace => "; a reload applies it to the running backend in place",
            OnReload::RestartsItsSink => "",
        };
        table.push_str(&format!("| {keys} | {} | {meaning}{reload} |\n", doc.default));
    }
    table
}
