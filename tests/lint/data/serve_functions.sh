#!/bin/bash
set -e
: "${RADIANCE_BIN:=/opt/radiance/bin/radiance}"
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --long) EXTRA+=(--prefill-span 4 --max-num-batched-tokens 16384); shift ;;
    --policy) POLICY="$2"; shift 2 ;;
    *) echo "unknown option $1 --prefill-interleave"; exit 1 ;;
  esac
done

log() { echo "[serve] $*" >&2; }

function launch {
  log "starting with --checkpoint-policy whatever"
  exec "$RADIANCE_BIN" serve \
    --model "${MODEL_DIR:-/models/m}" \
    --checkpoint-policy "${POLICY:-geometric}" \
    "${EXTRA[@]}" "$@"
}

launch --prefill-interleave "${INTERLEAVE:-two}" --kv-dtype fp8
