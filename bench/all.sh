#!/usr/bin/env bash
# Reruns every figure of BENCHMARKS.md's table, one command per row, each into OUT/<row>.txt
# (OUT: bench-results-<date> by default), one after the other (they pin CPUs 0 and 1: never
# two at once). A row whose command needs what this machine lacks (the peers of
# compare.sh: PEERS=/tmp/peers as BENCHMARKS.md builds them) is skipped with a line saying so.
# Hours long: the ingest and memory rows alone take about an hour.
# Usage: bench/all.sh [OUT]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-results-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
cargo build --release -q -p histd || exit 1

row() { # NAME COMMAND...
  local name=$1; shift
  echo "$(date -u +%T) $name: $*"
  if "$@" > "$out/$name.txt" 2>&1; then echo "    done"; else echo "    failed (exit $?): see $out/$name.txt"; fi
}

row histogram cargo bench -p circllhist --bench histogram
row ingest bench/ingest.sh 5
peers=${PEERS:-/tmp/peers}
if [[ -x $peers/brubeck/brubeck ]]; then
  row compare bench/compare.sh -s 5 histd 18125 'target/release/histd run -c bench/peers/histd.js' \
    brubeck 18126 "$peers/brubeck/brubeck --config bench/peers/brubeck.json"
  row memory-carbon env BRUBECK="$peers/brubeck/brubeck" bench/memory-carbon.sh -s 5 -r 3 histd target/release/histd
else
  echo "compare: skipped (no $peers/brubeck/brubeck; BENCHMARKS.md says how the peers are built)"
  row memory-carbon bench/memory-carbon.sh -s 5 -r 3 histd target/release/histd
fi
row timer-past-limit cargo bench -p agg --bench table
row store bench/store.sh
row forward bench/forward.sh
row global-merge bench/global-merge.sh 4 10000
row global-merge-histograms env RAW_VALUES_LIMIT=0 bench/global-merge.sh 4 10000
row global-merge-kafka env KAFKA=1 bench/global-merge.sh 3 10000 "10 50"
row live-view bench/top.sh
row fleet-query bench/fleet-query.sh
row connections bench/connections.sh 100000
row snapshots bench/snapshot-cost.sh 60
echo "results in $out"
