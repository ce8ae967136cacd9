#!/usr/bin/env bash
# Installs the tools tierd's tests need into a cache directory (default
# ~/.cache/tierd-bin), once each, pinned: the MinIO server, and grpcurl (the
# gRPC health and reflection tests call it). A second run finds them and
# does nothing. Tests look for them there (or $TIERD_MINIO_BIN,
# $TIERD_GRPCURL, or PATH).
set -euo pipefail
bin=${TIERD_TOOLS:-$HOME/.cache/tierd-bin}
mkdir -p "$bin"
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
GRPCURL_VERSION=v1.9.4
if ! [ -x "$bin/minio" ] || [ "$(cat "$bin/minio.version" 2>/dev/null)" != "$MINIO_VERSION" ]; then
  echo "installing minio $MINIO_VERSION into $bin (a few minutes, once)" >&2
  # The install runs outside the module so tierd's go.mod is not touched.
  (cd "$bin" && GOBIN=$bin GOFLAGS=-mod=mod go install "github.com/minio/minio@$MINIO_VERSION")
  echo "$MINIO_VERSION" > "$bin/minio.version"
fi
if ! [ -x "$bin/grpcurl" ] || [ "$(cat "$bin/grpcurl.version" 2>/dev/null)" != "$GRPCURL_VERSION" ]; then
  echo "installing grpcurl $GRPCURL_VERSION into $bin (once)" >&2
  (cd "$bin" && GOBIN=$bin GOFLAGS=-mod=mod go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION")
  echo "$GRPCURL_VERSION" > "$bin/grpcurl.version"
fi
