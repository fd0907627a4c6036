#!/usr/bin/env bash
# The prometheus backend's costs (issue "Into the Prometheus world"): the criterion bench of one
# flush of 100k series in each histogram mode, then ingest of 25-line datagrams at 100k names
# with remote write on (to Debian's victoria-metrics, every flush) against the same load
# without it, in one run: histd pinned to CPU 0, the generator and VictoriaMetrics on CPU 1.
# Usage: bench/prometheus.sh [seconds-per-run]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
command -v victoria-metrics >/dev/null || { echo "needs victoria-metrics (apt-get install victoria-metrics)"; exit 1; }

echo "# $(date -u +%FT%TZ), $(git rev-parse --short HEAD), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# sysctl: net.core.rmem_max=$(sysctl -n net.core.rmem_max); histd asks for a 16 MiB receive buffer (SO_RCVBUFFORCE as root)"
echo; echo "## one flush of 100k series (90k counters, 10k timers of ~113 bins)"
cargo bench -q -p histd --bench prometheus -- --warm-up-time 2 --measurement-time 10 2>&1 |
  grep -E "^(remote write|/metrics|[0-9]+ series)|time:|^prometheus flush" | sed 's/^prometheus flush of 100k series\///'

cargo build --release -q -p histd
bin=target/release/histd
port=18125 mgmt=18126 vm=18428
data=$(mktemp -d)
taskset -c 1 victoria-metrics -httpListenAddr=127.0.0.1:$vm -storageDataPath="$data" -loggerLevel=ERROR >/dev/null 2>&1 &
vm_pid=$!
trap 'kill $vm_pid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 50); do curl -sf 127.0.0.1:$vm/health >/dev/null && break; sleep 0.2; done

run() {
  local title=$1 backends=$2
  echo; echo "## $title"
  cat > /tmp/histd-prom-bench.js <<CONFIG
{ port: $port, address: '127.0.0.1', mgmt_port: $mgmt, http_port: 18127, flushInterval: 2000, backends: $backends,
  prometheus: { remoteWrite: [ { url: 'http://127.0.0.1:$vm/api/v1/write' } ] } }
CONFIG
  taskset -c 0 "$bin" run -c /tmp/histd-prom-bench.js 2>/tmp/histd-prom-bench.log &
  local pid=$!
  for _ in $(seq 50); do grep -q ' ready ' /tmp/histd-prom-bench.log 2>/dev/null && break; sleep 0.1; done
  taskset -c 1 "$bin" bench --target 127.0.0.1:$port --admin 127.0.0.1:$mgmt --pid "$pid" \
    --duration "$seconds" --quiet --lines 25 --names 100000 --rate 3M,5M,0
  curl -s 127.0.0.1:18127/metrics | grep -E '^histd_sink_(points_out|errors|dropped_points)_total\{sink="prometheus' || true
  kill -TERM "$pid"; wait "$pid" || true
}
run "25 lines/datagram, 100k counter names, no backend" "[]"
run "25 lines/datagram, 100k counter names, prometheus remote write every 2 s" "['prometheus']"
