#!/usr/bin/env bash
# Connection churn (issue 48, P1): N connections of each kind (HTTP `GET /health` with
# `Connection: close`, HTTPS handshake and the same request, a statsd TCP connection with one
# line, a management `health` + `quit`) opened and closed by 4 client threads against one
# daemon, after as many to warm it up; the daemon's resident memory before and after each kind.
# It is the integration soak test (crates/histd/tests/integration/soak.rs) at a larger count, so
# the daemon is the test binary's (a debug build): memory is what is measured, not speed.
# Usage: bench/connections.sh [connections]   (default 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
connections=${1:-100000}
echo "# $(date -u +%FT%TZ), histd commit $(git rev-parse --short HEAD), $connections connections of each kind"
HISTD_SOAK_CONNECTIONS=$connections cargo test -q -p histd --test integration soak -- --nocapture --test-threads 1 2>&1 |
  grep -oE 'soak [a-z ]+: .*|test result: .*'
