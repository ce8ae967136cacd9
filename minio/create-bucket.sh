#!/bin/sh
# Creates the tierd bucket on the compose MinIO (run by the minio-init service).
set -eu
mc alias set local http://minio:9000 "$MINIO_ROOT_USER" "$MINIO_ROOT_PASSWORD"
mc mb --ignore-existing "local/${TIERD_BUCKET:-tierd}"
