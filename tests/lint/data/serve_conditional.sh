#!/usr/bin/env bash
# Serve script: flags passed conditionally, built in strings and arrays.
set -euo pipefail
ARGS="--model /models/m"
ARGS="$ARGS --prefill-interleave 2 --checkpoint-policy geometric"
args=(
  --max-num-seqs 64
  --kv-dtype fp8
)
if [[ "${PROFILE:-}" == "long" ]]; then
  args+=(--prefill-span 4 --max-num-batched-tokens 8192)
elif [[ "${PROFILE:-}" == "tiny" ]]; then
  args+=(--max-num-batched-tokens 10)
fi
case "${SLOTS_MODE:-auto}" in
  fixed) args+=(--checkpoint-slots many) ;;
  *) ;;
esac
POLICY="${POLICY:-keep-all}"
CURL_OPTS="--silent --max-time 5"
curl $CURL_OPTS localhost:7770/stats >/dev/null || true
export RADIANCE_BUSY_PREFILL_CHUNK=fast
sudo -u radiance env RADIANCE_PREFILL_INTERLEAVE=-1 timeout 3600 \
  radiance serve $ARGS "${args[@]}" ${DEBUG:+--prefill-interleave x} \
  --checkpoint-policy "$POLICY"
podman run --rm -e RADIANCE_KV_DTYPE=fp4 ghcr.io/radiance/radiance:1.8.5 \
  radiance serve --checkpoint-policy keep_all
docker run -d --gpus all --name r radiance:1.8.5 --prefill-interleav 2
