#!/usr/bin/env bash
# Regenerates proto/tierdpb from proto/tierd.proto with pinned plugins.
# Usage: scripts/protoc.sh [--check]   (--check: fail if the committed code differs)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TIERD_TOOLS:-$HOME/.cache/tierd-bin}
mkdir -p "$bin"
[ -x "$bin/protoc-gen-go" ] || GOBIN=$bin go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
[ -x "$bin/protoc-gen-go-grpc" ] || GOBIN=$bin go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.1
if ! command -v protoc >/dev/null; then
  echo "protoc not found: install it (Debian: apt-get install protobuf-compiler)" >&2
  exit 1
fi
out=proto/tierdpb
if [ "${1:-}" = "--check" ]; then out=$(mktemp -d); fi
mkdir -p "$out"
PATH=$bin:$PATH protoc -I proto \
  --go_out="$out" --go_opt=paths=source_relative \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
  proto/tierd.proto
if [ "${1:-}" = "--check" ]; then
  diff -r "$out" proto/tierdpb >/dev/null || { echo "proto/tierdpb is stale: run scripts/protoc.sh" >&2; exit 1; }
  echo "proto/tierdpb is up to date"
fi
