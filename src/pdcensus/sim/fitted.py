"""A workload given as a trace: requests with their own arrival, prompt and output, replayed as given.

The named scenarios draw their traffic from parametric distributions
(:mod:`pdcensus.sim.workload`). A simulator calibrated to a recording (``pdcensus whatif``,
:mod:`pdcensus.whatif`) instead replays the traffic the recording carried: each scrape
interval's request count and prompt work, drawn again per seed. This module turns such a list
of requests into a :class:`~pdcensus.sim.workload.Workload` the ordinary feeder runs, so the
engine, the scrapes and the exporter are the ones every scenario uses:

- :class:`TraceArrivals` is an arrival process whose instants are the trace's own;
- :class:`TraceLengths` hands out the trace's prompt (or output) lengths in arrival order.

The feeder draws a stream's arrival instants and, for each in turn, one prompt and one output
length (through :meth:`Lengths.sampler`), so the n-th arrival gets the n-th lengths. A trace workload is single-use: build a new
one per simulation (``trace_workload`` does). :func:`clients_workload` sends the same requests from a
closed population of clients instead, for a recording whose running + waiting held at a level.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from pdcensus.sim.workload import ArrivalKind, Arrivals, Clients, Lengths, Stream, Workload


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace: when it arrives (seconds from the window start), its prompt and output."""

    arrival_seconds: float
    prompt_tokens: int
    output_tokens: int
    kind: str = "replay"


@dataclass(frozen=True)
class TraceArrivals(Arrivals):
    """Arrival instants given in advance (sorted); the random source is not used."""

    instants: tuple[float, ...] = ()

    def times(self, rng: random.Random, start: float, end: float) -> Iterator[float]:
        for t in self.instants:
            if start <= t < end:
                yield t


@dataclass(frozen=True)
class TraceLengths(Lengths):
    """Token counts handed out in order, one per call (single-use: the position is kept)."""

    values: tuple[int, ...] = ()
    _position: list[int] = field(default_factory=lambda: [0], compare=False, repr=False)

    def sample(self, rng: random.Random) -> int:
        i = self._position[0]
        self._position[0] = i + 1
        return self.values[i] if i < len(self.values) else self.low

    def sampler(self, rng: random.Random) -> Callable[[], int]:
        """The feeder's bound form of :meth:`sample` (it must hand out the trace's values, not draw)."""
        return lambda: self.sample(rng)


def trace_workload(requests: Sequence[TraceRequest]) -> Workload:
    """A workload whose streams (one per request kind) replay ``requests`` exactly."""
    by_kind: dict[str, list[TraceRequest]] = {}
    for r in sorted(requests, key=lambda r: r.arrival_seconds):
        by_kind.setdefault(r.kind, []).append(r)
    streams = []
    for kind, reqs in by_kind.items():
        rate = len(reqs) / max(reqs[-1].arrival_seconds - reqs[0].arrival_seconds, 1.0)
        arrivals = TraceArrivals(ArrivalKind.POISSON, rate, instants=tuple(r.arrival_seconds for r in reqs))
        prompts = TraceLengths(1.0, 0.0, 1, values=tuple(max(1, r.prompt_tokens) for r in reqs))
        outputs = TraceLengths(1.0, 0.0, 1, values=tuple(max(1, r.output_tokens) for r in reqs))
        streams.append(Stream(kind, arrivals, prompts, outputs))
    return Workload(tuple(streams))


def clients_workload(requests: Sequence[TraceRequest], count: int, think_seconds: float = 0.0) -> Workload:
    """``count`` closed-loop clients that send the trace's requests (prompt and output) in arrival order.

    The trace's arrival instants are dropped: each client sends its next request when its last one ends,
    so a change that admits the waiting sooner also brings the next requests sooner."""
    ordered = sorted(requests, key=lambda r: r.arrival_seconds)
    pairs = tuple((max(1, r.prompt_tokens), max(1, r.output_tokens)) for r in ordered if r.kind != "standing")
    if not pairs:
        pairs = tuple((max(1, r.prompt_tokens), max(1, r.output_tokens)) for r in ordered)
    return Workload(clients=Clients(count, pairs, think_seconds))
