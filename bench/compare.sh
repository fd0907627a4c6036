#!/usr/bin/env bash
# A fair comparison of statsd daemons on this machine: the same workloads, the same receive
# buffer, the same pinning (daemon on CPU 0, generator on CPU 1), counted the same way for
# every daemon (the kernel's drops on the daemon's port, /proc/net/udp; CPU and memory from
# /proc/PID), one daemon after the other per workload so that machine noise hits them alike.
#
# Usage: bench/compare.sh [-s SECONDS] [-b BYTES] [-w PATTERN] [-c PORT] NAME PORT 'COMMAND' [NAME PORT 'COMMAND' ...]
#   NAME     a label for the rows
#   PORT     the UDP port COMMAND's daemon listens on (127.0.0.1)
#   COMMAND  starts the daemon in the foreground, configured to flush every 2 s (the script
#            execs it pinned to CPU 0 and stops it with SIGTERM, then SIGKILL after 5 s)
#   -s       seconds per run (5)
#   -b       the receive buffer every daemon should be granted (16777216): as root the script
#            sets net.core.rmem_default to it and net.core.rmem_max to half of it for the run
#            (the kernel doubles what a daemon asks with SO_RCVBUF) and restores both at exit;
#            histd asks with SO_RCVBUFFORCE, so give it `udpReceiveBufferBytes` of half.
#            The buffer each daemon was granted is printed (ss's rb) next to its rows.
#   -w       run only the workloads whose title contains PATTERN
#   -c       a carbon stand-in that reads everything (bench/carbon_sink.py) listens on
#            127.0.0.1:PORT during each run (bench/peers/histd-carbon.js and brubeck.json
#            send there); the megabytes it received are printed after each row
# Example (bench/peers/ has the configs; see BENCHMARKS.md for building the peers):
#   bench/compare.sh histd 18125 'target/release/histd run -c bench/peers/histd.js' \
#     brubeck 18126 '/path/to/brubeck --config bench/peers/brubeck.json' \
#     etsy 18127 'node /path/to/statsd/stats.js bench/peers/etsy-statsd.js'
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=5 buffer=16777216 only= carbon=
while getopts "s:b:w:c:" option; do
  case $option in
    s) seconds=$OPTARG ;;
    b) buffer=$OPTARG ;;
    w) only=$OPTARG ;;
    c) carbon=$OPTARG ;;
    *) sed -n '2,28p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
(( $# >= 3 && $# % 3 == 0 )) || { sed -n '2,28p' "$0"; exit 2; }
daemons=("$@")

cargo build --release -q -p histd
bench=target/release/histd

if [[ $(id -u) == 0 ]]; then
  saved_max=$(sysctl -n net.core.rmem_max) saved_default=$(sysctl -n net.core.rmem_default)
  trap 'sysctl -q -w net.core.rmem_max=$saved_max net.core.rmem_default=$saved_default' EXIT
  sysctl -q -w net.core.rmem_max=$((buffer / 2)) net.core.rmem_default="$buffer"
else
  echo "(not root: the sysctls stay as they are; check the granted buffers below)"
fi

echo "# Compare, $(date -u +%FT%TZ), histd commit $(git rev-parse --short HEAD)"
echo
echo "- Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), Linux $(uname -r)"
echo "- Sysctls during the run: net.core.rmem_max=$(sysctl -n net.core.rmem_max) net.core.rmem_default=$(sysctl -n net.core.rmem_default)"
echo "- Each daemon pinned to CPU 0 (\`taskset\`), the generator (\`histd bench --count kernel\`) to CPU 1; $seconds s per run."
echo "- received = lines sent less the datagrams the kernel dropped on the daemon's port; ns/metric"
echo "  = the daemon's CPU time (user + system, all threads, flushes included) per line received."
for ((i = 0; i < ${#daemons[@]}; i += 3)); do echo "- ${daemons[i]}: \`${daemons[i + 2]}\` (port ${daemons[i + 1]})"; done
[[ -z $carbon ]] || echo "- A carbon stand-in reading everything (bench/carbon_sink.py) on 127.0.0.1:$carbon during each run."

# carbon_start / carbon_stop: the carbon stand-in around one run, when asked for (-c)
carbon_start() {
  [[ -n $carbon ]] || return 0
  python3 bench/carbon_sink.py "$carbon" 3600 > /tmp/compare-carbon.log 2>&1 &
  carbon_pid=$!
  for _ in $(seq 50); do ss -Htln "sport = :$carbon" | grep -q . && return; sleep 0.1; done
}
carbon_stop() { # NAME: notes what the stand-in received from it in $received_by
  [[ -n $carbon ]] || return 0
  kill -TERM "$carbon_pid"; wait "$carbon_pid" || true
  received_by+="$1 $(awk '{ printf "%.1f", $4 / 1e6 }' /tmp/compare-carbon.log) MB; "
}

# start NAME PORT COMMAND -> sets $pid once the port is bound
start() {
  taskset -c 0 bash -c "exec $3" > "/tmp/compare-$1.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    ss -Hulnp "sport = :$2" | grep -q "pid=$pid," && { sleep 1; return; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "$1 did not bind UDP port $2; its output:"; cat "/tmp/compare-$1.log"; exit 1
}

stop() {
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# workload TITLE BENCH-ARGS...
workload() {
  local title=$1; shift
  [[ -z $only || $title == *"$only"* ]] || return 0
  echo; echo "### $title"; echo
  echo "| daemon | target | sent/s | received | loss % | kernel drops | ns/metric | µs/datagram | RSS MB peak | buffer granted |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  received_by=
  for ((i = 0; i < ${#daemons[@]}; i += 3)); do
    local name=${daemons[i]} port=${daemons[i + 1]} command=${daemons[i + 2]}
    carbon_start
    start "$name" "$port" "$command"
    local granted; granted=$(ss -Hulmn "sport = :$port" | grep -o 'rb[0-9]*' | tr -d rb | sort -u | paste -sd/)
    taskset -c 1 "$bench" bench --count kernel --target "127.0.0.1:$port" --pid "$pid" --duration "$seconds" \
      --quiet --markdown "$@" | tail -n +3 | sed "s/^|/| $name |/; s/\$/ $granted |/"
    stop
    carbon_stop "$name"
  done
  [[ -z $carbon ]] || { echo; echo "Carbon received: $received_by"; }
}

workload "25 lines/datagram, 1k counter names" --lines 25 --names 1000 --rate 1M,4M,0
workload "25 lines/datagram, 100k counter names" --lines 25 --names 100000 --rate 1M,4M
workload "25 lines/datagram, 1M counter names" --lines 25 --names 1000000 --rate 1M
workload "25 lines/datagram, 1k timer names" --lines 25 --names 1000 --mix timers --rate 1M,2M,4M,0
workload "25 lines/datagram, 1k names, timer-heavy (90% ms, 10% c)" --lines 25 --names 1000 --mix timer-heavy --rate 2M,4M,5M,0
workload "25 lines/datagram, 100k names, timer-heavy (90% ms, 10% c)" --lines 25 --names 100000 --mix timer-heavy --rate 2M,4M
workload "25 lines/datagram, 1M names, timer-heavy (90% ms, 10% c)" --lines 25 --names 1000000 --mix timer-heavy --rate 1M
