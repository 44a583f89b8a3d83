"""Detection apart from cost: each mechanism's signature, judged on its interval.

A mechanism is *found* when its signature is in the data beyond noise, whatever it
costs overall (runbook, "Bucket, then lag-test, before believing a cause"):

- step-time sharing: per-stream decode while prefill runs well below idle (a collapse,
  ``COLLAPSE_RATIO``, not chunking overhead) at lag 0 only; or, with a step ledger, a decode
  row in a chunk step waiting well beyond a decode-only step; or, where intervals dilute a
  short chunk, a dose-response whose fitted depth at the busy intervals' prefill level is a
  collapse, or (vLLM's inter-token histogram) gaps many decode-only steps long that come with
  prefill beyond their rate without it;
- eviction: a lagged tail (2-14 min after prefill, beyond what batch growth explains), or
  decode-only steps inflated after prefill beyond batch growth;
- preemption stall: bursts in the preemption counter (a preempted sequence stops and
  re-prefills from token 0).

A ratio signature is found when the upper end of its 90 % bootstrap interval is past the
threshold (the lower end for an inflation); its confidence is the share of replicates past
it. Each mechanism's cost (loss share, depth, how often it acts) is measured separately
(see :mod:`pdcensus.census.verdict`).

``COLLAPSE_RATIO`` separates a collapse from chunking overhead: a healthy endpoint whose
chunk steps are 5-15 % longer than its decode-only steps runs decoders at 0.87-0.95 of idle
while prefill runs; the runbook's collapse is a decode row waiting out a chunk many times a
decode-only step (0.03-0.6 of idle on the real llama.cpp and vLLM recordings).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdcensus.census.bootstrap import interval
from pdcensus.census.model import Mechanism, Signature
from pdcensus.series.vllm_gaps import LONG_STEPS, GapContrast

COLLAPSE_RATIO = 0.85  # per-stream decode while prefill runs / idle: below this, a collapse
TAIL_EFFECT_MARGIN = 0.9  # a tail: own-idle decoders >= 10 % slower 2-14 min after prefill
INFLATION_MARGIN = 1.1  # decode-only steps >= 10 % slower than the clean reference


@dataclass(frozen=True)
class SignatureTest:
    """One signature's per-replicate outcome (row 0 = the window) and its reading."""

    mechanism: Mechanism
    signature: Signature
    hits: np.ndarray  # bool per replicate
    found: bool  # judged on the interval
    value: float  # the point estimate the signature reads
    value_interval: tuple[float, float]
    text: str
    threshold: float | None = None

    @property
    def confidence(self) -> float:
        return float(np.mean(self.hits[1:])) if self.hits.size > 1 else float(self.hits[0])


def below(mechanism: Mechanism, signature: Signature, reps: np.ndarray | None, threshold: float,
          text: str) -> SignatureTest | None:
    """A ratio signature found when its interval lies below ``threshold``."""
    if reps is None or not np.isfinite(reps[0]):
        return None
    lo, hi = interval(reps)
    hits = np.isfinite(reps) & (reps < threshold)
    found = bool(np.isfinite(hi) and hi < threshold)
    return SignatureTest(mechanism, signature, hits, found, float(reps[0]), (lo, hi),
                         f"{text}: {reps[0]:.2f} (90% interval {lo:.2f}-{hi:.2f}; found below {threshold:g})",
                         threshold)


def above(mechanism: Mechanism, signature: Signature, reps: np.ndarray | None, threshold: float,
          text: str) -> SignatureTest | None:
    """An inflation signature found when its interval lies above ``threshold``."""
    if reps is None or not np.isfinite(reps[0]):
        return None
    lo, hi = interval(reps)
    hits = np.isfinite(reps) & (reps > threshold)
    found = bool(np.isfinite(lo) and lo > threshold)
    return SignatureTest(mechanism, signature, hits, found, float(reps[0]), (lo, hi),
                         f"{text}: {reps[0]:.2f} (90% interval {lo:.2f}-{hi:.2f}; found above {threshold:g})",
                         threshold)


def dose_signature(stall: np.ndarray | None, depth: np.ndarray | None) -> SignatureTest | None:
    """Sharing by dose-response: a stall per token above 0 whose depth at the busy level is a collapse."""
    if stall is None or depth is None or not np.isfinite(depth[0]):
        return None
    lo_s, _ = interval(stall)
    lo, hi = interval(depth)
    hits = np.isfinite(depth) & (depth < COLLAPSE_RATIO) & (stall > 0)
    found = bool(np.isfinite(hi) and hi < COLLAPSE_RATIO and np.isfinite(lo_s) and lo_s > 0)
    return SignatureTest(Mechanism.STEP_TIME_SHARING, Signature.DOSE_RESPONSE, hits, found, float(depth[0]), (lo, hi),
                         f"per-stream decode fitted at the busy intervals' prefill level, by dose-response: "
                         f"{depth[0]:.2f} of idle (90% interval {lo:.2f}-{hi:.2f}; found below {COLLAPSE_RATIO:g})",
                         COLLAPSE_RATIO)


def gap_signature(gaps: GapContrast | None) -> SignatureTest | None:
    """Sharing by vLLM's inter-token histogram: the long gaps' excess share of decoders' waiting is larger in step
    spans with prefill than in spans without, beyond noise (each gap many decode-only gaps long, so a collapse while
    it acts, however short against the scrape)."""
    if gaps is None:
        return None
    diff = gaps.difference
    if not np.isfinite(diff[0]):
        return None
    lo, hi = interval(diff)
    hits = np.isfinite(diff) & (diff > 0)
    found = bool(np.isfinite(lo) and lo > 0)
    control = (f"{100 * gaps.without[0]:.1f} % at no prompt tokens, by dose-response on the prompt tokens per "
               "second (no span free of prefill timed a decode-only step)" if gaps.by_dose
               else f"{100 * gaps.without[0]:.1f} % without")
    return SignatureTest(
        Mechanism.STEP_TIME_SHARING, Signature.LONG_GAPS, hits, found, float(diff[0]), (lo, hi),
        f"decoders' waiting in inter-token gaps beyond {LONG_STEPS:g} decode-only gaps, less those gaps "
        f"(vllm:inter_token_latency_seconds): {100 * gaps.beside[0]:.1f} % of their waiting in step spans with "
        f"prefill, {control} ({gaps.long_gaps:.0f} long gaps beside prefill, "
        f"{1e3 * gaps.mean_long_gap_seconds:.0f} ms on average against a {1e3 * gaps.clean_gap_seconds:.1f} ms clean "
        f"gap); the difference {100 * diff[0]:.1f} points (90% interval {100 * lo:.1f}-{100 * hi:.1f}; found above 0); "
        f"the long gaps' excess beyond that control is {100 * gaps.loss[0]:.1f} % of decoders' time, a lower bound of "
        "sharing's loss (chunk steps under the line are not in it)",
        0.0)


def preemption_signature(bursts: int, aligned: bool, replicates: int) -> SignatureTest | None:
    """Bursts in the preemption counter: counted, not estimated, so found whenever there is one."""
    if bursts <= 0:
        return None
    hits = np.ones(replicates, dtype=bool)
    return SignatureTest(Mechanism.PREEMPTION_STALL, Signature.PREEMPTION_BURSTS, hits, True, float(bursts),
                         (float(bursts), float(bursts)),
                         f"{bursts} bursts in the preemption counter; aligned with a decode dip or a re-prefill "
                         f"spike: {'yes' if aligned else 'no'}", 1.0)


def strongest(tests: list[SignatureTest | None], mechanism: Mechanism) -> tuple[SignatureTest | None, np.ndarray | None]:
    """The first found signature of ``mechanism`` (in the order given) and the replicates where any hits."""
    mine = [t for t in tests if t is not None and t.mechanism is mechanism]
    if not mine:
        return None, None
    hits = np.logical_or.reduce([t.hits for t in mine])
    found = [t for t in mine if t.found]
    return (found[0] if found else None), hits
