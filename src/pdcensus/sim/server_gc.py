"""Garbage collection in the live simulator's slack, not in the middle of a token fan-out.

CPython's cyclic collector runs whenever allocations pass a threshold, wherever that happens:
under 256 streaming clients it struck in the middle of writing a step's tokens to the sockets,
and a collection of the older generations paused the event loop for 4-16 ms, which every client
of that step saw as a late token. :class:`CollectorPacer` keeps the interpreter's own policy
(the same generations, at the same allocation counts: ``gc.get_threshold()``) but moves each
collection to the slack before the next step end, when the driver has the loop to itself:

* on entry, everything alive (the engine, the scenario, the imported modules) is collected once
  and frozen (``gc.freeze()``), so later collections never walk it, and automatic collection
  is turned off;
* :meth:`CollectorPacer.collect_in` is called by the driver with the time left before the next
  step end. A generation is collected only where it fits: when that time is at least
  ``min_slack_seconds`` and ``fit_margin`` times the generation's recent pause (the longest
  seen, decaying by a tenth per collection; 10 ms assumed for the oldest before its first);
  the oldest generation whose collection is due (``gc.get_count()`` against
  ``gc.get_threshold()``, as CPython decides) and fits goes first, else the youngest;
* the youngest generation is collected at every chance, not at 700 net allocations: the count
  is net of deallocations of *older* objects too, so while the server churns the young list can
  hold tens of thousands of objects behind a count of 700 (such a collection took 4-11 ms);
  collected at each step it holds one step's survivors and takes a few hundredths of a ms;
* a generation whose count is ``force_factor`` times over its threshold is collected at the
  next chance whatever the slack, so memory stays bounded when steps leave no room;
* on exit the previous state is restored (unfrozen, collection on again if it was on).

The policy follows CPython 3.11's ``gc_collect_generations``, less its long-lived-objects
ratio for the oldest generation, which Python does not expose; after the freeze that
generation holds only what was made while serving.
"""

from __future__ import annotations

import gc
import time
from types import TracebackType

MIN_SLACK_SECONDS = 0.005
FIT_MARGIN = 1.5
FORCE_FACTOR = 10
FIRST_PAUSE_GUESS_SECONDS = (0.0, 0.001, 0.010)
PAUSE_DECAY = 0.9


class CollectorPacer:
    """Runs the cyclic garbage collector only in the driver's slack (a context manager)."""

    def __init__(self, min_slack_seconds: float = MIN_SLACK_SECONDS, fit_margin: float = FIT_MARGIN,
                 force_factor: int = FORCE_FACTOR) -> None:
        self.min_slack_seconds = min_slack_seconds
        self.fit_margin = fit_margin
        self.force_factor = force_factor
        self.thresholds = gc.get_threshold()
        self.collections = [0, 0, 0]
        self.pause_seconds = list(FIRST_PAUSE_GUESS_SECONDS)
        self.longest_pause_seconds = 0.0
        self._was_enabled = False

    def __enter__(self) -> CollectorPacer:
        self._was_enabled = gc.isenabled()
        self.thresholds = gc.get_threshold()
        gc.collect()
        gc.freeze()
        gc.disable()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        gc.unfreeze()
        if self._was_enabled:
            gc.enable()

    def choose(self, slack_seconds: float) -> int | None:
        """The generation to collect with ``slack_seconds`` to spare, or None."""
        counts = gc.get_count()
        for generation in (2, 1, 0):
            threshold = self.thresholds[generation]
            if generation and not counts[generation] > threshold > 0:
                continue
            if counts[generation] > self.force_factor * threshold > 0:
                return generation
            if slack_seconds >= max(self.min_slack_seconds, self.fit_margin * self.pause_seconds[generation]):
                return generation
        return None

    def collect_in(self, slack_seconds: float) -> int | None:
        """Collect what fits in ``slack_seconds`` (or is overdue); returns the generation collected, or None."""
        generation = self.choose(slack_seconds)
        if generation is None:
            return None
        began = time.perf_counter()
        gc.collect(generation)
        pause = time.perf_counter() - began
        self.pause_seconds[generation] = max(pause, PAUSE_DECAY * self.pause_seconds[generation])
        self.longest_pause_seconds = max(self.longest_pause_seconds, pause)
        self.collections[generation] += 1
        return generation
