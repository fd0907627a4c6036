#!/usr/bin/env bash
# The forward backend's costs (issue "One histogram across many machines"): the criterion bench
# of one flush of 100k series (90k counters, 10k timers of 150 values) cut for 2 global nodes,
# at the local (cut and compress) and at the global (decode and merge), with the timers' raw
# values (the default) and with histograms only; bytes per flush printed per mode.
# Usage: bench/forward.sh
set -euo pipefail
cd "$(dirname "$0")/.."
echo "# $(date -u +%FT%TZ), $(git rev-parse --short HEAD), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo; echo "## one flush of 100k series (90k counters, 10k timers of 150 values) for 2 nodes"
cargo bench -q -p fleet --bench forward -- --warm-up-time 2 --measurement-time 10 2>&1 |
  grep -E "^(with raw values|histograms only):|time:|^forward flush" | sed 's/^forward flush of 100k series\///'
