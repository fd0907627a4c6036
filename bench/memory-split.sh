#!/usr/bin/env bash
# Where a histd's resident memory goes: each build given runs the same workload (the daemon
# pinned to CPU 0 with bench/peers/histd.js, the generator on CPU 1), and its peak RSS is
# printed with, at the end of the run, what each kind of mapping holds resident: the histd
# binary (its code and read-only data, shared with the page cache), the shared libraries it
# loads, the heap and anonymous maps (malloc's arenas, large allocations, thread stacks);
# with the run's loss and the daemon's CPU time per line (ns/metric, as `histd bench` counts).
#
# Usage: bench/memory-split.sh [-s SECONDS] [-n NAMES] [-r RATE] [-m MIX] REV [REV ...]
#   REV  a git revision, built once into target/memory-split/REV (a worktree under /tmp),
#        `.` for the work tree as it is (built with cargo build --release), or the path of a
#        histd binary built some other way
#   -s   seconds of load (5); -n distinct names (100000); -r lines/s (1M); -m mix (counters)
# Example: bench/memory-split.sh 68222d4 .
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=5 names=100000 rate=1M mix=counters
while getopts "s:n:r:m:" option; do
  case $option in
    s) seconds=$OPTARG ;;
    n) names=$OPTARG ;;
    r) rate=$OPTARG ;;
    m) mix=$OPTARG ;;
    *) sed -n '2,13p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
(( $# >= 1 )) || { sed -n '2,13p' "$0"; exit 2; }

cargo build --release -q -p histd
generator=target/release/histd

# binary REV -> prints the path of REV's histd, building it first if needed
binary() {
  if [[ $1 == . ]]; then echo target/release/histd; return; fi
  if [[ -f $1 && -x $1 ]]; then echo "$1"; return; fi
  local commit; commit=$(git rev-parse --short "$1")
  local out=target/memory-split/$commit
  if [[ ! -x $out/histd ]]; then
    local tree=/tmp/histd-memory-split-$commit
    [[ -d $tree ]] || git worktree add -f --detach "$tree" "$commit" -q
    (cd "$tree" && CARGO_TARGET_DIR="$tree/target" cargo build --release -q -p histd) >&2
    mkdir -p "$out" && cp "$tree/target/release/histd" "$out/histd"
  fi
  echo "$out/histd"
}

# split PID -> "binary libraries anonymous" resident kB
split() {
  awk -v exe="$(readlink "/proc/$1/exe")" '
    /^[0-9a-f]+-/ { path = $6 }
    /^Rss:/ { if (path == exe) b += $2; else if (path ~ /\.so/) l += $2; else a += $2 }
    END { printf "%.1f | %.1f | %.1f", b / 1024, l / 1024, a / 1024 }' "/proc/$1/smaps"
}

echo "# Memory split, $(date -u +%FT%TZ), $names names, $mix, $rate lines/s for $seconds s"
echo
echo "| build | ldd libraries | .text MB | idle RSS MB | loss % | ns/metric | peak RSS MB | binary MB | shared libraries MB | heap + anonymous MB |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for rev in "$@"; do
  bin=$(binary "$rev")
  label=$(git rev-parse --short "$rev" 2>/dev/null || echo "$rev")
  [[ $rev == . ]] && label="$(git rev-parse --short HEAD) + work tree"
  taskset -c 0 "$bin" run -c bench/peers/histd.js > /tmp/memory-split.log 2>&1 &
  pid=$!
  for _ in $(seq 100); do ss -Hulnp "sport = :18125" | grep -q "pid=$pid," && break; sleep 0.1; done
  sleep 1
  idle=$(awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")
  row=$(taskset -c 1 "$generator" bench --count kernel --target 127.0.0.1:18125 --admin 127.0.0.1:18135 \
    --pid "$pid" --duration "$seconds" --quiet --markdown --lines 25 --names "$names" --mix "$mix" \
    --rate "$rate" | tail -n 1)
  loss=$(echo "$row" | awk -F'|' '{ gsub(/ /, "", $5); print $5 }')
  ns=$(echo "$row" | awk -F'|' '{ gsub(/ /, "", $7); print $7 }')
  peak=$(awk '/^VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")
  parts=$(split "$pid")
  kill -TERM "$pid"; wait "$pid" || true
  libraries=$(ldd "$bin" | grep -c '=>' || true)
  text=$(size -A "$bin" | awk '$1 == ".text" { printf "%.1f", $2 / 1048576 }')
  echo "| $label | $libraries | $text | $idle | $loss | $ns | $peak | $parts |"
done
