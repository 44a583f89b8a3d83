"""What the verdict reads: per-replicate estimates from the census passes and the data's limits.

Kept apart from :mod:`pdcensus.census.verdict` so that the decision, its caps and its
headline text (each a module of its own) read one typed input without importing each other.
Row 0 of every array is the window itself, the rest are moving-block bootstrap replicates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdcensus.census.detect import gap_signature
from pdcensus.census.guards import VerdictLimits
from pdcensus.census.preemption import StallBasis
from pdcensus.series.vllm_gaps import GapContrast


@dataclass(frozen=True)
class VerdictInputs:
    """Per-replicate estimates (row 0 = the window itself) and the data's limits."""

    shape_proven: bool
    shape_reason: str
    samples: int
    idle_samples: int
    busy_samples: int
    has_ledger: bool
    ledger_chunk_steps: float  # chunk steps counted by the ledger while decoders ran
    scrape_interval_seconds: float
    rates_from_counters: bool
    collapse: np.ndarray  # rate-based loss share while prefill is busy
    lag0_effect: np.ndarray  # busy / idle per-stream rate
    sharing: np.ndarray | None  # ledger: step-time sharing loss share
    residency: np.ndarray | None  # ledger: residency loss share
    inflation_during: np.ndarray | None
    inflation_after: np.ndarray | None
    tail_effect: np.ndarray
    tail_loss: np.ndarray
    preemption: np.ndarray
    preemption_basis: str
    bursts: int
    burst_aligned: bool
    preemption_counted: bool = True
    preemption_kind: StallBasis = StallBasis.DEPTH_INTEGRAL
    saturated_share: float = float("nan")
    tail_batch_ratio: float = 1.0
    inflation_after_batch_bounded: np.ndarray | None = None
    baseline_prefill_free_share: float = 1.0
    # per-replicate readings that find sharing apart from the lag-0 contrast
    ledger_depth: np.ndarray | None = None  # mean decode-only step / mean chunk step beside decoders
    # the same, each chunk span against its neighbours' decode-only step (ledger.local_decode_step): a ramp's
    # growing steps are in both sides of it
    ledger_depth_local: np.ndarray | None = None
    # vLLM's counted step ledger (pdcensus.series.vllm_steps): sharing's depth is the counted steps' ratio and
    # how often it acts is the share of decoders' time in step spans that carried prefill, not the rate buckets'
    depth_from_steps: bool = False
    # with it, the inter-token histogram per step span (series.vllm_steps.itl_depth): decoders' pace in spans with
    # prefill / without, and the tokens on each side; the depth reported where it is finite (what decoders felt)
    itl_depth: float = float("nan")
    itl_tokens: tuple[int, int] = (0, 0)
    itl_basis: str = "step spans with prefill / without"
    # where every prefill ends inside a scrape: one chunk step's own depth, the bracket's other end
    itl_chunk_depth: float = float("nan")
    itl_depth_over_waits: bool = False  # itl_depth is read over the prompts' waits for a first token
    # the long inter-token gaps' excess beside prefill and without (pdcensus.series.vllm_gaps): sharing where the
    # counted steps' ratio is diluted by chunk steps far shorter than a scrape
    gaps: GapContrast | None = None
    # the engine's own cache config on a second KV tier (pdcensus.census.kv_tier): False rules KV eviction out
    kv_second_tier: bool | None = None
    kv_tier_basis: str = ""
    # vLLM V1: the share of reconstructed prefill that is re-prefill after preemptions
    # (pdcensus.census.prefill_progress): chunk time that the stall's cause puts there
    reprefill_share: float = 0.0
    dose_stall: np.ndarray | None = None  # seconds of decode stall per prefill token
    dose_depth: np.ndarray | None = None  # fitted per-stream ratio at the busy intervals' prefill level
    # how often each acts: share of decoders' time in busy scrapes, in the tail, in bursts
    busy_share: float = float("nan")
    tail_share: float = float("nan")
    burst_share: float = float("nan")
    preemption_depth: float = float("nan")  # decode at burst scrapes / same-bucket baseline
    # ITL p99 while each acts / otherwise (NaN without an ITL histogram)
    itl_busy_ratio: float = float("nan")
    itl_tail_ratio: float = float("nan")
    itl_burst_ratio: float = float("nan")
    recovery_effect: np.ndarray | None = None  # decode soon after prefill / long after (batch controlled)
    recovery_loss: np.ndarray | None = None
    recovery_note: str = ""
    # the eviction signatures read without the batch control found eviction (batch growth could fake it)
    uncontrolled_eviction: bool = False
    tail_test_ran: bool = True  # the window can contain a 2-14 min tail with clean scrapes on both sides
    tail_window_note: str = ""
    single_session: str = ""  # non-empty: at most one request ran, so no other session's prefill exists
    contrast_note: str = ""  # why decode per stream is faster while prompts are counted (if it is)
    withheld: tuple[str, ...] = ()  # signals the sanity checks found broken, and what was withheld
    # what the guards allow (pdcensus.census.guards): another session, a window that holds the tail, ramp-up
    limits: VerdictLimits | None = None

    def sharing_loss(self) -> np.ndarray:
        """Decoders' time lost to step-time sharing per replicate: the ledger's share where it ran, else
        the collapse while prefill runs; a loss is never below zero, and an unknown one counts as none
        (as :meth:`eviction_loss`). The one definition: the verdict and the losses table both read it.

        The long inter-token gaps' excess (``gaps.loss``) is not it: it leaves out every chunk step under
        the line (3 decode-only gaps), and read 0.02 against a truth of 0.11 where the simulator's chunk
        steps are 3.3 decode-only steps; the ledger's excess holds the batch's growth besides (0.18 there),
        so the two bracket the loss and the evidence prints both.

        Where no ledger ran and the long gaps were found by dose (:meth:`gaps_by_dose_found`), their excess
        is it: the collapse then contrasts scrapes with prefill against the few without (fewer than a ledger
        needs to time a step), with the batch's growth in it (live vLLM, one 150-token prompt every 6 s read at
        10 s scrapes: 0.166 against the clients' 0.093; the long gaps' 0.109); the collapse is the other end."""
        if self.sharing is not None:
            return self.sharing
        if self.gaps_by_dose_found() and self.gaps is not None:
            return np.asarray(np.clip(np.nan_to_num(self.gaps.loss), 0.0, None))
        return self.collapse_loss()

    def collapse_loss(self) -> np.ndarray:
        """The decoders' time lost while prefill runs, against idle (the rate contrast), floored at 0."""
        return np.asarray(np.clip(np.nan_to_num(self.collapse), 0.0, None))

    def gaps_by_dose_found(self) -> bool:
        """The long inter-token gaps, fitted by dose (no span free of prefill was timed), grow with the prompt
        tokens beyond noise: their signature is found (:func:`pdcensus.census.detect.gap_signature`)."""
        test = gap_signature(self.gaps) if self.gaps is not None and self.gaps.by_dose else None
        return test is not None and test.found

    def eviction_loss(self) -> np.ndarray:
        """Decoders' time lost to eviction per replicate: the largest of the lagged-tail deficit, the
        inflated decode-only steps and the deficit before recovery (each its own reading of one loss)."""
        residency = np.nan_to_num(self.residency) if self.residency is not None else 0.0
        recovered = np.nan_to_num(self.recovery_loss) if self.recovery_loss is not None else 0.0
        return np.asarray(np.fmax(np.fmax(np.nan_to_num(self.tail_loss), residency), recovered))
