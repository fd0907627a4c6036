#!/usr/bin/env bash
# Memory with outputs that read (issue 53): the memory rows measured with the graphite backend
# sending nowhere (no graphiteHost: every flush computed, nothing sent) and sending every flush
# to a carbon stand-in that reads everything (bench/carbon_sink.py), side by side in one run.
# Each daemon pinned to CPU 0, the generator (`histd bench --count kernel`) to CPU 1, 2 s
# flushes, 25 lines a datagram, an 8 MiB receive buffer asked (SO_RCVBUFFORCE: 16 MiB granted);
# ROUNDS rounds, the builds alternating within each round; the median of the rounds is printed
# after the rows.
#
# Usage: bench/memory-carbon.sh [-s SECONDS] [-r ROUNDS] NAME BINARY [NAME BINARY ...]
#   NAME BINARY  a label and a histd binary (e.g. `before /tmp/before/histd after target/release/histd`)
#   -s           seconds of load per run (5); -r rounds (3)
#   BRUBECK=/path/to/brubeck adds Brubeck sending to the same stand-in (bench/peers/brubeck.json)
#   OUTPUTS="graphite remote-write otlp influx circonus forward" measures each of those outputs
#   sending to a receiver that reads everything (graphite: the carbon stand-in; the others:
#   bench/http_sink.py, which answers every request 200); `graphite` alone by default
#   WORKLOADS=PATTERN runs only the workloads whose title contains it
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=5 rounds=3
while getopts "s:r:" option; do
  case $option in
    s) seconds=$OPTARG ;;
    r) rounds=$OPTARG ;;
    *) sed -n '2,15p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
(( $# >= 2 && $# % 2 == 0 )) || { sed -n '2,15p' "$0"; exit 2; }
builds=("$@")
generator=${builds[-1]}
carbon_port=12099
outputs=${OUTPUTS:-graphite}

echo "# Memory with a carbon that reads, $(date -u +%FT%TZ), $(git rev-parse --short HEAD), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# rmem_max=$(sysctl -n net.core.rmem_max); $seconds s a run, $rounds rounds"
for ((i = 0; i < ${#builds[@]}; i += 2)); do echo "# ${builds[i]}: ${builds[i + 1]}"; done
[[ -z ${BRUBECK:-} ]] || echo "# brubeck: $BRUBECK --config bench/peers/brubeck.json"

# run LABEL SINK COMMAND PORT BENCH-ARGS... (SINK: the receiver script, carbon_sink.py or http_sink.py) -> one row: label, output, loss %, ns/metric, peak RSS MB, MB the receiver read
run() {
  local label=$1 sink=$2 command=$3 port=$4; shift 4
  python3 "bench/$sink" "$carbon_port" 3600 > /tmp/memory-carbon-sink.log 2>&1 &
  local carbon=$!
  for _ in $(seq 50); do ss -Htln "sport = :$carbon_port" | grep -q . && break; sleep 0.1; done
  taskset -c 0 bash -c "exec $command" > /tmp/memory-carbon-daemon.log 2>&1 &
  local pid=$!
  for _ in $(seq 100); do ss -Hulnp "sport = :$port" | grep -q "pid=$pid," && break; sleep 0.1; done
  sleep 1
  local row
  row=$(taskset -c 1 "$generator" bench --count kernel --target "127.0.0.1:$port" --pid "$pid" \
    --duration "$duration" --quiet --markdown "$@" | tail -n 1)
  sleep 2.5 # a last flush reaches carbon
  local peak; peak=$(awk '/^VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")
  kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
  kill -TERM "$carbon"; wait "$carbon" 2>/dev/null || true
  local received; received=$(awk '{ printf "%.1f", $4 / 1e6 }' /tmp/memory-carbon-sink.log)
  local loss ns
  loss=$(echo "$row" | awk -F'|' '{ gsub(/ /, "", $5); print $5 }')
  ns=$(echo "$row" | awk -F'|' '{ gsub(/ /, "", $7); print $7 }')
  echo "| $label | $loss | $ns | $peak | $received |"
}

config() { # GRAPHITE-KEYS -> a config file for histd
  local file; file=$(mktemp /tmp/memory-carbon-XXXX.js)
  echo "{ port: 18125, address: '127.0.0.1', mgmt_port: 18135, http_port: 0, flushInterval: 2000, udpReceiveBufferBytes: 8388608 $1 }" > "$file"
  echo "$file"
}
no_host=$(config "")
# output_keys OUTPUT -> the config keys sending to the receiver on $carbon_port
output_keys() {
  local url=http://127.0.0.1:$carbon_port
  case $1 in
    graphite) echo ", graphiteHost: '127.0.0.1', graphitePort: $carbon_port, graphite: { legacyNamespace: true }" ;;
    remote-write) echo ", backends: ['prometheus'], prometheus: { remoteWrite: [{ url: '$url/api/v1/write' }] }" ;;
    otlp) echo ", backends: ['otlp'], otlp: { endpoint: '$url/v1/metrics' }" ;;
    influx) echo ", backends: ['influx'], influx: { url: '$url/write?db=statsd' }" ;;
    circonus) echo ", backends: ['circonus'], circonus: { url: '$url/module/httptrap/check/secret' }" ;;
    forward) echo ", backends: ['forward'], forward: { nodes: ['$url'], source: 'bench' }" ;;
    *) echo "unknown output $1" >&2; exit 2 ;;
  esac
}
# output_sink OUTPUT -> the receiver that reads it
output_sink() { [[ $1 == graphite ]] && echo carbon_sink.py || echo http_sink.py; }
# label OUTPUT -> how a row names the output
output_label() { [[ $1 == graphite ]] && echo "carbon that reads" || echo "$1 to a receiver that reads"; }
declare -A output_config
for output in $outputs; do output_config[$output]=$(config "$(output_keys "$output")"); done

workload() { # TITLE SECONDS BENCH-ARGS... (SECONDS: `-` for -s)
  local title=$1; duration=$2; shift 2
  [[ -z ${WORKLOADS:-} || $title == *"$WORKLOADS"* ]] || return 0
  [[ $duration != - ]] || duration=$seconds
  echo; echo "### $title"; echo
  echo "| build, output | loss % | ns/metric | peak RSS MB | received MB |"
  echo "|---|---|---|---|---|"
  local rows=()
  for _ in $(seq "$rounds"); do
    for ((i = 0; i < ${#builds[@]}; i += 2)); do
      rows+=("$(run "${builds[i]}, no host" carbon_sink.py "${builds[i + 1]} run -c $no_host" 18125 "$@")")
      for output in $outputs; do
        rows+=("$(run "${builds[i]}, $(output_label "$output")" "$(output_sink "$output")" "${builds[i + 1]} run -c ${output_config[$output]}" 18125 "$@")")
      done
    done
    [[ -z ${BRUBECK:-} ]] || rows+=("$(run "brubeck, carbon that reads" carbon_sink.py "$BRUBECK --config bench/peers/brubeck.json" 18126 "$@")")
  done
  printf '%s\n' "${rows[@]}"
  echo; echo "Medians of the rounds: peak RSS MB, loss %"
  local labels; labels=$(printf '%s\n' "${rows[@]}" | awk -F'|' '{ gsub(/^ +| +$/, "", $2); print $2 }' | sort -u)
  while IFS= read -r label; do
    median() { # COLUMN
      printf '%s\n' "${rows[@]}" | awk -F'|' -v l="$label" -v c="$1" '{ x = $2; gsub(/^ +| +$/, "", x) } x == l { gsub(/ /, "", $c); print $c }' |
        sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
    }
    echo "- $label: $(median 5) MB, loss $(median 3) %"
  done <<< "$labels"
}

workload "100k counter names at 2M lines/s" - --lines 25 --names 100000 --rate 2M
workload "1M counter names, 3M lines at 1M lines/s" 3 --lines 25 --names 1000000 --rate 1M
workload "100k names, 90% timers, at 4M lines/s" - --lines 25 --names 100000 --mix timer-heavy --rate 4M
rm -f "$no_host" "${output_config[@]}"
