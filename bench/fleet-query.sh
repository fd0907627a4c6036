#!/usr/bin/env bash
# What answering for the group costs (issue 49, item 3): two globals each holding half of
# 1,000 timer series (`fleet.latency{host=h0000..h0999}`, 20 samples each, in 3 flushes), one
# listing the other in `global.peers`, and one histd holding all of them. The median of
# REQUESTS answers (curl, loopback) of: the 1-hour histogram of all 1,000 series, and their
# heatmap in 1-minute steps, asked of the global for itself (`local=1`), for the group, and of
# the single histd; and `quantile(fleet.latency, 0.99)` per minute the same three ways.
# The three daemons share the machine with curl: compare the rows of one run.
# Usage: bench/fleet-query.sh [requests]   (default 50; needs a release build: cargo build --release -p histd)
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-50}
binary=target/release/histd
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start() { # name http_port tcp_port extra
  cat > "$work/$1.js" <<CONFIG
{ servers: [ { server: "./servers/tcp", address: "127.0.0.1", port: $3 } ], mgmt_port: 0, http_port: $2,
  flushInterval: 1000, backends: ["store"], store: { dataDir: "$work/$1" }, $4 }
CONFIG
  "$binary" run --config "$work/$1.js" 2> "$work/$1.log" &
  pids+=($!)
}
pa=$(free_port); pb=$(free_port); ps=$(free_port); ta=$(free_port); tb=$(free_port); ts=$(free_port)
start a "$pa" "$ta" "global: { peers: [\"http://127.0.0.1:$pb\"] }"
start b "$pb" "$tb" ""
start single "$ps" "$ts" ""
sleep 1.5
python3 - "$ta" "$tb" "$ts" <<'PY'
import socket, sys, time
ta, tb, ts = (int(p) for p in sys.argv[1:4])
def send(port, text):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(text.encode())
for flush in range(3):
    half = {ta: [], tb: []}
    every = []
    for host in range(1000):
        lines = "".join(f"fleet.latency:{(host * 7 + i * 13) % 900 + 1}.5|ms|#host:h{host:04d}\n" for i in range(20))
        half[ta if host % 2 == 0 else tb].append(lines)
        every.append(lines)
    send(ta, "".join(half[ta])); send(tb, "".join(half[tb])); send(ts, "".join(every))
    time.sleep(1.2)
PY
sleep 2.5
median() { # url
  for _ in $(seq "$requests"); do curl -s -o /dev/null -w '%{time_total}\n' "$1"; done |
    sort -n | awk '{ v[NR] = $1 } END { printf "%.2f", v[int((NR + 1) / 2)] * 1000 }'
}
echo "# $(date -u +%FT%TZ), histd commit $(git rev-parse --short HEAD), $(nproc) cores, $requests requests each (median ms)"
printf '%-48s %10s %10s %10s\n' "answer" "own part" "group" "single"
for route in "histogram?name=fleet.latency&from=-1h" "heatmap?name=fleet.latency&from=-1h&step=1m" \
             "query?expr=quantile(fleet.latency,0.99)&from=-1h&step=1m"; do
  own=$(median "http://127.0.0.1:$pa/api/v1/$route&local=1")
  group=$(median "http://127.0.0.1:$pa/api/v1/$route")
  single=$(median "http://127.0.0.1:$ps/api/v1/$route")
  printf '%-48s %10s %10s %10s\n' "${route%%\?*} ${route#*\?}" "$own" "$group" "$single"
done
count() { curl -s "$1" | python3 -c 'import json,sys; a=json.load(sys.stdin); print(a.get("count"), a.get("partial"))'; }
echo "histogram count (group, partial): $(count "http://127.0.0.1:$pa/api/v1/histogram?name=fleet.latency&from=-1h"); single: $(count "http://127.0.0.1:$ps/api/v1/histogram?name=fleet.latency&from=-1h")"
