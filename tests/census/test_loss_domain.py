"""A loss share outside [0, 1] is withheld (NaN, with its reason), never printed as evidence."""

from __future__ import annotations

import math

from pdcensus.census.model import LossShares
from pdcensus.census.run import _in_domain


def _losses(sharing: float, eviction: float = 0.1, stall: float = 0.0) -> LossShares:
    return LossShares(sharing, (sharing - 0.1, sharing + 0.1), "ledger", eviction, (0.0, 0.2), "tail",
                      stall, (0.0, 0.0), "gaps", 0.3, (0.2, 0.4))


def test_a_negative_share_is_withheld_with_its_reason() -> None:
    kept, notes = _in_domain(_losses(-0.528))
    assert math.isnan(kept.step_time_sharing) and all(math.isnan(v) for v in kept.step_time_sharing_interval)
    assert kept.step_time_sharing_basis.startswith("withheld: the estimate (-52.8 %)")
    assert kept.eviction == 0.1 and kept.eviction_interval == (0.0, 0.2)
    assert notes == ("step-time sharing loss share withheld: its estimate, -52.8 %, lies outside [0, 1] (a share of "
                     "decoders' time)",)


def test_a_share_above_the_whole_is_withheld_and_shares_inside_pass_untouched() -> None:
    kept, notes = _in_domain(_losses(0.4, eviction=1.3))
    assert kept.step_time_sharing == 0.4 and math.isnan(kept.eviction) and len(notes) == 1
    same, none = _in_domain(_losses(0.0, eviction=1.0, stall=float("nan")))
    assert none == () and same.step_time_sharing == 0.0 and same.eviction == 1.0  # the bounds are inside
    assert math.isnan(same.preemption_stall) and same.preemption_stall_basis == "gaps"  # NaN: not measured, kept
