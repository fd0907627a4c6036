#!/usr/bin/env bash
# A/B ingest comparison of two histd builds in one run, same settings for both: each daemon
# pinned to CPU 0, the generator to CPU 1, the same workloads, alternating A and B per
# workload so that machine noise hits both alike. Prints a table per workload.
# Usage: bench/ab.sh BINARY_A BINARY_B [seconds-per-run] [rounds] [workload-title-pattern]
#   AB_BARE=1: each round also runs the bare receiver (B's binary) on the workload's datagrams,
#   so a ratio to it compares runs made side by side.
#   e.g. git worktree add /tmp/before HEAD~1 && (cd /tmp/before && cargo build --release -p histd)
#        bench/ab.sh /tmp/before/target/release/histd target/release/histd 5
set -euo pipefail
cd "$(dirname "$0")/.."
a=$1 b=$2 seconds=${3:-5} rounds=${4:-1} only=${5:-}
generator=$b
port=18125
mgmt=18126
echo "# $(date -u +%FT%TZ), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# A: $a"
echo "# B: $b"
echo "# both ask for a 16 MiB receive buffer (udpReceiveBufferBytes default); rmem_max=$(sysctl -n net.core.rmem_max)"

run() { # BINARY TITLE BENCH-ARGS...
  local bin=$1; shift
  cat > /tmp/histd-ab.js <<CONFIG
{ port: $port, address: '127.0.0.1', mgmt_port: $mgmt, http_port: 0, flushInterval: 2000 }
CONFIG
  taskset -c 0 "$bin" run -c /tmp/histd-ab.js 2>/tmp/histd-ab.log &
  local pid=$!
  for _ in $(seq 50); do grep -q ' ready ' /tmp/histd-ab.log 2>/dev/null && break; sleep 0.1; done
  taskset -c 1 "$generator" bench --target 127.0.0.1:$port --admin 127.0.0.1:$mgmt --pid "$pid" \
    --duration "$seconds" --quiet "$@" | tail -n +3
  kill -TERM "$pid"; wait "$pid" || true
}

workload() { # TITLE BENCH-ARGS...
  local title=$1; shift
  [[ -z $only || $title == *"$only"* ]] || return 0
  echo; echo "## $title"
  echo "    target     sent/s     received    loss % kernel drops    ns/metric    µs/datagram  RSS MB peak"
  for _ in $(seq "$rounds"); do
    for side in A B; do
      local bin=$a; [[ $side == B ]] && bin=$b
      run "$bin" "$@" | sed "s/^/$side /"
    done
    if [[ -n ${AB_BARE:-} ]]; then bare "$@"; fi
  done
}

bare() { # BENCH-ARGS... (of a workload: its --lines and --names)
  local lines names
  lines=$(sed -n 's/.*--lines \([0-9]*\).*/\1/p' <<< "$*")
  names=$(sed -n 's/.*--names \([0-9]*\).*/\1/p' <<< "$*")
  taskset -c 1 "$b" bench --baseline --baseline-cpu 0 --lines "$lines" --names "$names" --duration "$seconds" \
    --quiet --rate 0 | tail -n +3 | sed "s/^/bare /"
}

workload "25 lines/datagram, 1k counter names" --lines 25 --names 1000 --rate 6M,0
workload "25 lines/datagram, 100k counter names" --lines 25 --names 100000 --rate 5M,0
workload "25 lines/datagram, 1k timer names (all ms)" --lines 25 --names 1000 --mix timers --rate 4M,6M,0
workload "25 lines/datagram, 100k timer names (all ms)" --lines 25 --names 100000 --mix timers --rate 4M,0
workload "100 lines/datagram, 1k counter names" --lines 100 --names 1000 --rate 0
workload "25 lines/datagram, 1k names, timer-heavy (90% ms, 10% c)" --lines 25 --names 1000 --mix timer-heavy --rate 4M,6M,0

if [[ -z $only || bare == *"$only"* ]]; then
  echo; echo "## bare receiver (B's binary), 1k names"
  for _ in $(seq "$rounds"); do
    for lines in 100 25; do
      taskset -c 1 "$b" bench --baseline --baseline-cpu 0 --lines "$lines" --names 1000 --duration "$seconds" \
        --quiet --rate 0 | tail -n +3 | sed "s/^/$lines lines /"
    done
  done
fi
