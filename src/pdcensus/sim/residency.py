"""Residency: the expert slab, the prefill arena it lends, and the heat engine that re-promotes.

Mixture-of-experts weights are tiered between GPU and host. The GPU's expert slab holds the
hot set (what decode routes to) plus some headroom. A LARGE prefill (one needing more than one
checkpoint interval) borrows an arena from the slab for its whole duration; the arena's size
grows with the step budget (``--max-num-batched-tokens``, which ``--prefill-span`` sets to N
intervals). Hot experts that no longer fit are evicted. While any are missing, every step pays
an expert-miss penalty per missing expert. After the loan ends, the heat engine re-promotes
evicted experts one at a time, driven by access heat: one per ``promote_seconds`` of time in
which decoders ran. With ~200 evicted experts and ~1.5 s per promotion, decode-only steps stay
slow for minutes after the prefill ended: the lagged tail.

None of this exports a metric; it shows in ``boot.log``, ``/stats`` and ``/diagnostics``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ResidencyParams:
    """Sizes of the slab and the arena (in expert units) and the heat engine's pace."""

    slab_experts: int = 512
    hot_experts: int = 448
    arena_experts_per_token: float = 1.0 / 64.0
    promote_seconds: float = 1.5

    @property
    def headroom_experts(self) -> int:
        return self.slab_experts - self.hot_experts

    def arena_experts(self, budget_tokens: int) -> int:
        """Expert units an arena for a step budget of ``budget_tokens`` takes from the slab."""
        return int(math.ceil(budget_tokens * self.arena_experts_per_token))


class Residency:
    """The slab's state: missing hot experts, the current loan, heat accumulated toward a promotion."""

    def __init__(self, params: ResidencyParams, budget_tokens: int) -> None:
        self.params = params
        self.arena_experts = params.arena_experts(budget_tokens)
        self.missing_experts = 0
        self.loaned = False
        self.heat_seconds = 0.0
        self.loans = 0
        self.evictions = 0
        self.promotions = 0
        self.last_loan_end_seconds = float("nan")

    @property
    def evicts_on_loan(self) -> int:
        """Hot experts a loan pushes out of the slab."""
        return max(0, self.arena_experts - self.params.headroom_experts)

    def lend(self) -> None:
        """A large prefill starts: the arena leaves the slab and the overflow is evicted."""
        if self.loaned:
            return
        self.loaned = True
        self.loans += 1
        evict = self.evicts_on_loan
        if evict > self.missing_experts:
            self.evictions += evict - self.missing_experts
            self.missing_experts = evict
        self.heat_seconds = 0.0

    def give_back(self, now_seconds: float) -> None:
        """The loan ends; the heat engine may start re-promoting."""
        if self.loaned:
            self.loaned = False
            self.last_loan_end_seconds = now_seconds

    def promoting(self, decoders: int) -> bool:
        return not self.loaned and self.missing_experts > 0 and decoders > 0

    def seconds_to_next_promotion(self) -> float:
        return max(0.0, self.params.promote_seconds - self.heat_seconds)

    def add_heat(self, seconds: float, decoders: int) -> None:
        """Decoder time passed; promote as heat accumulates (callers bound runs at promotions)."""
        if not self.promoting(decoders):
            return
        self.heat_seconds += seconds
        while self.heat_seconds >= self.params.promote_seconds - 1e-12 and self.missing_experts > 0:
            self.heat_seconds -= self.params.promote_seconds
            self.missing_experts -= 1
            self.promotions += 1
        if self.missing_experts == 0:
            self.heat_seconds = 0.0

    def state(self) -> dict[str, object]:
        return {
            "slab_experts": self.params.slab_experts,
            "hot_experts": self.params.hot_experts,
            "headroom_experts": self.params.headroom_experts,
            "arena_experts": self.arena_experts,
            "arena_loaned": self.loaned,
            "missing_experts": self.missing_experts,
            "heat_seconds": round(self.heat_seconds, 6),
            "promote_seconds": self.params.promote_seconds,
            "loans": self.loans,
            "evictions": self.evictions,
            "promotions": self.promotions,
        }
