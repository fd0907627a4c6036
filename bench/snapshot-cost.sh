#!/usr/bin/env bash
# What a snapshot costs (store.snapshots, issue 50): a daemon on CPU 0 keeps 100k series
# (the `mixed` load: counters, timers, gauges and sets) from a generator on CPU 1 at 200k
# lines/s with 2 s flushes, and takes a snapshot every 20 s, keeping 2. Reported: the store's
# file (database and write-ahead log) beside each snapshot's size, and how long each took (the
# daemon's log). A snapshot is SQLite's VACUUM INTO of the store in a read snapshot: its size is
# the store's live pages (free pages left out), on the same disk as the store.
# Usage: bench/snapshot-cost.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-90}
cargo build --release -q -p histd
bin=target/release/histd
port=18245 mgmt=18246 http=18247
data=$(mktemp -d /tmp/histd-snapshot-bench.XXXXXX)
daemon_pid=
trap '[[ -z $daemon_pid ]] || kill -TERM "$daemon_pid" 2>/dev/null; rm -rf "$data"' EXIT
echo "# $(date -u +%FT%TZ), $(git rev-parse --short HEAD), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
cat > "$data/config.js" <<CONFIG
{ port: $port, address: '127.0.0.1', mgmt_port: $mgmt, http_port: $http, flushInterval: 2000,
  backends: ['store'], store: { dataDir: '$data/store', snapshots: { interval: 20, keep: 2 } } }
CONFIG
taskset -c 0 "$bin" run -c "$data/config.js" 2>"$data/log" &
daemon_pid=$!
for _ in $(seq 50); do grep -q ' ready ' "$data/log" 2>/dev/null && break; sleep 0.1; done
taskset -c 1 "$bin" bench --target 127.0.0.1:$port --admin 127.0.0.1:$mgmt --pid "$daemon_pid" \
  --duration "$seconds" --quiet --lines 25 --names 100000 --mix mixed --rate 200k
sleep 25 # one more snapshot of the whole load
size() { stat -c %s "$1" 2>/dev/null || echo 0; }
echo
echo "| file | bytes |"
echo "|---|---|"
echo "| store: histd.db | $(size "$data/store/histd.db") |"
echo "| store: histd.db-wal | $(size "$data/store/histd.db-wal") |"
for snapshot in "$data"/store/snapshots/histd-*.db; do
  echo "| snapshot $(basename "$snapshot") | $(size "$snapshot") |"
done
echo
echo "snapshots taken (took_ms each, from the daemon's log):"
grep -o 'took_ms=[0-9]*' "$data/log" | tr '\n' ' '; echo
curl -sf "http://127.0.0.1:$http/health" | tr ',' '\n' | grep -E '"store_(snapshot|points|bytes")' || true
kill -TERM "$daemon_pid"; wait "$daemon_pid" || true
daemon_pid=
