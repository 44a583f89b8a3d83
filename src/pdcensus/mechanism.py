"""The runbook's mechanisms, the verdict's two non-answers, and the two shares that rank them.

One vocabulary for the census's verdict (``pdcensus.census``) and the simulator's ground truth
(``pdcensus.sim.truth``), which judges the model's own accounting by the same rule, so that the
two can be compared name for name. It sits at the bottom of the house because the simulator
stands beside the census and may not import it.

- *material*: a mechanism that costs at least ``MATERIAL_SHARE`` (5 %) of decoders' time; else
  *minor*.
- *dominant*: a material mechanism that holds at least ``DOMINANT_SHARE`` (25 %) of all lost
  time; two or more dominant mechanisms make the headline ``mixed``.

The two are different quantities, each with its own constant: ``MATERIAL_SHARE`` is a share of
decoders' time (the severity line), ``DOMINANT_SHARE`` a share of lost time (the ``mixed``
line). "All lost time" is the found mechanisms' loss in the census's headline and the
simulator's ``headline_rule``; the truth's ``"dominant"`` list (``truth.json``) holds it against
all three causes' loss, found or not.
"""

from __future__ import annotations

from enum import Enum

MATERIAL_SHARE = 0.05  # of decoders' time
DOMINANT_SHARE = 0.25  # of all lost time, among material mechanisms


class Mechanism(str, Enum):
    """What the verdict names (the runbook's mechanisms plus the two non-answers)."""

    STEP_TIME_SHARING = "step-time-sharing"
    EVICTION = "eviction"
    PREEMPTION_STALL = "preemption-stall"
    MIXED = "mixed"
    NONE = "none"
    INCONCLUSIVE = "inconclusive"
