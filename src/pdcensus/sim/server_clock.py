"""The engine model against the wall clock: the live half of ``pdcensus serve``.

Virtual time is ``speed x`` the wall time since start. A driver task wakes at each step end
(or at the next arrival when the engine is idle), advances the engine and hands the tokens it
emitted to the clients waiting for them, so a client gets its tokens at the model's step
cadence: a chunk step beside it delays its next token by the chunk's whole time.

The hand-over is timed closely, because a client measures the gaps between its tokens. When
the step ends at least ``PRECISE_MIN_SECONDS`` (wall) away, the driver wakes
``RELEASE_LEAD_SECONDS`` early, computes the step's end ahead of time with the events held in
an :class:`Outbox`, waits out what is left of the lead on the clock itself (event-loop timers
have millisecond resolution; the busy wait costs a few per cent of a core under load, and
happens only when there are tokens to hand over) and then releases the events in one go: the
engine's bookkeeping and its planning of the next run, which vary with the batch, no longer
delay the tokens. All of that is one synchronous block, so no other code ever sees the engine
ahead of the wall clock. A client arriving within the lead joins at the following step
boundary, as with a scheduler that plans the next step while the current one runs.
Between steps the driver gives the slack to the garbage collector (:class:`CollectorPacer`).

Requests from real clients join the scenario's own traffic (the ``WorkloadFeeder`` of the
scenario's last engine process, fed a minute of engine time ahead so the engine plans its runs
around those arrivals). A client's arrival is not known when the engine planned the run in
flight, so :func:`cut_run_at` ends that run at the step in progress: the new request is
admitted where a real scheduler would see it, at the next step boundary. Held steps admit
nothing, so a held run is never cut.

Everything here runs on one asyncio event loop (the server's): the engine is not thread-safe
and needs no lock. Each client request is a :class:`LiveRequest` with a queue of
:class:`TokenEvent`s that its HTTP handler drains.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pdcensus.errors import UsageError
from pdcensus.sim.config import EngineConfig, parse_config
from pdcensus.sim.engine import Engine
from pdcensus.sim.entities import Request, Sequence
from pdcensus.sim.evidence import boot_log, diagnostics, stats
from pdcensus.sim.exporter import RECORDING_PROFILES
from pdcensus.sim.hardware import Hardware
from pdcensus.sim.scenarios import Scenario, get_scenario, with_overrides
from pdcensus.sim.server_gc import CollectorPacer
from pdcensus.sim.workload import WorkloadFeeder

FEED_AHEAD_SECONDS = 60.0
MAX_SLEEP_SECONDS = 0.1  # wall seconds the driver sleeps at most, so a stopped flag is seen quickly
RELEASE_LEAD_SECONDS = 0.0025  # wall seconds before a step end the driver wakes to compute it ahead
PRECISE_MIN_SECONDS = 0.010  # closer step ends (high --speed) are handed over plainly: no early wake
FOREVER_SECONDS = 10 * 365 * 86400.0  # the background traffic's horizon


class EventKind(str, Enum):
    TOKENS = "tokens"
    FINISHED = "finished"
    CANCELLED = "cancelled"
    GONE = "gone"


@dataclass(frozen=True)
class TokenEvent:
    """What a client's handler receives: tokens at an engine instant, the finish, a cancellation, or its own exit."""

    kind: EventKind
    engine_seconds: float
    tokens: int = 0
    reason: str = ""


class Outbox:
    """Where the engine's token events go: straight to the clients' queues, or held for one release."""

    def __init__(self) -> None:
        self._held: list[tuple[asyncio.Queue[TokenEvent], TokenEvent]] | None = None

    def post(self, queue: asyncio.Queue[TokenEvent], event: TokenEvent) -> None:
        if self._held is None:
            queue.put_nowait(event)
        else:
            self._held.append((queue, event))

    def __len__(self) -> int:
        return len(self._held or ())

    def hold(self) -> None:
        """Keep what is posted from now on until :meth:`release`."""
        if self._held is None:
            self._held = []

    def release(self) -> int:
        """Deliver what was held, in the order it was posted; returns how many events."""
        held, self._held = self._held or [], None
        for queue, event in held:
            queue.put_nowait(event)
        return len(held)


class LiveRequest:
    """One client request inside the engine: its id and the queue its tokens arrive on."""

    def __init__(self, rid: int, output_tokens: int, outbox: Outbox | None = None) -> None:
        self.rid = rid
        self.output_tokens = output_tokens
        self.events: asyncio.Queue[TokenEvent] = asyncio.Queue()
        self.outbox = outbox if outbox is not None else Outbox()
        self.detached = False
        self.done = False

    def on_tokens(self, t: float, n_tokens: int) -> None:
        if not self.detached:
            self.outbox.post(self.events, TokenEvent(EventKind.TOKENS, t, n_tokens))

    def finish(self, t: float) -> None:
        if not self.done:
            self.done = True
            self.outbox.post(self.events, TokenEvent(EventKind.FINISHED, t))

    def gone(self) -> None:
        """The client disconnected: no more tokens are queued, and its handler is told to stop."""
        if not self.detached:
            self.detached = True
            self.events.put_nowait(TokenEvent(EventKind.GONE, 0.0, reason="the client went away"))

    def cancel(self, t: float, reason: str) -> None:
        if not self.done:
            self.done = True
            self.events.put_nowait(TokenEvent(EventKind.CANCELLED, t, reason=reason))


def _wake_up(future: asyncio.Future[str] | None, by: str) -> None:
    if future is not None and not future.done():
        future.set_result(by)


def cut_run_at(engine: Engine, t: float) -> None:
    """End the engine's run in flight at the step in progress at ``t`` (held runs are left whole)."""
    run = engine.run
    if run is None or run.held or run.steps <= 1:
        return
    steps = max(1, math.ceil((t - run.start_seconds) / run.step_seconds - 1e-9))
    run.steps = min(run.steps, steps)


def _live_scenario(name: str, overrides: Mapping[str, str]) -> Scenario:
    return with_overrides(get_scenario(name), dict(overrides))


class LiveEngine:
    """The scenario's last engine process, driven by the wall clock at ``speed``."""

    def __init__(self, scenario: str, *, speed: float = 1.0, background: bool = True, seed: int = 0,
                 overrides: Mapping[str, str] | None = None, profile: str = "radiance", port: int = 7770) -> None:
        if not (speed > 0 and math.isfinite(speed)):
            raise UsageError(f"--speed must be a positive number, got {speed!r}")
        if profile not in RECORDING_PROFILES:
            raise UsageError(f"unknown profile {profile!r}: expected one of: {', '.join(RECORDING_PROFILES)}")
        spec = _live_scenario(scenario, {**dict(overrides or {}), "--port": str(port)})
        segment = spec.segments[-1]
        self.scenario = spec
        self.build = segment.build
        self.config: EngineConfig = parse_config(segment.flags, EngineConfig(build=segment.build))
        self.profile = profile
        self.speed = speed
        self.engine = Engine(self.config, spec.cost, Hardware(), spec.residency, start_seconds=0.0)
        self.feeder: WorkloadFeeder | None = None
        if background:
            self.feeder = WorkloadFeeder(segment.workload, self.engine, random.Random(seed), 0.0, FOREVER_SECONDS,
                                         self.config.max_model_len)
        self.engine.finish_hooks.append(self._on_finish)
        self.wall_start = time.monotonic()
        self.epoch_start = time.time()
        self.live: dict[int, LiveRequest] = {}
        self.served = 0
        self.cancelled = 0
        self.draining = False
        self._stopped = False
        self._wake: asyncio.Future[str] | None = None
        self.pacer = CollectorPacer()
        self.outbox = Outbox()

    # ---- the clock ----------------------------------------------------------------------------

    def start_clock(self) -> None:
        """Engine time 0 is now."""
        self.wall_start = time.monotonic()
        self.epoch_start = time.time()

    def engine_seconds(self) -> float:
        return (time.monotonic() - self.wall_start) * self.speed

    def wall_of(self, engine_seconds: float) -> float:
        """The monotonic wall instant of an engine instant."""
        return self.wall_start + engine_seconds / self.speed

    def advance(self) -> float:
        """Bring the engine to the present; returns the engine time it was brought to."""
        now = self.engine_seconds()
        if self.feeder is not None:
            self.feeder.feed(now + FEED_AHEAD_SECONDS)
        self.engine.advance_until(now)
        return now

    def _next_event_seconds(self) -> float | None:
        run = self.engine.run
        if run is not None:
            return run.start_seconds + run.step_seconds
        return self.engine.next_arrival_seconds()

    async def drive(self) -> None:
        """The driver: advance at every step end (see the module's notes on timing) until :meth:`stop`."""
        loop = asyncio.get_running_loop()
        with self.pacer:
            while not self._stopped:
                nxt = self._next_event_seconds()
                now = time.monotonic()
                slack = MAX_SLEEP_SECONDS + 1.0 if nxt is None else self.wall_of(nxt) - now
                precise = nxt is not None and slack >= PRECISE_MIN_SECONDS
                lead = RELEASE_LEAD_SECONDS if precise else 0.0
                self.pacer.collect_in(slack - lead)
                delay = min(MAX_SLEEP_SECONDS, slack - lead - (time.monotonic() - now))
                if delay > 0:
                    self._wake = loop.create_future()
                    timer = loop.call_later(delay, _wake_up, self._wake, "timer")
                    try:
                        woken_by = await self._wake
                    finally:
                        timer.cancel()
                        self._wake = None
                    if woken_by != "timer" or slack > MAX_SLEEP_SECONDS:
                        continue  # a client arrived, the server stops, or a long idle wait: plan again
                if precise and nxt is not None and self._step_ahead(nxt):
                    due = self.wall_of(nxt)
                    while len(self.outbox) and time.monotonic() < due:
                        pass  # at most RELEASE_LEAD_SECONDS, and only when there are tokens to hand over
                    self.outbox.release()
                else:
                    self.advance()
                await asyncio.sleep(0)  # the handlers write what was just released

    def _step_ahead(self, until_seconds: float) -> bool:
        """Advance the engine to ``until_seconds`` (not yet reached) with its events held; False if it has passed."""
        if self.engine_seconds() >= until_seconds:
            return False
        self.outbox.hold()
        try:
            if self.feeder is not None:
                self.feeder.feed(until_seconds + FEED_AHEAD_SECONDS)
            self.engine.advance_until(until_seconds)
        except BaseException:
            self.outbox.release()
            raise
        return True

    def stop(self) -> None:
        self._stopped = True
        self.wake()

    def wake(self) -> None:
        """Make the driver advance now (a client arrived or the server stops)."""
        _wake_up(self._wake, "wake")

    # ---- clients ------------------------------------------------------------------------------

    def submit(self, prompt_tokens: int, output_tokens: int) -> LiveRequest:
        """A client request arrives now; its tokens come on the returned request's queue."""
        now = self.advance()
        request = Request(arrival_seconds=now, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                          kind="client")
        holder: list[LiveRequest] = []

        def listener(t: float, n: int) -> None:
            holder[0].on_tokens(t, n)

        handle = self.engine.submit(request, listener)
        live = LiveRequest(handle.rid, output_tokens, self.outbox)
        holder.append(live)
        self.live[handle.rid] = live
        cut_run_at(self.engine, now)
        self.wake()
        return live

    def detach(self, live: LiveRequest) -> None:
        """The client went away: stop queueing its tokens (the engine still finishes the sequence)."""
        live.detached = True

    def _on_finish(self, seq: Sequence, now: float) -> None:
        live = self.live.pop(seq.rid, None)
        if live is not None:
            self.served += 1
            live.finish(now)

    def begin_drain(self, grace_seconds: float) -> None:
        """Refuse new requests; cancel what has not finished ``grace_seconds`` (wall) from now."""
        if self.draining:
            return
        self.draining = True
        asyncio.get_running_loop().call_later(grace_seconds, self.cancel_all, "the server is shutting down")

    def cancel_all(self, reason: str) -> None:
        now = self.engine_seconds()
        for live in list(self.live.values()):
            if not live.done:
                self.cancelled += 1
                live.cancel(now, reason)
        self.live.clear()

    # ---- side channels ------------------------------------------------------------------------

    def gauges(self) -> dict[str, float]:
        return self.engine.gauges(self.advance())

    def boot_log(self) -> str:
        return boot_log(self.engine, self.build, self.epoch_start)

    def stats(self) -> dict[str, Any]:
        """``/stats``: the sim's stats.json at this instant, plus the live clock and clients.

        Engine instants in it are ``epoch_start + engine seconds`` (at ``speed`` 1, wall time).
        """
        now = self.advance()
        out = stats(self.engine, now, self.epoch_start)
        out["live"] = {
            "speed": self.speed,
            "engine_seconds": round(now, 6),
            "wall_epoch_seconds": round(time.time(), 3),
            "epoch_start": round(self.epoch_start, 3),
            "clients_in_flight": len(self.live),
            "clients_served": self.served,
            "clients_cancelled": self.cancelled,
            "background_traffic": self.feeder is not None,
            "scenario": self.scenario.name,
            "gc_collections_by_generation": list(self.pacer.collections),
            "gc_longest_pause_seconds": round(self.pacer.longest_pause_seconds, 6),
        }
        return out

    def diagnostics(self) -> dict[str, Any]:
        self.advance()
        return diagnostics(self.engine, self.build, time.time())
