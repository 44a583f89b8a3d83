"""What the screen says about one endpoint: a few sums from the store, and the estimates read from them.

The screen flags and ranks; it never names a mechanism. Its ``score`` estimates the census's own
total: the share of decoders' time lost, sequence-time weighted, summed over the three mechanisms,
each term the quantity the census computes for it (:mod:`pdcensus.census.measure`), read from the
store's sums (:mod:`pdcensus.fleet.screen_queries`):

* step-time sharing: with the step ledger, the chunk steps' time beyond what the same steps take
  decode-only, weighted by the running sequences (the census's ledger sharing); without one, the
  lag-0 loss, running sequence-time in busy scrapes less what idle speed would have needed for
  the decode done there, ``(running_busy - decode_busy / idle) / running_all`` (the census's
  collapse, against every idle scrape as the census's bucket table reads it);
* eviction: the larger of the tail loss (the same over scrapes idle now with prefill 2-14 min
  before, against the clean scrapes) and, with the ledger, the residency: decode-only steps
  slower than the undisturbed one times every step, weighted by the running sequences, as the
  census's ledger computes it (its reference: :attr:`ScreenRow.reference_step`);
* preemption: the preempted depth's share of running + preempted sequence-time (engines that
  export the depth; elsewhere the bursts are counted and the endpoint is flagged).

Each lost sequence-second is counted once: with a ledger the busy scrapes' rate deficit (which
also holds a preempted sequence's re-prefill and an eviction's slow steps) is not added; the
two readings of an eviction are one term. ``inflation_loss`` (decode-only steps against the 10th
percentile, unweighted) is kept as a reading, not in the score.

The tail's baseline per-stream rate is decode / running over scrapes with no prefill in the last
14 min (*clean*), or over every idle scrape when too few are clean. A flag marks an endpoint whose
number the screen cannot vouch for, so the census must look at it whatever its score:
no idle baseline, a restart or build change inside the window (two shapes), preemptions it
cannot weigh, a queue that grew by more than a whole running batch (its mean in the window's
last quarter exceeds the first quarter's by at least the mean number of running sequences), a
partial answer, or no screen numbers at all. An endpoint on which no sequence decoded in the
window has nothing to lose: its score is 0, unflagged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from pdcensus.census.ledger import FAST_CLUSTER_FACTOR
from pdcensus.census.verdict_caps import MIN_GROUP_SAMPLES
from pdcensus.fleet.screen_queries import LAGS_SECONDS

# A baseline needs this many scrapes' worth of running sequence-time (the census's MIN_GROUP_SAMPLES: the
# scrapes its contrasts need on each side). A share of the window (5 %, before) made the tail's baseline
# jump from the clean scrapes to every idle one, and an eviction tail's loss from ~0.15 to ~0.01, when noise
# moved an endpoint across it (seen on 24 h eviction-tail runs whose clean share is about 5 %).
MIN_BASELINE_SCRAPES = MIN_GROUP_SAMPLES


class ScreenFlag(str, Enum):
    """Why the screen sends an endpoint to the census whatever its score."""

    NO_BASELINE = "no-idle-baseline"
    SHAPE_CHANGE = "restart-or-build-change"
    PREEMPTION_UNWEIGHED = "preemptions-unweighed"
    QUEUE_GROWTH = "queue-growth"
    PARTIAL = "partial-answer"
    NOT_SCREENED = "not-screened"


def _exact(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 and math.isfinite(num) and math.isfinite(den) else math.nan


@dataclass(frozen=True)
class ScreenRow:
    """One endpoint's screen: the summed numbers, the queue at both ends, and what they imply."""

    job: str
    instance: str
    profile: str
    sums: dict[str, float] = field(default_factory=dict)
    queue_first: float = math.nan
    queue_last: float = math.nan
    partial: bool = False
    error: str | None = None

    def get(self, key: str) -> float:
        return self.sums.get(key, math.nan)

    @property
    def baseline_kind(self) -> str:
        if self._enough("clean"):
            return "clean"
        if self._enough("idle"):
            return "idle"
        return ""

    def _enough(self, cond: str) -> bool:
        """At least ``MIN_BASELINE_SCRAPES`` scrapes' worth (at the mean running batch) of sequence-time under ``cond``."""
        running, mean = self.get(f"running_{cond}"), _ratio(self.get("running_all"), self.get("scrapes"))
        return running > 0 and math.isfinite(mean) and running >= MIN_BASELINE_SCRAPES * mean

    @property
    def baseline_per_stream(self) -> float:
        kind = self.baseline_kind
        return _ratio(self.get(f"decode_{kind}"), self.get(f"running_{kind}")) if kind else math.nan

    def per_stream(self, cond: str) -> float:
        return _ratio(self.get(f"decode_{cond}"), self.get(f"running_{cond}"))

    @property
    def idle_per_stream(self) -> float:
        """Per-stream decode over every idle scrape (the census's lag-0 reference, its bucket table's idle row)."""
        if not self._enough("idle"):
            return math.nan
        return self.per_stream("idle")

    def _loss(self, cond: str, base: float | None = None) -> float:
        base = self.baseline_per_stream if base is None else base
        running, decode = self.get(f"running_{cond}"), self.get(f"decode_{cond}")
        if not (base > 0 and self.get("running_all") > 0):
            return math.nan
        if not running > 0:
            return 0.0
        return max(0.0, running - decode / base) / self.get("running_all")

    @property
    def lag0_loss(self) -> float:
        """Busy sequence-time beyond what idle speed needed: the census's rate-based collapse (idle reference)."""
        return self._loss("busy", self.idle_per_stream)

    @property
    def tail_loss(self) -> float:
        return self._loss("tail")

    @property
    def preemption_share(self) -> float:
        depth = self.get("preempted_depth")
        return _ratio(depth, self.get("running_all") + depth)

    def lag_ratio(self, lag_seconds: float) -> float:
        return _ratio(self.per_stream(f"lag{lag_seconds:g}"), self.baseline_per_stream)

    @property
    def phase_ratio(self) -> float:
        decode = _ratio(self.get("step_seconds_decode"), self.get("steps_decode"))
        chunk = _ratio(self.get("step_seconds") - self.get("step_seconds_decode"),
                       self.get("steps") - self.get("steps_decode"))
        return _ratio(chunk, decode)

    @property
    def inflation_loss(self) -> float:
        """Decode-only steps slower than the window's fast ones, as a share of all step time.

        ``1 - reference / mean`` of the decode-only step (reference: the 10th percentile of its
        per-minute mean), times the decode-only steps' share of step time: decoders' time lost in
        decode-only steps (expert misses after an eviction; also batch growth, which the census
        tells apart and the screen does not).
        """
        mean = _ratio(self.get("step_seconds_decode"), self.get("steps_decode"))
        share = _ratio(self.get("step_seconds_decode"), self.get("step_seconds"))
        ref = self.get("decode_step_q10")
        if not (math.isfinite(mean) and math.isfinite(share) and ref > 0):
            return math.nan
        return max(0.0, 1.0 - ref / mean) * share

    @property
    def reference_step(self) -> float:
        """The undisturbed decode-only step ``d0``, chosen as the census chooses its reference.

        The census takes the most common decode-only step (a half-sample mode), or, where a cluster
        at least ``FAST_CLUSTER_FACTOR`` x faster holds ``FAST_CLUSTER_SHARE`` of the intervals (an
        eviction covering most of the window), that cluster's (:func:`pdcensus.census.ledger._reference`).
        PromQL has no mode; the median of the per-minute mean stands for it (the same for a
        symmetric undisturbed spread, and like the mode unmoved by a tail over less than half the
        window), and the 10th percentile for the fast cluster when it is that much faster.
        """
        q10, q50 = self.get("decode_step_q10"), self.get("decode_step_q50")
        if not q50 > 0:
            return q10 if q10 > 0 else math.nan
        return q10 if 0 < q10 < q50 / FAST_CLUSTER_FACTOR else q50

    @property
    def sharing_loss(self) -> float:
        """The ledger's step-time sharing: chunk time beyond decode-only steps, running-weighted (NaN without)."""
        return _ratio(self.get("ledger_sharing"), self.get("running_all"))

    @property
    def residency_loss(self) -> float:
        """The ledger's eviction: decode-only steps slower than ``d0``, times every step, running-weighted.

        The census's ``(step - d0) x steps`` per interval weighted by the running sequences over
        their time (:mod:`pdcensus.census.ledger`), from two sums: ``sum running x step x steps/s``
        less ``d0 x sum running x steps/s``. Negative intervals count, as in the census.
        """
        d0 = self.reference_step
        num = self.get("residency_step_seconds") - d0 * self.get("residency_steps")
        return _ratio(num, self.get("running_all"))

    @property
    def sharing_term(self) -> float:
        """Step-time sharing as the census reads it: the ledger where the engine has one, else the lag-0 loss."""
        sharing = self.sharing_loss
        return sharing if math.isfinite(sharing) else self.lag0_loss

    @property
    def eviction_term(self) -> float:
        """Eviction as the census reads it: the larger of the lagged-tail deficit and the ledger's residency.

        (The census also takes the deficit before recovery, a fit PromQL cannot make.)
        """
        tail, residency = self.tail_loss, self.residency_loss
        if not math.isfinite(residency):
            return tail
        return max(residency, tail) if math.isfinite(tail) else residency

    @property
    def score(self) -> float:
        """Estimated share of decoders' time lost (NaN when the screen has no baseline; 0 with no decoders).

        The census's sum, term by term: sharing + eviction + preemption stall, each the census's
        own quantity over the same denominator (running sequence-time; the stall's share counts
        the preempted sequences too). Each lost sequence-second is counted by one term: with a
        ledger the sharing term is the chunk steps' excess, not the busy scrapes' rate deficit,
        which also holds the preempted sequences' re-prefill and the residency tail's slow steps.
        """
        if self.get("scrapes") > 0 and self.get("running_all") == 0:
            return 0.0  # no sequence decoded in the window: nothing to lose
        if not (math.isfinite(self.lag0_loss) and math.isfinite(self.tail_loss)):
            return math.nan
        pre = self.preemption_share
        return max(0.0, self.sharing_term) + max(0.0, self.eviction_term) + (pre if math.isfinite(pre) else 0.0)

    @property
    def flags(self) -> tuple[ScreenFlag, ...]:
        if self.error is not None or not self.get("scrapes") > 0:
            return (ScreenFlag.NOT_SCREENED,)
        out = []
        if not math.isfinite(self.score):
            out.append(ScreenFlag.NO_BASELINE)
        if self.get("resets") > 0:
            out.append(ScreenFlag.SHAPE_CHANGE)
        if self.get("preemptions") > 0 and not math.isfinite(self.preemption_share):
            out.append(ScreenFlag.PREEMPTION_UNWEIGHED)
        mean_running = _ratio(self.get("running_all"), self.get("scrapes"))
        if self.queue_last - self.queue_first >= max(1.0, mean_running if math.isfinite(mean_running) else 1.0):
            out.append(ScreenFlag.QUEUE_GROWTH)
        if self.partial:
            out.append(ScreenFlag.PARTIAL)
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return round(x, 6) if math.isfinite(x) else None

        return {
            "job": self.job, "instance": self.instance, "profile": self.profile,
            "score": num(self.score), "flags": [f.value for f in self.flags],
            "lag0_loss": num(self.lag0_loss), "tail_loss": num(self.tail_loss),
            "preemption_share": num(self.preemption_share), "inflation_loss": num(self.inflation_loss),
            "sharing_loss": num(self.sharing_loss), "residency_loss": num(self.residency_loss),
            "reference_step": num(self.reference_step), "sharing_term": num(self.sharing_term),
            "eviction_term": num(self.eviction_term),
            "baseline": self.baseline_kind or None, "baseline_per_stream": num(self.baseline_per_stream),
            "busy_per_stream": num(self.per_stream("busy")), "tail_per_stream": num(self.per_stream("tail")),
            "lag_ratio": {f"{lag:g}s": num(self.lag_ratio(lag)) for lag in LAGS_SECONDS},
            "phase_ratio": num(self.phase_ratio), "preemptions": num(self.get("preemptions")),
            "preemption_scrapes": num(self.get("preemption_scrapes")), "resets": num(self.get("resets")),
            "queue_first": _exact(self.queue_first), "queue_last": _exact(self.queue_last),
            "partial": self.partial, "error": self.error,
            "sums": {k: v if math.isfinite(v) else None for k, v in sorted(self.sums.items())},  # exact: resumable
        }

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> ScreenRow:
        """The row back from :meth:`to_dict` (the resume state file)."""
        def val(x: Any) -> float:
            return math.nan if x is None else float(x)

        return cls(str(body["job"]), str(body["instance"]), str(body["profile"]),
                   {k: val(v) for k, v in body.get("sums", {}).items()}, val(body.get("queue_first")),
                   val(body.get("queue_last")), bool(body.get("partial")), body.get("error"))
