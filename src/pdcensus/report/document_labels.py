"""Labels and units for the advice's predicted figures and trade-off columns.

The advice names its numbers by key (``busy_ttft_p90_seconds_replay``), units in the name as the
house style asks; a report reader wants words and a unit on the value. The keys the radiance
and engine recommendations use most have a written label here; any other key is read by its
unit suffix (``_seconds``, ``_tokens_per_second``, ``_share``, ``_ratio``, ``_tokens``) and its
words, so a new prediction is never shown as a raw variable name. It also holds the one
sentence that says which of a trade-off's busy TTFT p90 columns to trust.
"""

from __future__ import annotations

import math
import re

from pdcensus.report.document_blocks import MISSING, fmt_count, fmt_number, fmt_rate, fmt_seconds, fmt_share

__all__ = ["TTFT_TRUST", "TTFT_TRUST_NO_REPLAY", "column_label", "predicted_label", "predicted_row", "predicted_value"]

_LABELS = {
    "interleave": "held steps per chunk step (N)",
    "target_decode_share": "target: share of idle per-stream decode kept during prefill",
    "per_stream_tokens_per_second_during_prefill": "per-stream decode during prefill, predicted",
    "per_stream_tokens_per_second": "per-stream decode during prefill",
    "share_of_idle": "per-stream decode during prefill, share of idle",
    "per_stream_tokens_per_second_during_prefill_now": "per-stream decode during prefill, now (ledger)",
    "measured_busy_per_stream_tokens_per_second": "per-stream decode in the busiest bucket, measured",
    "busy_bucket_saturated_share": "busiest bucket's time in back-to-back chunk steps",
    "busy_bucket_per_stream_tokens_per_second_predicted": "per-stream decode in the busiest bucket, predicted",
    "busy_bucket_per_stream_tokens_per_second": "per-stream decode in the busiest bucket",
    "idle_per_stream_tokens_per_second": "per-stream decode, idle bucket",
    "chunk_step_seconds": "chunk step (ledger)",
    "decode_step_seconds": "decode-only step (ledger)",
    "ttft_stretch": "prefilling prompt's TTFT stretch",
    "added_seconds_per_chunk_step": "time added per chunk step",
    "held_steps_per_chunk_step": "held steps after each chunk step beside decoders",
    "busy_ttft_p90_seconds_now": "busy TTFT p90, now",
    "busy_ttft_p90_seconds_at_least": "busy TTFT p90, floor (stretch alone)",
    "prompt_ttft_p90_seconds_at_least": "busy TTFT p90, floor (stretch alone)",
    "busy_ttft_p90_seconds_queueing": "busy TTFT p90, M/M/1 queue",
    "busy_ttft_p90_seconds_replay": "busy TTFT p90, replay (trust this)",
    "ttft_p90_ratio_replay": "busy TTFT p90 change, replay",
    "ttft_p90_ratio_queueing": "busy TTFT p90 change, M/M/1 queue",
    "replay_ttft_p90_seconds_now": "TTFT p90 of the replay, now",
    "replay_busy_intervals": "busy intervals replayed",
    "prefill_load_now": "prefill load (chunk steps' share of step time), now",
    "prefill_load_predicted": "prefill load (chunk steps' share of step time), predicted",
}
# Which of the three TTFT p90 columns to read (docs/glossary.md: replay, M/M/1, trade-off)
TTFT_TRUST = ("which busy TTFT p90 to trust: replay (this recording's own prefill work and arrivals run through "
              "the slower prefill); the floor is the stretch alone, with no queueing (a lower bound); M/M/1 "
              "assumes random arrivals")
TTFT_TRUST_NO_REPLAY = ("which busy TTFT p90 to trust: no replay here (no prefill trace); the floor is the stretch "
                        "alone (a lower bound), M/M/1 assumes random arrivals: read the truth between them")
_WORDS = {"ttft": "TTFT", "itl": "ITL", "tpot": "TPOT", "kv": "KV", "p50": "p50", "p90": "p90", "p99": "p99",
          "vram": "VRAM", "n": "N"}
_COUNT_WORDS = ("intervals", "steps", "tokens", "experts", "requests", "slots", "running")


def _words(key: str) -> str:
    return " ".join(_WORDS.get(w, w) for w in key.split("_") if w)


def predicted_label(key: str) -> str:
    """Words for a predicted figure's key, its unit left to the value."""
    if key in _LABELS:
        return _LABELS[key]
    k = re.sub(r"_?tokens_per_second", "", key)
    k = re.sub(r"_?seconds", "", k)
    k = re.sub(r"_(share|fraction|ratio)$", r" \1", k)
    return _words(k) or _words(key)


def predicted_value(key: str, value: object) -> str:
    """The value with its unit, read from the key's suffix."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return MISSING if value is None else str(value)
    v = float(value)
    if math.isinf(v):
        return "unbounded"
    if not math.isfinite(v):
        return MISSING
    if "tokens_per_second" in key:
        return f"{fmt_rate(v)} tok/s"
    if "seconds" in key:
        return fmt_seconds(v)
    if key.endswith(("_share", "_fraction", "_load_now", "_load_predicted")) or key.startswith("share_of") \
            or "_share_" in key or key.startswith(("prefill_load", "target_")):
        return fmt_share(v)
    if "ratio" in key or "stretch" in key:
        return f"x{v:.3g}"
    if key.endswith("_tokens") or "_tokens_" in key:
        return f"{fmt_count(round(v))} tokens"
    if key.endswith(_COUNT_WORDS) or key == "interleave":
        return fmt_count(v) if v == int(v) else fmt_number(v)
    return fmt_number(v)


def predicted_row(key: str, value: object) -> tuple[str, str]:
    """(label, value with unit) for one predicted figure."""
    return predicted_label(key), predicted_value(key, value)


def column_label(key: str) -> str:
    """A trade-off column's header: the label, with the unit the cells carry."""
    label = predicted_label(key)
    if "tokens_per_second" in key:
        return f"{label} (tok/s)"
    return label
