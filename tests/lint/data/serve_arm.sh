#!/usr/bin/env bash
# serve script: flags are passed only when their RADIANCE_* variable is set
set -euo pipefail
args=(--model /models/m --port 8000)
[[ -n "${RADIANCE_PREFILL_INTERLEAVE:-}" ]] && args+=(--prefill-interleave "$RADIANCE_PREFILL_INTERLEAVE")
args+=(--checkpoint-policy tiponly)
args+=(--busy-prefill-chunk fast)
curl --silent --max-time 5 localhost:7770/stats > /dev/null
exec radiance serve "${args[@]}" --max-num-seqs auto
