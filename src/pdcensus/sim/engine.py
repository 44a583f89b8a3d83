"""The engine model: continuous batching in virtual time, advanced in runs of identical steps.

A step carries decode rows (``1 + spec`` per decoding sequence) and at most one prefill chunk.
The scheduler (:mod:`~pdcensus.sim.scheduler`) decides what it carries, the cost model
(:mod:`~pdcensus.sim.cost_model`) what it costs. Runs of identical steps are taken in one jump:
a run ends at the nearest arrival that could be admitted, completion, hold release, KV
exhaustion, expert promotion, or the ``until`` instant a caller asks for (a scrape), so the
work grows with events, not steps.

Use from a driver (virtual or wall clock)::

    engine = Engine(config)
    handle = engine.submit(Request(arrival_seconds=1.0, prompt_tokens=900, output_tokens=200))
    engine.advance_until(60.0)
    engine.metrics            # counters, decayed gauges, histograms, readable at any time
    engine.gauges(60.0)       # running / waiting / preempted depth / KV usage at an instant

Arrivals are kept in a heap keyed ``(time, seq)`` with a per-engine counter, so ties are
broken by submission order and two engines never share state.

The loop in :meth:`Engine.advance_until` runs a few hundred thousand times a simulated day on
chat traffic (each request is an arrival, a chunk run and a completion), so it keeps the
state it touches in local names, calls nothing per run that it can do in a line, and leaves
what only a reader needs (the recent requests' rounded timings) to the reader. The per-request
events (admission, preemption, end of prefill, finish) are in :mod:`~pdcensus.sim.lifecycle`.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable

from pdcensus.sim.config import EngineConfig
from pdcensus.sim.cost_model import CostModel
from pdcensus.sim.engine_exports import EngineTallies
from pdcensus.sim.entities import Request, RequestHandle, Sequence, TokenListener
from pdcensus.sim.hardware import Hardware
from pdcensus.sim.kv import CheckpointStore, KVCache, auto_slots
from pdcensus.sim.lifecycle import DECODING, FinishHook, RequestLifecycle
from pdcensus.sim.metrics_state import MetricsState
from pdcensus.sim.residency import Residency, ResidencyParams
from pdcensus.sim.scheduler import KvAdmission
from pdcensus.sim.steps import Run, RunPlanner
from pdcensus.sim.truth import LossLedger

__all__ = ["Engine", "FinishHook", "RunWatcher"]
RunWatcher = Callable[[Run, int], None]
"""Told of every piece of a run the engine completes: the run and how many of its steps."""
_heappop, _heappush = heapq.heappop, heapq.heappush


class Engine(RequestLifecycle):
    """One engine process (a restart is a new Engine: every counter starts from zero)."""

    def __init__(
        self,
        config: EngineConfig,
        cost: CostModel | None = None,
        hardware: Hardware | None = None,
        residency: ResidencyParams | None = None,
        start_seconds: float = 0.0,
        *,
        engine_tallies: bool = True,
        admission: KvAdmission | None = None,
    ) -> None:
        """``engine_tallies=False``: leave :attr:`tallies` (SGLang's and TGI's own families) unfed,
        for a run that exports radiance's or vLLM's names only (they cost about a tenth of a
        chat-heavy simulation)."""
        self.config = config
        self.admission = admission or KvAdmission()
        self.cost = cost or CostModel()
        self.hardware = hardware or Hardware()
        self.start_seconds = start_seconds
        self.now = start_seconds
        self.tokens_per_step = config.rows_per_sequence
        blocks = self.hardware.kv_blocks(config.block_size, config.num_gpu_blocks_override)
        self.kv = KVCache(blocks, config.block_size, round(config.block_size * self.admission.partial_block_share))
        self.residency = Residency(residency or ResidencyParams(), config.max_num_batched_tokens)
        slots = config.checkpoint_slots or auto_slots(
            config.checkpoint_policy, config.max_model_len, config.checkpoint_interval,
            config.max_num_seqs, self.hardware.host_ram_bytes, self.hardware.checkpoint_bytes,
        )
        self.checkpoints = CheckpointStore(config.checkpoint_policy, config.checkpoint_interval, slots)
        self.metrics = MetricsState(start_seconds=start_seconds)
        # what SGLang and TGI export beyond radiance's state (their bounds, per-request timing)
        self.tallies = EngineTallies(max_total_tokens=config.max_model_len)
        self.feeds_tallies = engine_tallies
        self.arrived = 0  # requests taken in (queued for admission), whatever the tallies
        self._stride = config.checkpoint_interval  # snapshot positions a chunk writes (a span: only its last)
        self._stride_span = config.checkpoint_interval * config.prefill_span
        self.ledger = LossLedger(start_seconds=start_seconds, end_seconds=start_seconds)
        self.decode_index = 0
        self.decoders: list[Sequence] = []
        self.waiting: deque[Sequence] = deque()
        self.prefilling: Sequence | None = None
        self.held_remaining = 0
        self.preempted_waiting = 0
        self.pending_lookup = (0, 0)  # prefix-cache (queries, hits) the next completed step publishes
        # (running, waiting, KV usage) as the last completed step ended, where the stats are published then
        self.published: tuple[float, float, float] | None = None
        self.run: Run | None = None
        self.finish_hooks: list[FinishHook] = []
        self.run_watchers: list[RunWatcher] = []
        self.recent_steps: deque[tuple[float, int, Run]] = deque(maxlen=64)
        self._recent_finished: deque[tuple[Sequence, float]] = deque(maxlen=64)
        self._arrivals: list[tuple[float, int, Sequence]] = []
        self._completions: list[tuple[int, int, int, Sequence]] = []
        self._counter = 0
        self._handles: dict[int, RequestHandle] = {}
        self._listening = False
        self._planner = RunPlanner(config, self.cost, self.hardware)

    # ---- public API -------------------------------------------------------------------------

    def submit(self, request: Request, listener: TokenListener | None = None,
               record_emissions: bool = False) -> RequestHandle:
        """Queue a request; it arrives at ``max(request.arrival_seconds, now)``."""
        self._counter += 1
        rid = self._counter
        handle = RequestHandle(rid, request, record_emissions)
        output = request.output_tokens
        seq = Sequence(rid, request, -(-(output - 1 if output > 1 else 0) // self.tokens_per_step))
        if record_emissions or listener is not None:
            watchers = [handle.on_tokens] + ([listener] if listener else [])
            seq.listener = watchers[0] if len(watchers) == 1 else _fan_out(watchers)
            self._listening = True
        self._handles[rid] = handle
        arrival = request.arrival_seconds
        _heappush(self._arrivals, (arrival if arrival >= self.now else self.now, rid, seq))
        return handle

    def advance_until(self, until_seconds: float) -> None:
        """Run every step that ends at or before ``until_seconds``; a step in flight stays in flight.

        One pass of the loop makes the scheduler's changes (keep the next step in the KV cache,
        go on holding, or end the hold and admit the queue's head), plans a run, completes as
        many of its steps as end by ``until_seconds`` and, when the run is over, lets the prefill
        finish and the decoders that are done leave. The bookkeeping is written out here rather
        than in helpers: the loop runs a few hundred thousand times a simulated day.
        """
        plan = self._planner.plan
        ledger = self.ledger
        record_steps = ledger.record_steps
        arrivals, completions, decoders, waiting = self._arrivals, self._completions, self.decoders, self.waiting
        m, tallies, kv, residency = self.metrics, self.tallies, self.kv, self.residency
        decode_rate, prefill_rate = m.decode_rate, m.prefill_rate
        observe_inter_token, observe_iteration = m.inter_token.observe, m.iteration_tokens.observe
        on_steps, on_inter_token = tallies.on_steps, tallies.on_inter_token
        feeds_tallies = self.feeds_tallies
        recent = self.recent_steps.append
        watchers = self.run_watchers
        per_step = self.tokens_per_step
        block = kv.holder_waste
        held_per_chunk = self.config.held_steps_per_chunk
        while True:
            run = self.run
            if run is None:
                now = self.now
                if arrivals and arrivals[0][0] <= now:
                    self._ingest(now)
                if decoders:
                    n = len(decoders)
                    growth = n * per_step
                    holders = n + (1 if self.prefilling is not None else 0)
                    if kv.capacity_tokens - holders * block - (kv.static_tokens + growth * self.decode_index) < growth:
                        self._ensure_kv(now)
                if not (self.held_remaining > 0 and decoders):
                    self.held_remaining = 0
                    if self.prefilling is None and waiting:
                        self.try_admit(now)
                run = plan(self, now)
                if run is None:
                    decode_rate.set_rate(now, 0.0)
                    prefill_rate.set_rate(now, 0.0)
                    nxt = arrivals[0][0] if arrivals else None
                    if nxt is None or nxt > until_seconds:
                        self.now = max(now, until_seconds)
                        ledger.end_seconds = self.now
                        return
                    self.now = nxt
                    continue
                self.run = run
                dt = run.step_seconds
                decode_rate.set_rate(now, run.decoders * per_step / dt)
                if run.prefill_tokens or prefill_rate.rate:
                    prefill_rate.set_rate(now, run.prefill_tokens / dt)
            start, dt = run.start_seconds, run.step_seconds
            fit = int((until_seconds - start) / dt + 1e-9)
            if fit <= 0:
                ledger.end_seconds = max(ledger.end_seconds, until_seconds)
                return
            steps = run.steps
            n = fit if fit < steps else steps
            # ---- n steps complete ----
            decoding, chunk, held = run.decoders, run.prefill_tokens, run.held
            seconds = n * dt
            if self.pending_lookup[0]:
                m.prefix_cache_queries += self.pending_lookup[0]
                m.prefix_cache_hits += self.pending_lookup[1]
                self.pending_lookup = (0, 0)
            m.steps += n
            m.step_seconds += seconds
            if feeds_tallies:
                on_steps(dt, n, chunk > 0)
            if not chunk:
                m.steps_decode += n
                m.step_seconds_decode += seconds
                if held:
                    m.steps_held += n
                    # counted per completed step: a live driver completes a held run a few steps at a time
                    self.held_remaining = max(0, self.held_remaining - n)
            rows = decoding * per_step
            if decoding:
                self.decode_index += n
                m.generation_tokens += n * rows
                emitted = n * decoding
                observe_inter_token(dt, emitted)
                if feeds_tallies:
                    on_inter_token(dt, emitted)
            observe_iteration(rows + chunk, n)
            if chunk:
                m.snapshot_writes += n * run.snapshot_writes
                self._progress_prefill(run, n)
            if residency.missing_experts:
                residency.add_heat(seconds, decoding)
            record_steps(decoding, n, dt, run.chunk_extra_seconds, run.miss_seconds, chunk > 0, held, chunk)
            recent((start, n, run))
            if watchers:
                for watch in watchers:
                    watch(run, n)
            if decoding and self._listening:
                self._emit(run, n)
            now = self.now = start + seconds
            if n < steps:
                run.start_seconds = now
                run.steps = steps - n
                ledger.end_seconds = max(ledger.end_seconds, until_seconds)
                if self.admission.stats_at_step_end:
                    self.published = self._state()
                return
            self.run = None
            # ---- the run is over ----
            seq = self.prefilling
            if seq is not None and seq.prefill_end_position - seq.prefill_start_position <= seq.prefill_done_tokens:
                self._finish_prefill(seq, now)
            if completions and completions[0][0] <= self.decode_index:
                self._finish_due(now)
            if chunk and decoding and held_per_chunk:
                self.held_remaining = held_per_chunk
            if self.admission.stats_at_step_end:
                self.published = self._state()

    def _state(self) -> tuple[float, float, float]:
        """(running, waiting, KV usage) now."""
        running = len(self.decoders) + (1 if self.prefilling is not None else 0)
        used = self.kv.used_tokens(self.decode_index, len(self.decoders), self.tokens_per_step)
        return float(running), float(len(self.waiting)), used / self.kv.capacity_tokens if self.kv.capacity_tokens else 0.0

    def gauges(self, t: float) -> dict[str, float]:
        """Gauges at ``t``: running, waiting (arrivals up to ``t`` count) and KV usage as they are at ``t``, or, where
        the stats are published when a step ends (:attr:`KvAdmission.stats_at_step_end`), as the last step ended."""
        self._ingest(t)
        state = self.published if self.published is not None else self._state()
        running, waiting, kv_usage = state
        return {
            "running": running,
            "waiting": waiting,
            "preempted": float(self.preempted_waiting),
            "kv_usage": kv_usage,
            "decode_tokens_per_second": self.metrics.decode_rate.value_at(t),
            "prefill_tokens_per_second": self.metrics.prefill_rate.value_at(t),
        }

    def handle(self, rid: int) -> RequestHandle:
        return self._handles[rid]

    # ---- internals ----------------------------------------------------------------------------

    def _ingest(self, t: float) -> None:
        arrivals, waiting, on_arrival = self._arrivals, self.waiting, self.tallies.on_arrival
        feeds_tallies, taken = self.feeds_tallies, 0
        while arrivals and arrivals[0][0] <= t:
            seq = _heappop(arrivals)[2]
            waiting.append(seq)
            taken += 1
            if feeds_tallies:
                on_arrival(seq.request.prompt_tokens)
        self.arrived += taken

    def next_arrival_seconds(self) -> float | None:
        return self._arrivals[0][0] if self._arrivals else None

    def next_completion_index(self) -> int | None:
        completions = self._completions
        while completions:
            index, _rid, version, seq = completions[0]
            if seq.phase is DECODING and seq.version == version:
                return index
            _heappop(completions)
        return None

    def holders(self) -> int:
        return len(self.decoders) + (1 if self.prefilling is not None else 0)

    def free_kv_tokens(self) -> int:
        return self.kv.free_tokens(self.decode_index, len(self.decoders), self.tokens_per_step, self.holders())

    def _emit(self, run: Run, n: int) -> None:
        """Tell each watched decoder about the tokens of ``n`` steps of ``run``."""
        dt, per_step = run.step_seconds, self.tokens_per_step
        for s in self.decoders:
            if s.listener is not None:
                for i in range(1, n + 1):
                    s.listener(run.start_seconds + i * dt, per_step)

    def _progress_prefill(self, run: Run, n: int) -> None:
        seq = self.prefilling
        assert seq is not None
        m, chunk = self.metrics, run.prefill_tokens
        pos0 = seq.prefill_start_position + seq.prefill_done_tokens
        pos1 = pos0 + n * chunk
        replay_end = seq.replay_end_position
        cut = (pos1 if pos1 < replay_end else replay_end) - pos0
        if cut > 0:
            m.prefix_hit_cut_tokens += cut
            self.ledger.cut_tokens += cut
        m.prompt_tokens += n * chunk
        m.prefill_step_seconds.observe(run.step_seconds, n)
        m.prefill_step_tokens.observe(chunk, n)
        stride = self._stride_span if run.skip_intermediate_writes else self._stride
        first = (pos0 // stride + 1) * stride
        if first <= pos1:
            seq.written_positions.extend(range(first, pos1 + 1, stride))
        seq.prefill_done_tokens += n * chunk


def _fan_out(listeners: list[TokenListener]) -> TokenListener:
    def call(t: float, n: int) -> None:
        for listener in listeners:
            listener(t, n)
    return call
