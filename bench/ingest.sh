#!/usr/bin/env bash
# Ingest benchmarks of issue "ingest at line rate": histd pinned to CPU 0, the generator to
# CPU 1, each workload at several target rates, then the bare-receiver baseline in the same run.
# Usage: bench/ingest.sh [seconds-per-run] [pattern]   (writes nothing; prints tables)
#   pattern: run only the workloads whose title contains it (e.g. "100k"), and no baseline
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
only=${2:-}
cargo build --release -q -p histd
bin=target/release/histd
port=18125
mgmt=18126

echo "# $(date -u +%FT%TZ), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# sysctl: net.core.rmem_max=$(sysctl -n net.core.rmem_max) net.core.rmem_default=$(sysctl -n net.core.rmem_default)"
echo "# histd asks for a 16 MiB receive buffer (SO_RCVBUFFORCE as root, so rmem_max does not cap it)"

# run_daemon CONFIG-EXTRA -> sets $daemon_pid
run_daemon() {
  cat > /tmp/histd-bench.js <<CONFIG
{ port: $port, address: '127.0.0.1', mgmt_port: $mgmt, flushInterval: 2000, $1 }
CONFIG
  taskset -c 0 "$bin" run -c /tmp/histd-bench.js 2>/tmp/histd-bench.log &
  daemon_pid=$!
  for _ in $(seq 50); do grep -q ' ready ' /tmp/histd-bench.log 2>/dev/null && return; sleep 0.1; done
  echo "histd did not start:"; cat /tmp/histd-bench.log; exit 1
}

stop_daemon() {
  kill -TERM "$daemon_pid"; wait "$daemon_pid" || true
}

# workload TITLE CONFIG-EXTRA BENCH-ARGS...
workload() {
  local title=$1 extra=$2; shift 2
  [[ -z $only || $title == *"$only"* ]] || return 0
  echo; echo "## $title"
  run_daemon "$extra"
  taskset -c 1 "$bin" bench --target 127.0.0.1:$port --admin 127.0.0.1:$mgmt --pid "$daemon_pid" \
    --duration "$seconds" --quiet "$@"
  stop_daemon
}

workload "1 line/datagram, 1k names" "" --lines 1 --names 1000 --rate 200k,400k,600k,0
workload "25 lines/datagram, 1k names" "" --lines 25 --names 1000 --rate 4M,6M,7M,0
workload "25 lines/datagram, 100k names" "" --lines 25 --names 100000 --rate 2M,3M,4M,5M,0
workload "100 lines/datagram, 1k names (saturated)" "" --lines 100 --names 1000 --rate 0
workload "25 lines/datagram, 1k timer names" "" --lines 25 --names 1000 --mix timers --rate 2M,3M,4M,0
workload "25 lines/datagram, 1M names" "" --lines 25 --names 1000000 --rate 1M,2M,4M

[[ -z $only ]] || exit 0
echo; echo "## baseline: bare recvmmsg receiver on CPU 0, generator on CPU 1"
for lines in 1 25 100; do
  taskset -c 1 "$bin" bench --baseline --baseline-cpu 0 --lines "$lines" --names 1000 --duration "$seconds" --quiet --rate 0
done
