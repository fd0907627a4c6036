#!/usr/bin/env bash
# `histd proxy` throughput (issue "One histogram across many machines"): 25-line datagrams over
# 1000 counter names sent to the proxy, which routes every line to one of two histd
# aggregators. The proxy is pinned to CPU 0 with one reader thread; the generator and the two
# aggregators share CPU 1. Loss is counted by the kernel at the proxy's port (`--count
# kernel`); ns/metric is the proxy's CPU time per line. After the runs, the proxy's own
# counts and the lines the aggregators received (what the proxy sent and they got).
# Usage: bench/proxy.sh [seconds-per-run]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
cargo build --release -q -p histd
bin=target/release/histd
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"' EXIT

echo "# $(date -u +%FT%TZ), $(git rev-parse --short HEAD), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# sysctl: net.core.rmem_max=$(sysctl -n net.core.rmem_max) net.core.rmem_default=$(sysctl -n net.core.rmem_default); every socket asks for 16 MiB (SO_RCVBUFFORCE as root)"

for n in 1 2; do
  cat > "$dir/agg$n.js" <<CONFIG
{ address: '127.0.0.1', port: $((19000 + n * 10)), mgmt_port: $((19001 + n * 10)), http_port: $((19002 + n * 10)),
  flushInterval: 2000, backends: [], udpReaders: 1 }
CONFIG
  taskset -c 1 "$bin" run -c "$dir/agg$n.js" 2>"$dir/agg$n.log" &
  pids+=($!)
done
cat > "$dir/proxy.js" <<CONFIG
{ nodes: [ {host: '127.0.0.1', port: 19010, adminport: 19011}, {host: '127.0.0.1', port: 19020, adminport: 19021} ],
  host: '127.0.0.1', port: 19000, mgmt_port: 19001, checkInterval: 1000, udpReaders: 1 }
CONFIG
taskset -c 0 "$bin" proxy -c "$dir/proxy.js" 2>"$dir/proxy.log" &
proxy=$!
pids+=($proxy)
for _ in $(seq 50); do grep -q 'proxy ready' "$dir/proxy.log" 2>/dev/null && break; sleep 0.1; done
sleep 1.5 # the first health checks

echo; echo "## 25 lines/datagram, 1000 counter names, through the proxy to 2 aggregators"
taskset -c 1 "$bin" bench --target 127.0.0.1:19000 --count kernel --pid "$proxy" \
  --duration "$seconds" --quiet --lines 25 --names 1000 --rate 1M,2M,3M,0
sleep 2.5 # the aggregators' next flush
# admin PORT COMMAND: one management command's reply
admin() {
  exec 3<>"/dev/tcp/127.0.0.1/$1"
  printf '%s\nquit\n' "$2" >&3
  timeout 5 cat <&3 || true
  exec 3<&-
}
echo
echo "proxy stats:"
admin 19001 stats | grep -E '^(proxy|node)\.' | sed 's/^/  /'
for n in 1 2; do
  echo "aggregator $n: $(admin $((19001 + n * 10)) stats | grep -E '^messages\.(metrics_received|kernel_drops):' | tr '\n' ' ')"
done
