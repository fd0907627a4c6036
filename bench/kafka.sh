#!/usr/bin/env bash
# Forwarding through Kafka against forwarding over HTTP (issue 35, item 6), end to end on this
# machine: three KRaft brokers (Apache Kafka from Maven Central, the classpath scripts/test
# writes; topic of 6 partitions, replication factor 3, min.insync.replicas 2), one local histd
# (pinned to CPU 0) forwarding every 2 s to one global histd, fed 25-line datagrams of 100k
# names of all four types (`--mix mixed`) at 1M lines/s and then as fast as the generator
# goes. The global, the generator and the brokers share CPU 1.
# Printed per mode: the generator's table (the local's loss, ns a line, RSS), then per flush:
# the local's and the global's CPU, the bytes the local sent, what the topic holds (one
# replica), and the delay from a line sent to the global merging it and from the local's
# delivery (`forward.points_out` moving) to the global's merge (`forward_series_merged`
# moving), and from the local's flush (its /api/v1/live interval) to that delivery, over
# SAMPLES flushes of one series each: min, median, max.
# Usage: bench/kafka.sh [seconds-per-rate [samples [mix]]]   (mix: histd bench --mix, `mixed` by
# default; `counters` for the workload histd keeps lossless at the generator's ceiling)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
samples=${2:-20}
mix=${3:-mixed}
cargo build --release -q -p histd
bin=target/release/histd
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "# $(date -u +%FT%TZ), $(git rev-parse --short HEAD), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# rmem_max=$(sysctl -n net.core.rmem_max); histd asks for a 16 MiB receive buffer"

# shellcheck source=bench/kafka-brokers.sh
source bench/kafka-brokers.sh
start_brokers 3 "$work" histd-bench 6 2

cpu_ms() { # PID: user + system CPU in ms
  awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) * 1000 / hz }' "/proc/$1/stat"
}
stat() { # MGMT_PORT NAME: one value of the management `stats` reply (read in bash: the
  # connection stays open after END, so a reader that waits for end of file would hang)
  exec 3<>"/dev/tcp/127.0.0.1/$1"
  printf 'stats\n' >&3
  local line value=""
  while IFS= read -r -t 2 line <&3; do
    [[ $line == END* ]] && break
    [[ $line == "$2: "* ]] && value=${line#"$2: "}
  done
  exec 3<&-
  echo "$value"
}
ready() { # LOG
  for _ in $(seq 100); do grep -q ' ready ' "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "not ready: $1" >&2; return 1
}

run() { # MODE (http | kafka)
  local mode=$1 forward global
  if [ "$mode" = http ]; then
    forward="nodes: ['http://127.0.0.1:18227']"
    global="accept: true"
  else
    forward="kafka: { brokers: ['127.0.0.1:19191'], topic: 'histd-bench' }"
    global="kafka: { brokers: ['127.0.0.1:19191'], topic: 'histd-bench', group: 'bench-$mode-$RANDOM' }"
  fi
  cat > "$work/global.js" <<CONFIG
{ address: '127.0.0.1', port: 0, mgmt_port: 18226, http_port: 18227, flushInterval: 2000, backends: [], global: { $global } }
CONFIG
  cat > "$work/local.js" <<CONFIG
{ address: '127.0.0.1', port: 18125, mgmt_port: 18126, http_port: 18128, flushInterval: 2000, backends: ['forward'],
  forward: { source: 'bench', $forward } }
CONFIG
  taskset -c 1 "$bin" run -c "$work/global.js" 2>"$work/global.log" &
  local global_pid=$!
  ready "$work/global.log"
  taskset -c 0 "$bin" run -c "$work/local.js" 2>"$work/local.log" &
  local local_pid=$!
  ready "$work/local.log"
  sleep 3 # the Kafka consumer joins its group
  echo; echo "## forwarding over $mode"
  local local_cpu global_cpu started
  local_cpu=$(cpu_ms "$local_pid")
  global_cpu=$(cpu_ms "$global_pid")
  started=$(date +%s.%N)
  taskset -c 1 "$bin" bench --target 127.0.0.1:18125 --admin 127.0.0.1:18126 --pid "$local_pid" \
    --duration "$seconds" --quiet --lines 25 --names 100000 --mix "$mix" --rate 1M,0 | tail -n +2
  sleep 5 # the last flushes delivered and merged
  local flushes series bytes merged
  flushes=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%d", (b - a) / 2 }')
  series=$(stat 18126 forward.points_out)
  bytes=$(stat 18126 forward.bytes_out)
  merged=$(stat 18226 messages.forward_series_merged)
  local local_used global_used
  local_used=$(awk -v a="$local_cpu" -v b="$(cpu_ms "$local_pid")" 'BEGIN { print b - a }')
  global_used=$(awk -v a="$global_cpu" -v b="$(cpu_ms "$global_pid")" 'BEGIN { print b - a }')
  echo "flushes ${flushes:-?}; series forwarded ${series:-?}, merged at the global ${merged:-?}"
  awk -v f="${flushes:-1}" -v l="$local_used" -v g="$global_used" -v b="${bytes:-0}" 'BEGIN {
    printf "local CPU (ingest and forwarding) %.0f ms; the global'"'"'s CPU %.1f ms a flush; %.0f bytes a flush sent\n", l, g / f, b / f }'
  # The delay, in $samples flushes: one new line sent, then the local's delivered series
  # (`forward.points_out`: posted and answered, or committed to the topic) and the global's
  # merged series (`messages.forward_series_merged`) watched until each moves.
  local delivered merged_at line_to_merge=() delivery_to_merge=() flush_to_delivery=()
  for _ in $(seq "$samples"); do
    local out_before merged_before sent out_at=0
    out_before=$(stat 18126 forward.points_out)
    merged_before=$(stat 18226 messages.forward_series_merged)
    sent=$(date +%s%N)
    printf 'bench.delay:1|c' > /dev/udp/127.0.0.1/18125
    for _ in $(seq 400); do
      delivered=$(stat 18126 forward.points_out)
      if [ "$out_at" = 0 ] && [ "${delivered:-0}" != "${out_before:-0}" ]; then
        out_at=$(date +%s%N)
        # How long ago the local flushed (its interval's elapsed time, from /api/v1/live).
        flush_to_delivery+=($(curl -s 'http://127.0.0.1:18128/api/v1/live?limit=1' |
          sed -n 's/.*"elapsed_s":\([0-9.]*\).*/\1/p' | awk '{ printf "%d", $1 * 1000 }'))
      fi
      [ "$(stat 18226 messages.forward_series_merged)" != "${merged_before:-0}" ] && break
      sleep 0.01
    done
    merged_at=$(date +%s%N)
    [ "$out_at" = 0 ] && out_at=$merged_at # merged before the local's answer was seen
    line_to_merge+=($(( (merged_at - sent) / 1000000 )))
    delivery_to_merge+=($(( (merged_at - out_at) / 1000000 )))
  done
  summary() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { printf "min %d, median %d, max %d ms (%d flushes)", v[1], v[int((NR + 1) / 2)], v[NR], NR }'; }
  echo "from a line sent to the global merging it: $(summary "${line_to_merge[@]}") (the local's flush comes within 2 s of the line)"
  echo "from the local's flush to its delivery (answered, or committed to the topic): $(summary "${flush_to_delivery[@]}")"
  echo "from the local's delivery to the global merging it: $(summary "${delivery_to_merge[@]}")"
  if [ "$mode" = kafka ]; then
    local segments
    segments=$(find "$work/data1" -path '*histd-bench-*' -name '*.log' -printf '%s\n' | awk '{ sum += $1 } END { print sum + 0 }')
    echo "the topic's log segments hold $segments bytes on one broker (one replica; $(awk -v b="$segments" -v f="${flushes:-1}" 'BEGIN { printf "%.0f", b / f }') a flush)"
  fi
  kill -TERM "$local_pid" "$global_pid"; wait "$local_pid" "$global_pid" || true
}

run http
run kafka
