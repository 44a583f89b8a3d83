"""Who sends the requests: a closed population of clients, read from the gauges, and when the twin becomes one.

A benchmark at a fixed concurrency, or N users who each wait for an answer before asking again, keeps
running + waiting near N (:func:`closed_population`). The twin replays the recorded arrivals
(:func:`pdcensus.sim.fitted.trace_workload`), which is right for a change that does not move the wait
for admission. A change of admission room (the KV pool, the batch bound) on such a population with a
standing queue does move it: the waiting clients get in sooner and send their next requests sooner.
There the twin runs as that many closed-loop clients (:func:`clients_for`,
:func:`pdcensus.sim.fitted.clients_workload`) that send the recorded requests back to back, both
without the change (its calibration error) and with it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pdcensus.census.run import ShapeRead
from pdcensus.series.profiles import Signal
from pdcensus.whatif.knobs import Knob, KnobSetting
from pdcensus.whatif.measure import WindowFigures

CAPACITY_FLAGS = frozenset({"--num-gpu-blocks-override", "--kv-cache-memory-bytes", "--max-num-seqs"})
# running + waiting within 1 of its median in this share of the (at least this many) scrapes: a closed population
CLOSED_LOOP_HELD, CLOSED_LOOP_MIN_SCRAPES = 0.9, 30
STANDING_QUEUE = 1.0  # mean waiting requests from which a change of admission room lets clients in
Loop = tuple[float, float]  # (level, share of the scrapes held within 1 of it): closed_population's answer


def closed_population(read: ShapeRead) -> Loop | None:
    """``(level, share)`` where running + waiting holds within 1 of its median ``level`` in ``share`` >=
    :data:`CLOSED_LOOP_HELD` of the scrapes (clients that send the next request when one ends); else None."""
    s = read.signals
    running, waiting = s.gauge(Signal.RUNNING), s.gauge(Signal.WAITING)
    if running is None or waiting is None:
        return None
    inside = (running + waiting)[np.isfinite(running) & np.isfinite(waiting)]
    inside = inside[inside > 0]
    if inside.size < CLOSED_LOOP_MIN_SCRAPES:
        return None
    level = float(np.median(inside))
    held = float(np.mean(np.abs(inside - level) <= 1.0))
    return (level, held) if level >= 2 and held >= CLOSED_LOOP_HELD else None


def changes_admission_room(settings: Sequence[KnobSetting]) -> bool:
    """Whether a setting changes admission room (the KV pool, the batch bound)."""
    return any(s.spelling in CAPACITY_FLAGS or s.knob is Knob.MAX_NUM_SEQS for s in settings)


def clients_for(loop: Loop | None, observed: WindowFigures, settings: Sequence[KnobSetting]) -> int | None:
    """The clients the twin runs as for this change: the population's level (``loop``, from
    :func:`closed_population`) where the change is admission room on a closed population with a standing queue;
    else None (the recorded arrivals are replayed)."""
    waiting = observed.get("waiting_mean")
    if loop is None or not changes_admission_room(settings) or not (math.isfinite(waiting)
                                                                    and waiting >= STANDING_QUEUE):
        return None
    return max(1, round(loop[0]))


def clients_note(loop: Loop | None, clients: int) -> str:
    """What the twin is, said where it runs as clients."""
    held = f" in {loop[1]:.0%} of the scrapes" if loop is not None else ""
    return (f"twin as {clients} closed-loop clients: running + waiting held at {clients}{held} with a standing "
            "queue, so each client sends the next recorded request when its last one ends (no think time), and a "
            "change of admission room brings the next requests sooner; the recorded arrival instants are not used")


def closed_loop_warning(loop: Loop | None, refused: str | None, clients: int | None = None) -> tuple[str, ...]:
    """Where the requests in the engine (running + waiting) hold near one number (``loop``), clients likely send
    the next request when one ends: a twin that replays the recorded arrivals cannot raise the request rate."""
    if loop is None or refused or clients is not None:
        return ()
    return (f"closed loop likely: running + waiting held at {loop[0]:.0f} +-1 in {loop[1]:.0%} of the scrapes, as "
            "when clients send the next request when one ends; the twin replays the recorded arrivals, so a change "
            "that shortens the wait is predicted at the recorded request rate (running and throughput after it are "
            "lower bounds, TTFT an upper one)",)
