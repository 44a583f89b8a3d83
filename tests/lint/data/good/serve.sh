#!/usr/bin/env bash
set -euo pipefail
ARGS="--model /models/m"
ARGS="$ARGS --prefill-interleave ${INTERLEAVE:-2}"
args=(--max-num-seqs 64 --busy-prefill-chunk auto)
if [[ "${LONG:-}" == 1 ]]; then
  args+=(--prefill-span 4 --max-num-batched-tokens 16384 --checkpoint-interval 4096)
fi
case "${POLICY_MODE:-}" in
  replay) args+=(--checkpoint-policy keep-all --checkpoint-slots auto) ;;
  *) args+=(--checkpoint-policy tip-only) ;;
esac
curl --silent --max-time 5 localhost:7770/stats >/dev/null || true
exec timeout 86400 radiance serve $ARGS "${args[@]}" ${DEBUG:+--prefill-interleave 0}
