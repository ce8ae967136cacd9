#!/usr/bin/env bash
# Installs the tools tierd's tests need into a cache directory (default
# ~/.cache/tierd-bin), once: the MinIO server, pinned. A second run finds it
# and does nothing. Tests look for minio there (or $TIERD_MINIO_BIN, or PATH).
set -euo pipefail
bin=${TIERD_TOOLS:-$HOME/.cache/tierd-bin}
mkdir -p "$bin"
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
if [ -x "$bin/minio" ] && [ "$(cat "$bin/minio.version" 2>/dev/null)" = "$MINIO_VERSION" ]; then
  exit 0
fi
echo "installing minio $MINIO_VERSION into $bin (a few minutes, once)" >&2
# The install runs outside the module so tierd's go.mod is not touched.
(cd "$bin" && GOBIN=$bin GOFLAGS=-mod=mod go install "github.com/minio/minio@$MINIO_VERSION")
echo "$MINIO_VERSION" > "$bin/minio.version"
