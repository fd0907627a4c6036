/*
 * histd's configuration in the container image: an Etsy statsd config file (a JavaScript
 * object literal) with histd's own keys beside Etsy's. Every key, its default and meaning:
 * `docker run --rm histd config-keys`. Mount your own over /etc/histd/config.js, check it with
 * `histd check-config`, and apply a change with `docker kill --signal=HUP <container>`
 * (what takes a restart is named in the log).
 *
 * Inside a container every listener is on all interfaces: which ports the host exposes is
 * decided by `docker run -p`. Publish the management port (8126) and the HTTP port (8127) on
 * the host's loopback only (`-p 127.0.0.1:8126:8126`): they can delete data.
 * The store lives in the volume /var/lib/histd.
 */
{
  // statsd lines: UDP and TCP on 8125 (every interface: use '127.0.0.1' to keep it local).
  servers: [
    { server: "./servers/udp", address: "0.0.0.0", port: 8125 },
    { server: "./servers/tcp", address: "0.0.0.0", port: 8125 }
  ],

  // Etsy's management commands (stats, counters, timers, health, ...) on TCP 8126.
  mgmt_address: "0.0.0.0",
  mgmt_port: 8126,

  // The web page, /health, /metrics and the query API on 8127.
  http_address: "0.0.0.0",
  http_port: 8127,
  // On all interfaces inside the container, the HTTP port's admin role (reload, clear, forget
  // series) would be open to whoever reaches it: histd refuses to start so unless told.
  // Publish it on the host's loopback (-p 127.0.0.1:8127:8127), or give it tokens
  // (http: { tokens: { admin: "/run/secrets/histd-admin" } }) and drop this line.
  http: { openToNetwork: true },

  // Milliseconds between flushes.
  flushInterval: 10000,

  // Where flushes go: the embedded store (web page, query API). Add "graphite" with
  // graphiteHost, "prometheus" (scrape /metrics, remote write), "otlp" (an OpenTelemetry
  // collector), "circonus" (HTTPTrap or IRONdb), "file" or "forward" as needed.
  backends: ["store"],
  // graphiteHost: "127.0.0.1",
  // graphitePort: 2003,
  // otlp: { endpoint: "http://127.0.0.1:4318/v1/metrics", histograms: "exponential" },
  // file: { name: "/var/log/histd/flush.log", format: "jsonl" },

  // Timer percentiles; every timer also keeps its whole histogram in the store.
  percentThreshold: [90, 99],

  // The store: how long each resolution is kept, and its disk budget.
  store: {
    dataDir: "/var/lib/histd",
    retention: { raw: "24h", minute: "30d", hour: "365d" },
    maxBytes: "2GiB"
  },

  // Cardinality budgets: past them new series are folded into overflow series, counted.
  // maxSeries: { counters: 1000000, timers: 200000, gauges: 1000000, sets: 100000 },
  // maxSeriesPerName: 10000,
  // maxTagValues: 10000,
  // Forget series idle this long (flushed as zero until then, as Etsy does forever):
  // idleTTL: "1h",   // or per type: { counters: "1h", timers: "1h", gauges: "1d", sets: "10m" }
}
