"""Workloads: arrival processes, length distributions, open-loop streams and multi-turn sessions.

Open-loop streams (chat traffic, long-context documents) are generated lazily in arrival
order, so a day of traffic never sits in memory at once: :class:`WorkloadFeeder` hands the
engine every arrival up to a horizon before the engine is advanced. Multi-turn sessions are
closed-loop: the next turn arrives a think time after the previous one finished, and its
prompt is the whole previous context plus the new user tokens, so it hits the prefix cache
(``cached_depth``) and is reused only up to the last retained checkpoint. A client population
(:class:`Clients`) is closed-loop too, with fresh prompts: each client sends its next request a
think time after its last one finished (what a benchmark at a fixed concurrency does).
"""

from __future__ import annotations

import heapq
import math
import operator
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from enum import Enum

from pdcensus.sim.engine import Engine
from pdcensus.sim.entities import Request, Sequence

_exp = math.exp
_time_and_index = operator.itemgetter(0, 1)


class ArrivalKind(str, Enum):
    POISSON = "poisson"
    BURSTY = "bursty"  # two-state modulated Poisson: calm at rate, bursts at burst_factor x rate
    DIURNAL = "diurnal"  # rate x (1 + amplitude x sin(2 pi t / 1 day))
    PERIODIC = "periodic"  # one every 1/rate seconds, jittered by +-jitter_share of the period


@dataclass(frozen=True)
class Arrivals:
    """An arrival process with a mean rate (per second)."""

    kind: ArrivalKind
    rate_per_second: float
    burst_factor: float = 4.0
    burst_seconds: float = 60.0
    calm_seconds: float = 240.0
    amplitude: float = 0.5
    jitter_share: float = 0.1
    offset_seconds: float = 0.0

    def times(self, rng: random.Random, start: float, end: float) -> Iterator[float]:
        """Arrival instants in ``[start, end)``, increasing."""
        if self.rate_per_second <= 0:
            return
        if self.kind is ArrivalKind.PERIODIC:
            period = 1.0 / self.rate_per_second
            t = start + self.offset_seconds
            while t < end:
                yield max(start, t + rng.uniform(-1, 1) * self.jitter_share * period)
                t += period
            return
        if self.kind is ArrivalKind.POISSON:
            t, draw, rate = start, rng.expovariate, self.rate_per_second
            while True:
                t += draw(rate)
                if t >= end:
                    return
                yield t
        bursty = self.kind is ArrivalKind.BURSTY
        peak = self.rate_per_second * (self.burst_factor if bursty else 1 + self.amplitude)
        t, in_burst = start, False
        switch_at = start + self.offset_seconds + rng.expovariate(1 / self.calm_seconds)
        while True:
            t += rng.expovariate(peak)
            if t >= end:
                return
            if bursty:
                while t >= switch_at:
                    in_burst = not in_burst
                    mean = self.burst_seconds if in_burst else self.calm_seconds
                    switch_at += rng.expovariate(1 / mean)
                rate = self.rate_per_second * (self.burst_factor if in_burst else 1.0)
            else:
                rate = self.rate_per_second * (1 + self.amplitude * math.sin(2 * math.pi * t / 86400.0))
            if rng.random() * peak <= rate:
                yield t


@dataclass(frozen=True)
class Lengths:
    """A log-normal token count (median, sigma), clipped to ``[low, high]``."""

    median: float
    sigma: float = 0.5
    low: int = 1
    high: int = 1 << 20

    def sample(self, rng: random.Random) -> int:
        value = int(round(self.median * _exp(rng.gauss(0.0, self.sigma))))
        return max(self.low, min(self.high, value))

    def sampler(self, rng: random.Random) -> Callable[[], int]:
        """:meth:`sample` bound to one generator, with its constants in locals (the same draws)."""
        median, sigma, low, high, gauss = self.median, self.sigma, self.low, self.high, rng.gauss

        def sample() -> int:
            value = int(round(median * _exp(gauss(0.0, sigma))))
            value = value if value < high else high
            return value if value > low else low
        return sample


@dataclass(frozen=True)
class Stream:
    """Open-loop requests: each arrival is a fresh prompt."""

    kind: str
    arrivals: Arrivals
    prompt: Lengths
    output: Lengths


@dataclass(frozen=True)
class Sessions:
    """Multi-turn sessions: a first prompt (a document), then turns that extend the context."""

    arrivals: Arrivals
    first_prompt: Lengths
    turn_tokens: Lengths
    output: Lengths
    turns: Lengths
    think_seconds: float = 15.0
    kind: str = "session"


@dataclass(frozen=True)
class Clients:
    """``count`` clients that each send a request at the start and the next one ``think_seconds`` after
    each finishes; the requests' ``(prompt, output)`` tokens are handed out in order, then again."""

    count: int
    requests: tuple[tuple[int, int], ...]
    think_seconds: float = 0.0
    kind: str = "client"


@dataclass(frozen=True)
class Workload:
    """Everything that arrives at one engine process."""

    streams: tuple[Stream, ...] = ()
    sessions: tuple[Sessions, ...] = ()
    clients: Clients | None = None

    def scaled(self, load: float) -> Workload:
        """The same workload with every arrival rate multiplied by ``load``."""
        def scale(a: Arrivals) -> Arrivals:
            return replace(a, rate_per_second=a.rate_per_second * load)
        clients = self.clients
        return Workload(
            tuple(replace(s, arrivals=scale(s.arrivals)) for s in self.streams),
            tuple(replace(s, arrivals=scale(s.arrivals)) for s in self.sessions),
            replace(clients, count=max(1, round(clients.count * load))) if clients is not None else None,
        )


@dataclass
class _SessionState:
    spec: Sessions
    session_id: int
    turns_left: int
    context_tokens: int


@dataclass
class WorkloadFeeder:
    """Feeds one engine: open-loop arrivals up to a horizon, session turns on completion."""

    workload: Workload
    engine: Engine
    rng: random.Random
    start_seconds: float
    end_seconds: float
    max_model_len: int = 131072
    _pending: Iterator[tuple[float, int, Request]] = field(init=False)
    _next: tuple[float, int, Request] | None = field(init=False, default=None)
    _generators: list[Iterator[tuple[float, int, Request]]] = field(init=False, default_factory=list)
    _heads: list[tuple[float, int, Request] | None] = field(init=False, default_factory=list)
    _sessions: dict[int, _SessionState] = field(init=False, default_factory=dict)
    _next_session_id: int = field(init=False, default=1)
    _client_requests: int = field(init=False, default=0)  # requests the clients have sent

    def __post_init__(self) -> None:
        gens = [self._stream(i, s) for i, s in enumerate(self.workload.streams)]
        gens += [self._session_starts(i, s) for i, s in enumerate(self.workload.sessions)]
        if len(gens) > 1 and len(self.workload.sessions) <= 1:
            # (time, index) order, merged a feed at a time: each generator is drawn up to the
            # horizon, then one sort (stable, so a generator's own ties keep its order). Drawing
            # one generator ahead of another changes nothing: each has its own random stream, and
            # only a session generator has side effects (session ids), so there is at most one
            self._generators = gens
            self._heads = [next(g, None) for g in gens]
            self._pending = iter(())
        else:
            # in (time, index) order; the indexes differ between generators, so the tuples' own
            # order is that order and the merge needs no key (one generator needs no merge)
            self._pending = gens[0] if len(gens) == 1 else heapq.merge(*gens)
            self._next = next(self._pending, None)
        if self.workload.sessions:
            self.engine.finish_hooks.append(self._on_finish)
        clients = self.workload.clients
        if clients is not None and clients.requests:
            self.engine.finish_hooks.append(self._on_client_finish)
            for _ in range(clients.count):
                self._client_send(clients, self.start_seconds)

    def _client_send(self, clients: Clients, at: float) -> None:
        prompt, output = clients.requests[self._client_requests % len(clients.requests)]
        self._client_requests += 1
        prompt = max(1, min(prompt, self.max_model_len - 16))
        self.engine.submit(Request(at, prompt, max(1, min(output, self.max_model_len - prompt)), -1, 0,
                                   clients.kind))

    def _on_client_finish(self, seq: Sequence, now: float) -> None:
        clients = self.workload.clients
        if clients is None or seq.request.kind != clients.kind:
            return
        at = now + clients.think_seconds
        if at < self.end_seconds:
            self._client_send(clients, at)

    def _stream(self, index: int, stream: Stream) -> Iterator[tuple[float, int, Request]]:
        rng = random.Random(self.rng.getrandbits(64))
        prompt_sample, output_sample = stream.prompt.sampler(rng), stream.output.sampler(rng)
        longest, kind = self.max_model_len, stream.kind
        for t in stream.arrivals.times(rng, self.start_seconds, self.end_seconds):
            prompt = min(prompt_sample(), longest - 16)
            output = min(output_sample(), longest - prompt)
            yield (t, index, Request(t, prompt, output, -1, 0, kind))

    def _session_starts(self, index: int, spec: Sessions) -> Iterator[tuple[float, int, Request]]:
        rng = random.Random(self.rng.getrandbits(64))
        for t in spec.arrivals.times(rng, self.start_seconds, self.end_seconds):
            sid = self._next_session_id
            self._next_session_id += 1
            prompt = min(spec.first_prompt.sample(rng), self.max_model_len // 2)
            state = _SessionState(spec, sid, max(1, spec.turns.sample(rng)) - 1, 0)
            self._sessions[sid] = state
            output = spec.output.sample(rng)
            yield (t, 1000 + index, Request(t, prompt, output, session_id=sid, kind=spec.kind))

    def feed(self, until_seconds: float) -> None:
        """Submit every open-loop arrival up to ``until_seconds``."""
        if self._generators:
            self._feed_batch(until_seconds)
            return
        item = self._next
        if item is None or item[0] > until_seconds:
            return
        submit, pending = self.engine.submit, self._pending
        while item is not None and item[0] <= until_seconds:
            submit(item[2])
            item = next(pending, None)
        self._next = item

    def _feed_batch(self, until_seconds: float) -> None:
        batch: list[tuple[float, int, Request]] = []
        heads = self._heads
        for i, generator in enumerate(self._generators):
            item = heads[i]
            while item is not None and item[0] <= until_seconds:
                batch.append(item)
                item = next(generator, None)
            heads[i] = item
        batch.sort(key=_time_and_index)
        submit = self.engine.submit
        for item in batch:
            submit(item[2])

    def _on_finish(self, seq: Sequence, now: float) -> None:
        sid = seq.request.session_id
        state = self._sessions.get(sid)
        if state is None:
            return
        context = seq.request.prompt_tokens + seq.request.output_tokens
        spec = state.spec
        new_tokens = spec.turn_tokens.sample(self.rng)
        output = spec.output.sample(self.rng)
        if state.turns_left <= 0 or context + new_tokens + output > self.max_model_len:
            del self._sessions[sid]
            self.engine.checkpoints.forget(sid)
            return
        state.turns_left -= 1
        arrival = now + self.rng.expovariate(1.0 / spec.think_seconds)
        if arrival >= self.end_seconds:
            del self._sessions[sid]
            return
        self.engine.submit(Request(arrival, context + new_tokens, output, session_id=sid,
                                   cached_depth=context, kind=spec.kind))
