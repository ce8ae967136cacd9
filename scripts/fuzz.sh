#!/usr/bin/env bash
# Runs every Fuzz* target of the decoders for a bounded time each.
# Usage: scripts/fuzz.sh [duration]   (default 10s; e.g. 5m for a long run)
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-10s}
for pkg in $(go list ./... ); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for fn in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
    echo "fuzz: $pkg $fn for $dur"
    go test "$pkg" -run '^$' -fuzz "^${fn}\$" -fuzztime "$dur" -fuzzminimizetime 10x
  done
done
