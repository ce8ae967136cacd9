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
    # Go 1.26's fuzz coordinator can end a clean run with "context deadline
    # exceeded" when -fuzztime expires (go.dev/issue/75804): such a
    # failure writes no input under testdata/fuzz, and is run once more.
    if ! go test "$pkg" -run '^$' -fuzz "^${fn}\$" -fuzztime "$dur" -fuzzminimizetime 10x; then
      if [ -n "$(git status --porcelain -- "$dir/testdata/fuzz/$fn" 2>/dev/null)" ]; then
        echo "fuzz: $fn found a failing input under $dir/testdata/fuzz/$fn" >&2
        exit 1
      fi
      echo "fuzz: $fn failed without a failing input; running it once more" >&2
      go test "$pkg" -run '^$' -fuzz "^${fn}\$" -fuzztime "$dur" -fuzzminimizetime 10x
    fi
  done
done
