#!/usr/bin/env bash
# Long run: does histd stay flat? For MINUTES (default 30): about 20k lines/s of counters, tagged
# timers and gauges over UDP whose names churn (CHURN, default 2000: 40% of it new counter names
# a minute, the old ones idle and deleted: deleteIdleStats), a config reload (SIGHUP) every minute that switches the
# percentiles, the graphite backend's carbon going away for two minutes in every ten and coming
# back, the store on. Every 30 s: the daemon's RSS, series held, kernel drops and graphite's
# dropped points; at the end, lines sent against lines received.
# Settings that favour histd: its 16 MiB receive buffer is granted (run as root: SO_RCVBUFFORCE).
# histd on CPU 0, the sender on CPU 1, 10 s flushes.
# Usage: bench/soak.sh [minutes] [churn]
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-30}
churn=${2:-2000}
seconds=$((minutes * 60))
cargo build --release -q -p histd
bin=target/release/histd
port=18245 mgmt=18246 http=18247 carbon=18203
work=$(mktemp -d /tmp/histd-soak.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

write_config() {
  cat > "$work/config.js" <<CONFIG
{ port: $port, address: '127.0.0.1', mgmt_port: $mgmt, http_port: $http, flushInterval: 10000,
  deleteIdleStats: true, percentThreshold: $1, graphiteHost: '127.0.0.1', graphitePort: $carbon,
  backends: ['graphite', 'store'], store: { dataDir: '$work/store' } }
CONFIG
}
# The management `stats` reply, read once per sample; `stat KEY` reads a value from it.
stats=
read_stats() {
  stats=$(exec 3<>/dev/tcp/127.0.0.1/$mgmt && printf 'stats\nquit\n' >&3 && timeout 5 cat <&3) || stats=
}
stat() { awk -F': ' -v k="$1" '$1 == k {print $2}' <<<"$stats"; }

echo "# $(date -u +%FT%TZ), $(git rev-parse --short HEAD), $(nproc) cores, ${minutes} min, churn $churn"
write_config '[90]'
taskset -c 0 "$bin" run -c "$work/config.js" 2>"$work/log" &
daemon=$!; pids+=("$daemon")
for _ in $(seq 50); do grep -q ' ready ' "$work/log" 2>/dev/null && break; sleep 0.1; done
taskset -c 1 python3 bench/soak_sender.py $port "$seconds" 20000 "$churn" > "$work/sent" & sender=$!; pids+=("$sender")

echo
echo "| minute | RSS MB | counters held | timers held | gauges held | kernel drops | graphite dropped points | reloads |"
echo "|---|---|---|---|---|---|---|---|"
start=$(date +%s)
next_reload=60 next_sample=0 next_carbon=0
while kill -0 "$sender" 2>/dev/null; do
  t=$(( $(date +%s) - start ))
  if (( t >= next_sample )); then
    read_stats
    rss=$(awk '/VmRSS/ {printf "%.1f", $2/1024}' /proc/$daemon/status)
    echo "| $((t / 60)):$(printf %02d $((t % 60))) | $rss | $(stat budget.series.counters) | $(stat budget.series.timers) | $(stat budget.series.gauges) | $(stat messages.kernel_drops) | $(stat graphite.dropped_points.buffer_full) | $(stat messages.config_reloads) |"
    next_sample=$((next_sample + 30))
  fi
  if (( t >= next_reload )); then
    if (( (t / 60) % 2 )); then write_config '[50, 99]'; else write_config '[90]'; fi
    kill -HUP "$daemon"
    next_reload=$((next_reload + 60))
  fi
  # carbon: up for 8 minutes, away for 2, in every 10 (each stand-in ends by itself).
  if (( t >= next_carbon )); then
    python3 bench/carbon_sink.py $carbon 480 > "$work/carbon.$t" & pids+=($!)
    next_carbon=$((next_carbon + 600))
  fi
  sleep 1
done
sleep 12 # one more flush
read_stats
sent=$(cat "$work/sent")
received=$(stat messages.metrics_received)
echo
echo "lines sent $sent, received $received, kernel drops $(stat messages.kernel_drops), bad lines $(stat messages.bad_lines_seen)"
echo "graphite: $(stat graphite.points_out) points out, dropped: buffer_full $(stat graphite.dropped_points.buffer_full), shutdown $(stat graphite.dropped_points.shutdown); reloads $(stat messages.config_reloads), failures $(stat messages.config_reload_failures)"
kill -TERM "$daemon"; wait "$daemon" || true
