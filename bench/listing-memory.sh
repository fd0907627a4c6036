#!/usr/bin/env bash
# Memory of big answers (the third probe's N13): a daemon holding 100,000 series in its store
# answers 50 listings of all of them at once (`/api/v1/series?limit=100000`, ~8 MB each);
# its resident memory is sampled before, at the peak, and 5 s and 20 s after the last answer.
# Prints one markdown row per binary given (default: the release build), so two builds are
# compared in one run on the same machine.
# Usage: bench/listing-memory.sh [BINARY ...]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
  cargo build --release -q -p histd
  set -- target/release/histd
fi
command -v curl >/dev/null || { echo "needs curl" >&2; exit 1; }
work=$(mktemp -d /tmp/histd-listing.XXXXXX)
pid=
trap '[ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null; rm -rf "$work"' EXIT

rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }

measure() {
  local bin=$1 udp=28125 http=28127
  rm -rf "${work:?}"/*
  cat > "$work/config.js" <<CONFIG
{ address: '127.0.0.1', port: $udp, mgmt_port: 0, http_port: $http, flushInterval: 1000,
  backends: ['store'], store: { dataDir: '$work/data' } }
CONFIG
  "$bin" run --config "$work/config.js" 2> "$work/log" &
  pid=$!
  for _ in $(seq 100); do grep -q ' ready ' "$work/log" && break; sleep 0.1; done
  # 100,000 counters, 100 lines a datagram, sent twice (UDP on loopback may drop a few).
  python3 - "$udp" <<'PY'
import socket, sys, time
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(2):
    for start in range(0, 100_000, 100):
        sock.sendto("\n".join(f"listing.series.{i:06d}:1|c" for i in range(start, start + 100)).encode(), ("127.0.0.1", int(sys.argv[1])))
        if start % 5000 == 0:
            time.sleep(0.01)
PY
  local total=0
  for _ in $(seq 100); do
    total=$(curl -s "http://127.0.0.1:$http/api/v1/series?limit=1&match=listing.*" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')
    [ "$total" -ge 100000 ] && break
    sleep 0.5
  done
  sleep 2
  local before peak=0 now
  before=$(rss_kib "$pid")
  for _ in $(seq 50); do
    curl -s -o /dev/null "http://127.0.0.1:$http/api/v1/series?limit=100000" &
  done
  while [ "$(jobs -rp | wc -l)" -gt 1 ]; do
    now=$(rss_kib "$pid"); [ "$now" -gt "$peak" ] && peak=$now
    sleep 0.05
  done
  sleep 5
  local after5 after20
  after5=$(rss_kib "$pid")
  sleep 15
  after20=$(rss_kib "$pid")
  kill -TERM "$pid"; wait "$pid" || true; pid=
  printf '| %s | %s | %d | %d | %d | %d |\n' "$bin" "$total" $((before / 1024)) $((peak / 1024)) $((after5 / 1024)) $((after20 / 1024))
}

echo "histd $(git rev-parse --short HEAD)$(git diff --quiet || echo ' with uncommitted changes'), $(nproc) cores, $(date -u +%F)"
echo
echo "| binary | series stored | RSS before (MB) | peak during 50 listings (MB) | 5 s after (MB) | 20 s after (MB) |"
echo "|---|---|---|---|---|---|"
for bin in "$@"; do
  measure "$bin"
done
