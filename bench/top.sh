#!/usr/bin/env bash
# What the live view (`histd top`, `/api/v1/live`) costs: first the criterion bench of one poll's
# work under the aggregation lock at 100k series; then the same 100k-name counter load twice:
# without a poller, then with `/api/v1/live` asked every second (as `histd top` does, limit
# 200, sorted by rate). histd pinned to CPU 0, the generator and the poller on CPU 1; loss and
# CPU per line as `histd bench` counts them (the management port, the kernel's drops).
# Usage: bench/top.sh [seconds-per-run]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
cargo build --release -q -p histd
bin=target/release/histd
port=18135 mgmt=18136 http=18137
echo "# $(date -u +%FT%TZ), $(git rev-parse --short HEAD), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# sysctl: net.core.rmem_max=$(sysctl -n net.core.rmem_max); histd asks for a 16 MiB receive buffer (SO_RCVBUFFORCE as root)"
echo; echo "## one poll at 100k series (90k counters, 10k timers of 150 values)"
cargo bench -q -p histd --bench live -- --warm-up-time 2 --measurement-time 8 2>&1 | grep -E "time:|^live"

cat > /tmp/histd-top-bench.js <<CONFIG
{ port: $port, address: '127.0.0.1', mgmt_port: $mgmt, http_port: $http, flushInterval: 10000, backends: [] }
CONFIG

run() {
  local title=$1 poll=$2
  echo; echo "## $title"
  taskset -c 0 "$bin" run -c /tmp/histd-top-bench.js 2>/tmp/histd-top-bench.log &
  local pid=$! poller=
  for _ in $(seq 50); do grep -q ' ready ' /tmp/histd-top-bench.log 2>/dev/null && break; sleep 0.1; done
  if [[ $poll == yes ]]; then
    # Bounded: stops after the runs' length plus a margin, or when histd is gone.
    taskset -c 1 bash -c "for _ in \$(seq $((seconds * 3 + 20))); do curl -sf 'http://127.0.0.1:$http/api/v1/live?limit=200&sort=rate' -o /dev/null || exit 0; sleep 1; done" &
    poller=$!
  fi
  taskset -c 1 "$bin" bench --target 127.0.0.1:$port --admin 127.0.0.1:$mgmt --pid "$pid" \
    --duration "$seconds" --quiet --lines 25 --names 100000 --rate 3M,5M
  [[ -n $poller ]] && kill "$poller" 2>/dev/null || true
  kill -TERM "$pid"; wait "$pid" || true
}
run "100k counter names, nobody polling" no
run "100k counter names, /api/v1/live polled every second" yes
