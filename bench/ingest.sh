#!/usr/bin/env bash
# Ingest benchmarks: histd pinned to CPU 0, the generator (`histd bench`) to CPU 1, each
# workload at several target rates, then the bare-receiver baseline in the same run. Prints
# the tables of BENCHMARKS.md in markdown, headed by what a reader needs to reproduce them.
# Usage: bench/ingest.sh [seconds-per-run] [pattern]
#   pattern: run only the workloads whose title contains it (e.g. "100k"), and no baseline
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
only=${2:-}
buffer=8388608          # asked with SO_RCVBUFFORCE; the kernel doubles it: 16 MiB granted
cargo build --release -q -p histd
bin=target/release/histd
port=18125
mgmt=18126
store_dir=$(mktemp -d /tmp/histd-bench-store.XXXXXX)
results=$(mktemp /tmp/histd-bench-results.XXXXXX)
daemon_pid=
trap '[[ -z $daemon_pid ]] || kill -TERM "$daemon_pid" 2>/dev/null; rm -rf "$store_dir" "$results"' EXIT

# run_daemon CONFIG-EXTRA -> sets $daemon_pid
run_daemon() {
  rm -rf "${store_dir:?}"/*
  cat > /tmp/histd-bench.js <<CONFIG
{ port: $port, address: '127.0.0.1', mgmt_port: $mgmt, http_port: 0, flushInterval: 2000,
  udpReceiveBufferBytes: $buffer, $1 }
CONFIG
  taskset -c 0 "$bin" run -c /tmp/histd-bench.js 2>/tmp/histd-bench.log &
  daemon_pid=$!
  for _ in $(seq 50); do grep -q ' ready ' /tmp/histd-bench.log 2>/dev/null && return; sleep 0.1; done
  echo "histd did not start:"; cat /tmp/histd-bench.log; exit 1
}

stop_daemon() {
  kill -TERM "$daemon_pid"; wait "$daemon_pid" || true
  daemon_pid=
}

# The receive buffer the kernel granted the daemon's socket (ss's skmem rb), bytes.
granted_buffer() {
  ss -ulmn "sport = :$port" | grep -o 'rb[0-9]*' | head -1 | tr -d rb
}

# workload TITLE CONFIG-EXTRA BENCH-ARGS...
workload() {
  local title=$1 extra=$2; shift 2
  [[ -z $only || $title == *"$only"* ]] || return 0
  echo; echo "### $title"; echo
  run_daemon "$extra"
  local granted; granted=$(granted_buffer)
  local rows
  rows=$(taskset -c 1 "$bin" bench --target 127.0.0.1:$port --admin 127.0.0.1:$mgmt --pid "$daemon_pid" \
    --duration "$seconds" --quiet --markdown "$@")
  echo "$rows"
  awk -v t="$title" '{ print t "\t" $0 }' <<< "$rows" >> "$results"
  echo; echo "Receive buffer granted: $granted bytes."
  stop_daemon
}

# ns_per_line TITLE RATE: the ns/metric column of that workload's row at that target rate.
ns_per_line() {
  awk -F'\t' -v t="$1" -v r="$2" '$1 == t { split($2, c, "|"); gsub(/ /, "", c[2]); gsub(/ /, "", c[7]);
    if (c[2] == r) print c[7] }' "$results"
}

store="backends: ['graphite', 'store'], store: { dataDir: '$store_dir' }"

echo "# Ingest, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
echo
echo "- Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), Linux $(uname -r)"
echo "- Sysctls: net.core.rmem_max=$(sysctl -n net.core.rmem_max) net.core.rmem_default=$(sysctl -n net.core.rmem_default)"
echo "- histd: \`udpReceiveBufferBytes: $buffer\` (asked with SO_RCVBUFFORCE, the kernel doubles it), flushInterval 2000,"
echo "  graphite backend without a host (Etsy's: every flush computed, nothing sent) unless the"
echo "  title says 'store on'; pinned to CPU 0 with \`taskset\`; the generator pinned to CPU 1."
echo "- ns/metric: the daemon's CPU time (user + system, /proc, flushes included) per line received."
echo "- $seconds s per run; 'max' is as fast as the generator sends."

workload "1 line/datagram, 1k counter names" "" --lines 1 --names 1000 --rate 200k,400k,600k,0
workload "25 lines/datagram, 1k counter names" "" --lines 25 --names 1000 --rate 4M,6M,0
workload "25 lines/datagram, 100k counter names" "" --lines 25 --names 100000 --rate 4M,5M,0
workload "100 lines/datagram, 1k counter names (saturated)" "" --lines 100 --names 1000 --rate 0
workload "25 lines/datagram, 1k timer names" "" --lines 25 --names 1000 --mix timers --rate 4M,5M,0
workload "25 lines/datagram, 100k timer names" "" --lines 25 --names 100000 --mix timers --rate 4M,5M,0
workload "25 lines/datagram, 100k counter names in 4 orders" "" --lines 25 --names 100000 --orders 4 --rate 4M
workload "25 lines/datagram, 100k timer names in 4 orders" "" --lines 25 --names 100000 --orders 4 --mix timers --rate 4M
workload "25 lines/datagram, 1k names, timer-heavy (90% ms, 10% c)" "" --lines 25 --names 1000 --mix timer-heavy --rate 4M,5M,6M,0
workload "25 lines/datagram, 100k names, timer-heavy (90% ms, 10% c)" "" --lines 25 --names 100000 --mix timer-heavy --rate 3M,4M,5M,0
workload "25 lines/datagram, 1k names, mixed (c, ms, g, s in turn)" "" --lines 25 --names 1000 --mix mixed --rate 4M,0
workload "25 lines/datagram, 100k names, mixed (c, ms, g, s in turn)" "" --lines 25 --names 100000 --mix mixed --rate 4M,0
workload "25 lines/datagram, 1k names, DogStatsD-tagged counters (|#env:prod,host:hN)" "" --lines 25 --names 1000 --mix tagged --rate 4M,0
workload "25 lines/datagram, 1M counter names" "" --lines 25 --names 1000000 --rate 1M,2M,4M
# Carbon listening: the same 1M names with every flush delivered to a stand-in that reads and
# discards (bench/carbon_sink.py, on CPU 1 beside the generator); it prints what it received.
if [[ -z $only || "1M counter names, carbon listening" == *"$only"* ]]; then
  taskset -c 1 python3 bench/carbon_sink.py 12003 $((seconds + 12)) > /tmp/histd-bench-carbon.txt &
  carbon_pid=$!
  sleep 0.5
  workload "25 lines/datagram, 1M counter names, carbon listening" \
    "graphiteHost: '127.0.0.1', graphitePort: 12003" --lines 25 --names 1000000 --rate 1M
  wait "$carbon_pid" || true
  echo "The carbon stand-in: $(cat /tmp/histd-bench-carbon.txt)"
fi
workload "store on: 25 lines/datagram, 1k names, timer-heavy" "$store" --lines 25 --names 1000 --mix timer-heavy --rate 4M,5M,0
workload "store on: 25 lines/datagram, 100k names, timer-heavy" "$store" --lines 25 --names 100000 --mix timer-heavy --rate 3M,4M,0
workload "store on: 25 lines/datagram, 1k names, mixed" "$store" --lines 25 --names 1000 --mix mixed --rate 4M,0
workload "store on: 25 lines/datagram, 100k names, mixed" "$store" --lines 25 --names 100000 --mix mixed --rate 4M,0

if [[ -s $results ]]; then
  echo; echo "### A timer line against a counter line (CPU per line at the same target rate)"; echo
  echo "| names | rate | counter ns/line | timer ns/line | timer / counter |"
  echo "|---|---|---|---|---|"
  for case in "1k|4.00M" "1k|5.00M" "100k|4.00M" "100k|5.00M" "100k in 4 orders|4.00M"; do
    names=${case%|*} rate=${case#*|}
    c=$(ns_per_line "25 lines/datagram, ${names/k/k counter names}" "$rate")
    t=$(ns_per_line "25 lines/datagram, ${names/k/k timer names}" "$rate")
    [[ -n $c && -n $t ]] || continue
    echo "| $names | $rate | $c | $t | $(awk -v c="$c" -v t="$t" 'BEGIN { printf "%.2f", t / c }') |"
  done
fi

[[ -z $only ]] || exit 0
echo; echo "### Baseline: a bare recvmmsg receiver on CPU 0 (16 MiB buffer), the generator on CPU 1"; echo
for lines in 1 25 100; do
  taskset -c 1 "$bin" bench --baseline --baseline-cpu 0 --lines "$lines" --names 1000 --duration "$seconds" \
    --quiet --markdown --rate 0 | if [[ $lines == 1 ]]; then cat; else tail -n +3; fi
done
