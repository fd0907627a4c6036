#!/usr/bin/env bash
# N8 of the 2026-11-27 probe, run again: a local's forward.spoolDir on an 8 MiB tmpfs, its
# global down for 30 s while 100,000 lines/s of 100k counter names go through the local (the
# spool fills its disk), then the global up. Prints what was sent and what the global stored of
# a tracker counter, the local's forward counters, and the files left in the spool.
#
# Needs root (the tmpfs mount). Loopback only; every loop bounded in time.
# Usage: bench/probes/n8-full-spool.sh [HISTD_BINARY]   (default target/release/histd)
set -euo pipefail
BIN=${1:-target/release/histd}
[ -x "$BIN" ] || { echo "no histd binary at $BIN (cargo build --release -p histd)"; exit 2; }
WORK=$(mktemp -d /tmp/histd-n8.XXXXXX)
mkdir -p "$WORK/spool" "$WORK/global"
mount -t tmpfs -o size=8m tmpfs "$WORK/spool"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    sleep 1
    umount "$WORK/spool" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
GLOBAL_HTTP=$(free_port); GLOBAL_MGMT=$(free_port); LOCAL_UDP=$(free_port); LOCAL_MGMT=$(free_port)
stats() { python3 - "$1" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"stats\n")
data = b""
while not data.endswith(b"END\n\n"):
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
print(data.decode())
EOF
}

cat > "$WORK/local.js" <<EOF
{ address: '127.0.0.1', port: $LOCAL_UDP, mgmt_port: $LOCAL_MGMT, flushInterval: 1000, backends: ['forward'],
  forward: { nodes: ['http://127.0.0.1:$GLOBAL_HTTP'], source: 'n8-local', checkInterval: 1000, spoolDir: '$WORK/spool' } }
EOF
cat > "$WORK/global.js" <<EOF
{ address: '127.0.0.1', port: 0, mgmt_port: $GLOBAL_MGMT, http_port: $GLOBAL_HTTP, flushInterval: 1000,
  backends: ['store'], store: { dataDir: '$WORK/global' }, global: { accept: true } }
EOF

"$BIN" run --config "$WORK/local.js" > "$WORK/local.log" 2>&1 & PIDS+=($!)
sleep 1
echo "global down; sending for 30 s"
python3 - "$LOCAL_UDP" "$WORK/sent" <<'EOF'
import socket, sys, time
port, out = int(sys.argv[1]), sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
start, sent, name = time.time(), 0, 0
while time.time() - start < 30:
    second = time.time()
    for _ in range(1000):  # 1,000 datagrams of 99 names and the tracker: 100,000 lines a second
        lines = [f"n8.s{(name + k) % 100000}:1|c" for k in range(99)]
        name += 99
        lines.append("n8.tracker:1|c")
        s.sendto("\n".join(lines).encode(), ("127.0.0.1", port))
        sent += 1
    time.sleep(max(0.0, 1.0 - (time.time() - second)))
open(out, "w").write(str(sent))
EOF
SENT=$(cat "$WORK/sent")
echo "spool disk at the end of the outage: $(df -h --output=used,size "$WORK/spool" | tail -1)"
"$BIN" run --config "$WORK/global.js" > "$WORK/global.log" 2>&1 & PIDS+=($!)
echo "global up; waiting for the local to drain (at most 90 s)"
for _ in $(seq 90); do
    sleep 1
    WAITING=$(stats "$LOCAL_MGMT" | awk -F': ' '/^forward.buffered_bytes/ {print $2}')
    [ "${WAITING:-1}" = "0" ] && break
done
sleep 3
STORED=$(curl -s "http://127.0.0.1:$GLOBAL_HTTP/api/v1/query?expr=count(n8.tracker)&from=-10m&step=3600" |
    python3 -c 'import json,sys; print(int(sum(p[1] or 0 for p in json.load(sys.stdin)["points"])))')
echo "tracker: sent $SENT, stored at the global $STORED"
echo "local forward counters:"
stats "$LOCAL_MGMT" | grep -E "^forward\.(errors|dropped_points|buffered_bytes|queue_full|delivered|retries|points_out)" || true
echo "files left in the spool: $(ls "$WORK/spool" | wc -l) ($(ls "$WORK/spool" | grep -c '\.tmp$' || true) .tmp)"
echo "local log, errors and warnings:"
grep -E "ERROR|WARN" "$WORK/local.log" | sed -E 's/^[^ ]+ +//' | cut -c1-200 | sort | uniq -c | head
