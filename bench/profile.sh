#!/usr/bin/env bash
# Where a histd build spends its time on one ingest workload at the generator's ceiling: the
# daemon pinned to CPU 0 and the generator to CPU 1 (as bench/ab.sh runs them), `perf record`
# (cpu-clock samples: this VM has no hardware counters) on every thread of the daemon for the
# run, then the functions' shares of the samples and the run's row.
# Usage: bench/profile.sh BINARY [seconds] [BENCH-ARGS...]
#   e.g. bench/profile.sh target/release/histd 5 --lines 25 --names 1000 --mix timer-heavy
# Leaves perf.data in /tmp/histd-profile.data for `perf annotate -i ... -s SYMBOL`.
set -euo pipefail
cd "$(dirname "$0")/.."
binary=$1 seconds=${2:-5}
shift $(($# < 2 ? $# : 2))
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--lines 25 --names 1000 --mix timer-heavy)
port=19125 mgmt=19126 data=/tmp/histd-profile.data
cat > /tmp/histd-profile.js <<CONFIG
{ port: $port, address: '127.0.0.1', mgmt_port: $mgmt, http_port: 0, flushInterval: 2000 }
CONFIG
taskset -c 0 "$binary" run -c /tmp/histd-profile.js 2>/tmp/histd-profile.log &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q ' ready ' /tmp/histd-profile.log 2>/dev/null && break; sleep 0.1; done
perf record -F 2000 -g -p "$pid" -o "$data" -- sleep "$((seconds + 1))" >/dev/null 2>&1 &
recorder=$!
echo "# $(date -u +%FT%TZ), $binary, ${args[*]}, perf record -F 2000 -g -p PID for $((seconds + 1)) s"
echo "    target     sent/s     received    loss % kernel drops    ns/metric    µs/datagram  RSS MB peak"
taskset -c 1 "$binary" bench --target 127.0.0.1:$port --admin 127.0.0.1:$mgmt --pid "$pid" \
  --duration "$seconds" --quiet --rate 0 "${args[@]}" | tail -n +3
wait "$recorder" || true
perf report -i "$data" --no-children --sort sym --stdio 2>/dev/null | grep -E '^ +[0-9.]+%' | head -20
