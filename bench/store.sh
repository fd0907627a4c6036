#!/usr/bin/env bash
# What the embedded store costs, in one run: the footprint bench (bytes per point by kind and
# resolution on deterministic data, the whole file after a day and more, the writer's CPU per
# flush at 100k series, compaction included); the criterion bench (one flush of 100k counters,
# the p99 queries); then the daemon's memory with the store off and on: 100k counter names at
# 1M lines/s, 2 minutes without the store, then with it for the run's length (default 11
# minutes, so a ten-minute compaction period is in it); histd pinned to CPU 0, the generator
# on CPU 1, 10 s flushes.
# Usage: bench/store.sh [seconds-per-daemon-run]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-660}
cargo build --release -q -p histd
bin=target/release/histd
port=18145 mgmt=18146 http=18147
data=$(mktemp -d /tmp/histd-store-bench.XXXXXX)
daemon_pid=
trap '[[ -z $daemon_pid ]] || kill -TERM "$daemon_pid" 2>/dev/null; rm -rf "$data"' EXIT
echo "# $(date -u +%FT%TZ), $(git rev-parse --short HEAD), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo; echo "## cargo bench -p store --bench footprint"
cargo bench -q -p store --bench footprint 2>/dev/null
echo; echo "## cargo bench -p store --bench store"
cargo bench -q -p store --bench store -- --warm-up-time 2 --measurement-time 8 2>&1 | grep -E "time:|^store/|^[a-z0-9].*(flush|p99)"

run() {
  local title=$1 backends=$2 seconds=$3
  echo; echo "## daemon, $title: 25 lines/datagram, 100k counter names, 1M lines/s, ${seconds} s"
  rm -rf "${data:?}"/*
  cat > "$data/config.js" <<CONFIG
{ port: $port, address: '127.0.0.1', mgmt_port: $mgmt, http_port: $http, flushInterval: 10000,
  backends: $backends, store: { dataDir: '$data/store' } }
CONFIG
  taskset -c 0 "$bin" run -c "$data/config.js" 2>"$data/log" &
  daemon_pid=$!
  for _ in $(seq 50); do grep -q ' ready ' "$data/log" 2>/dev/null && break; sleep 0.1; done
  taskset -c 1 "$bin" bench --target 127.0.0.1:$port --admin 127.0.0.1:$mgmt --pid "$daemon_pid" \
    --duration "$seconds" --quiet --lines 25 --names 100000 --rate 1M
  if [[ $backends == *store* ]]; then
    curl -sf "http://127.0.0.1:$http/health" | tr ',' '\n' | grep -E '"store_' || true
  fi
  kill -TERM "$daemon_pid"; wait "$daemon_pid" || true
  daemon_pid=
}
run "store off" "[]" 120
run "store on" "['store']" "$seconds"
