#!/usr/bin/env bash
# A global fed by many locals (issue 53, item 3): one global histd (pinned to CPU 0, graphite
# computing every flush and sending it nowhere, as the ingest rows) takes every interval of N
# simulated locals over HTTP, each posting the same 100k series (90k counters, 10k timers of 150
# values with their raw values) in the forward format (crates/fleet/examples/simulated_locals.rs,
# on CPU 1, cutting each local's flush as the forward backend does). Printed per N: the series
# the global merged and its CPU time for them (merges, flushes and all), series merged per
# second of that CPU, its idle and peak memory, the median time it took to take one interval of
# every local, and the batches that came too late for their flush.
# With KAFKA=1 the locals produce to a topic of 6 partitions on one KRaft broker (bench/kafka-brokers.sh,
# on CPU 1 with the locals) and the global consumes it (global.kafka) instead of taking posts.
# With RAW_VALUES_LIMIT=0 the locals send each timer's totals and histogram without its raw values
# (their `forward.rawValuesLimit: 0`).
# With HISTD=/path/to/histd the global is that binary (another build to compare with, in one
# sitting); the tree's release build otherwise.
# Usage: bench/global-merge.sh [INTERVALS [INTERVAL_MS [LOCALS]]]   (4, 10000, "10 50 100")
set -euo pipefail
cd "$(dirname "$0")/.."
intervals=${1:-4}
interval_ms=${2:-10000}
read -r -a counts <<< "${3:-10 50 100}"
cargo build --release -q -p histd
cargo build --release -q -p fleet --example simulated_locals
config=$(mktemp /tmp/global-merge-XXXX.js)
intake="accept: true" transport=http
pids=()
if [[ ${KAFKA:-} == 1 ]]; then
  work=$(mktemp -d)
  trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$work"' EXIT
  # shellcheck source=bench/kafka-brokers.sh
  source bench/kafka-brokers.sh
  start_brokers 1 "$work" histd-bench 6
  intake="kafka: { brokers: ['$bootstrap'], topic: 'histd-bench', group: 'global-merge' }" transport=kafka
  export KAFKA="$bootstrap/histd-bench/6"
else
  unset KAFKA
fi
# BATCH_WAIT_MS sets global.batchWaitMs (its default, 2000, when unset): how long past an
# interval's end the global waits for its batches; one that comes after that flush is late.
cat > "$config" <<CONFIG
{ address: '127.0.0.1', port: 18140, mgmt_port: 18145, http_port: 18147, flushInterval: $interval_ms,
  global: { $intake${BATCH_WAIT_MS:+, batchWaitMs: $BATCH_WAIT_MS} } }
CONFIG
echo "# A global fed by simulated locals, $(date -u +%FT%TZ), $(git rev-parse --short HEAD), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# over $transport, raw values up to ${RAW_VALUES_LIMIT:-8192} a timer, global.batchWaitMs ${BATCH_WAIT_MS:-2000}; $intervals intervals of $interval_ms ms per row (after one to warm up); the global on CPU 0, the locals on CPU 1"
echo "# the global: ${HISTD:-target/release/histd}"
echo
echo "| locals | intervals | series sent | series merged | global CPU s | M series merged / CPU s | µs a series | s to take an interval (median) | late batches | idle RSS MB | peak RSS MB |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for locals in "${counts[@]}"; do
  taskset -c 0 "${HISTD:-target/release/histd}" run -c "$config" > /tmp/global-merge.log 2>&1 &
  pid=$!
  for _ in $(seq 100); do ss -Htlnp "sport = :18147" | grep -q "pid=$pid," && break; sleep 0.1; done
  [[ $transport == http ]] || sleep 5 # the consumer joins its group
  # One interval to warm up (the global numbers the series), then the measured ones.
  taskset -c 1 target/release/examples/simulated_locals 127.0.0.1:18147 127.0.0.1:18145 "$pid" "$locals" 1 "$interval_ms" > /dev/null
  taskset -c 1 target/release/examples/simulated_locals 127.0.0.1:18147 127.0.0.1:18145 "$pid" "$locals" "$intervals" "$interval_ms"
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
done
rm -f "$config"
