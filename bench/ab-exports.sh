#!/usr/bin/env bash
# A/B of the delivery engine (issue 33, part 2): two histd builds in one run, each ingesting
# 25-line datagrams at 100k counter names with graphite (to bench/carbon_sink.py) and
# prometheus remote write (to Debian's victoria-metrics) on, every 2 s; A and B alternate per
# run so machine noise hits both alike. histd pinned to CPU 0; the generator, carbon and
# VictoriaMetrics on CPU 1. Prints each run's ingest table, then what each backend delivered
# and dropped (from /metrics) and what carbon received.
# Usage: bench/ab-exports.sh BINARY_A BINARY_B [seconds-per-run] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
a=$1 b=$2 seconds=${3:-5} rounds=${4:-2}
command -v victoria-metrics >/dev/null || { echo "needs victoria-metrics (apt-get install victoria-metrics)"; exit 1; }
port=18125 mgmt=18126 http=18127 vm=18428 carbon=18003
echo "# $(date -u +%FT%TZ), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# A: $a"
echo "# B: $b"
echo "# both ask for a 16 MiB receive buffer; rmem_max=$(sysctl -n net.core.rmem_max)"
data=$(mktemp -d)
taskset -c 1 victoria-metrics -httpListenAddr=127.0.0.1:$vm -storageDataPath="$data" -loggerLevel=ERROR >/dev/null 2>&1 &
vm_pid=$!
trap 'kill $vm_pid 2>/dev/null; wait $vm_pid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 50); do curl -sf 127.0.0.1:$vm/health >/dev/null && break; sleep 0.2; done

run() { # SIDE BINARY
  local side=$1 bin=$2
  cat > /tmp/histd-ab-exports.js <<CONFIG
{ port: $port, address: '127.0.0.1', mgmt_port: $mgmt, http_port: $http, flushInterval: 2000,
  backends: ['graphite', 'prometheus'], graphiteHost: '127.0.0.1', graphitePort: $carbon,
  prometheus: { remoteWrite: [ { url: 'http://127.0.0.1:$vm/api/v1/write' } ] } }
CONFIG
  taskset -c 1 python3 bench/carbon_sink.py $carbon $((seconds * 3 + 12)) > /tmp/histd-ab-carbon.txt &
  local carbon_pid=$!
  sleep 0.3
  taskset -c 0 "$bin" run -c /tmp/histd-ab-exports.js 2>/tmp/histd-ab-exports.log &
  local pid=$!
  for _ in $(seq 50); do grep -q ' ready ' /tmp/histd-ab-exports.log 2>/dev/null && break; sleep 0.1; done
  echo "### $side"
  taskset -c 1 "$b" bench --target 127.0.0.1:$port --admin 127.0.0.1:$mgmt --pid "$pid" \
    --duration "$seconds" --quiet --lines 25 --names 100000 --rate 3M,5M,0 | tail -n +2
  sleep 3 # the last flush delivered
  curl -s 127.0.0.1:$http/metrics |
    grep -E '^histd_sink_(points_out|errors|retries|dropped_points)_total\{sink="(graphite|prometheus.remote_write_0)"' |
    grep -v ' 0$' || true
  kill -TERM "$pid"; wait "$pid" || true
  wait "$carbon_pid" || true
  echo "carbon received: $(cat /tmp/histd-ab-carbon.txt)"
}

for round in $(seq "$rounds"); do
  echo; echo "## round $round: 25 lines/datagram, 100k counter names, graphite + remote write every 2 s"
  run A "$a"
  run B "$b"
done
