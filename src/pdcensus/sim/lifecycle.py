"""A request's way through the engine: admission, preemption, the end of its prefill, its finish.

These are the engine's per-request events (a few per request, where the run loop in
:meth:`~pdcensus.sim.engine.Engine.advance_until` runs a few times per request); they live
apart from the loop so that each module stays readable. :class:`RequestLifecycle` is a base of
:class:`~pdcensus.sim.engine.Engine` and declares the engine state it changes.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable

from pdcensus.sim.config import EngineConfig
from pdcensus.sim.engine_exports import EngineTallies
from pdcensus.sim.entities import Phase, RequestHandle, Sequence
from pdcensus.sim.kv import CheckpointStore, KVCache
from pdcensus.sim.metrics_state import MetricsState
from pdcensus.sim.residency import Residency
from pdcensus.sim.scheduler import KvAdmission, admission_fits, resume_start
from pdcensus.sim.truth import LossLedger

FinishHook = Callable[[Sequence, float], None]
DECODING, PREFILLING, PREEMPTED = Phase.DECODING, Phase.PREFILLING, Phase.PREEMPTED
_heappop, _heappush = heapq.heappop, heapq.heappush


class RequestLifecycle:
    """The per-request events of an engine (the engine's state is declared here, set by the engine)."""

    config: EngineConfig
    admission: KvAdmission
    tokens_per_step: int
    kv: KVCache
    residency: Residency
    checkpoints: CheckpointStore
    metrics: MetricsState
    tallies: EngineTallies
    feeds_tallies: bool
    ledger: LossLedger
    decode_index: int
    decoders: list[Sequence]
    waiting: deque[Sequence]
    prefilling: Sequence | None
    preempted_waiting: int
    pending_lookup: tuple[int, int]
    finish_hooks: list[FinishHook]
    _handles: dict[int, RequestHandle]
    _completions: list[tuple[int, int, int, Sequence]]
    _recent_finished: deque[tuple[Sequence, float]]

    @property
    def recent_requests(self) -> list[dict[str, object]]:
        """The last 64 finished requests (what ``/stats`` shows), timings rounded to the microsecond."""
        out: list[dict[str, object]] = []
        for seq, now in self._recent_finished:
            request = seq.request
            out.append({
                "rid": seq.rid, "kind": request.kind, "arrival_seconds": round(request.arrival_seconds, 6),
                "prompt_tokens": request.prompt_tokens, "output_tokens": request.output_tokens,
                "ttft_seconds": round(seq.first_token_seconds - request.arrival_seconds, 6),
                "e2e_seconds": round(now - request.arrival_seconds, 6), "preemptions": seq.preemptions,
            })
        return out

    def _ensure_kv(self, now: float) -> None:
        """Preempt the newest decoders until the next decode step fits in the KV cache."""
        decoders, kv, per_step = self.decoders, self.kv, self.tokens_per_step
        while decoders:
            n = len(decoders)
            growth = n * per_step
            holders = n + (1 if self.prefilling is not None else 0)
            free = kv.capacity_tokens - holders * kv.holder_waste - (kv.static_tokens + growth * self.decode_index)
            if free >= growth:
                return
            self.preempt_newest(now)

    def try_admit(self, now: float) -> None:
        """Admit the head of the queue as the prefilling sequence, if it fits."""
        if self.prefilling is not None or not self.waiting:
            return
        seq = self.waiting[0]
        request = seq.request
        resuming = seq.phase is PREEMPTED
        if resuming:
            start, end, replay_end = 0, request.prompt_tokens + seq.generated_tokens, 0
            if self.admission.resume_from_prefix_cache:
                start = replay_end = resume_start(end, self.kv.block_size, seq.preempt_free_tokens,
                                                  self._used_tokens() - seq.preempt_used_tokens)
        else:
            depth = min(request.cached_depth, request.prompt_tokens)
            start = self.checkpoints.lookup(request.session_id, depth) if depth > 0 else 0
            start = min(start, request.prompt_tokens - 1)
            end = request.prompt_tokens
            replay_end = max(start, depth)
        kv, running = self.kv, len(self.decoders)  # nothing prefills, so the holders are the decoders
        free = kv.capacity_tokens - running * kv.holder_waste - (kv.static_tokens + running * self.tokens_per_step
                                                                * self.decode_index)
        if not admission_fits(free - kv.holder_waste, end, kv.capacity_tokens, running,
                              (running + 1) * self.tokens_per_step, self.config, self.admission):
            return
        self.waiting.popleft()
        if resuming:
            self.preempted_waiting -= 1
        seq.phase = PREFILLING
        seq.prefill_start_position, seq.prefill_end_position = start, end
        seq.replay_end_position, seq.prefill_done_tokens = replay_end, 0
        if seq.written_positions:
            seq.written_positions = []
        if not resuming:
            seq.admitted_seconds = now
            m = self.metrics
            m.queue_wait.observe(now - request.arrival_seconds)
            if self.admission.stats_at_step_end:
                self.pending_lookup = (self.pending_lookup[0] + request.prompt_tokens, self.pending_lookup[1] + start)
            else:
                m.prefix_cache_queries += request.prompt_tokens
                m.prefix_cache_hits += start
        kv.static_tokens += end
        self.prefilling = seq
        if end - start > self.config.checkpoint_interval:
            self.residency.lend()

    def _used_tokens(self) -> int:
        """KV tokens held now (the decoders' and the prefilling sequence's)."""
        return self.kv.static_tokens + len(self.decoders) * self.tokens_per_step * self.decode_index

    def preempt_newest(self, now: float) -> bool:
        """Preempt the most recently admitted decoder (recompute); False if there is none."""
        if not self.decoders:
            return False
        seq = self.decoders.pop()
        stint = self.decode_index - seq.decode_start_index
        seq.generated_tokens += stint * self.tokens_per_step
        seq.decode_tokens_needed -= stint
        self.kv.static_tokens -= seq.kv_base
        if self.admission.resume_from_prefix_cache:
            used = self._used_tokens()
            seq.preempt_used_tokens = used
            seq.preempt_free_tokens = self.kv.capacity_tokens - used - seq.request.prompt_tokens - seq.generated_tokens
        seq.version += 1
        seq.phase = Phase.PREEMPTED
        seq.preempted_seconds = now
        seq.preemptions += 1
        self.metrics.preemptions += 1
        self.ledger.preemptions += 1
        self.waiting.appendleft(seq)
        self.preempted_waiting += 1
        return True

    def _finish_due(self, now: float) -> None:
        """The decoders whose last step has run leave (entries of preempted stints are dropped)."""
        completions = self._completions
        while completions:
            index, _rid, version, done = completions[0]
            if done.phase is not DECODING or done.version != version:
                _heappop(completions)  # preempted since it was queued
                continue
            if index > self.decode_index:
                break
            _heappop(completions)
            self.decoders.remove(done)
            self.kv.static_tokens -= done.kv_base
            self._finish(done, now)

    def _finish_prefill(self, seq: Sequence, now: float) -> None:
        self.prefilling = None
        self.kv.static_tokens -= seq.prefill_end_position
        if self.residency.loaned:
            self.residency.give_back(now)
        if seq.written_positions and seq.request.session_id >= 0:
            self.checkpoints.record(seq.request.session_id, seq.written_positions)
        m = self.metrics
        if seq.preemptions:
            self.ledger.record_stall(now - seq.preempted_seconds)
            m.preemptions_at_resume += 1
        else:
            request = seq.request
            ttft = now - request.arrival_seconds
            seq.first_token_seconds = now
            handle = self._handles.get(seq.rid)
            if handle is not None:
                handle.first_token_seconds = now
            m.ttft.observe(ttft)
            if self.feeds_tallies:
                self.tallies.on_first_token(ttft)
            m.prompt_tokens_at_first_token += request.prompt_tokens
            m.prompt_tokens_local_compute += seq.prefill_end_position - seq.prefill_start_position
            m.prompt_tokens_local_cache_hit += seq.prefill_start_position
            m.generation_tokens += 1
            seq.generated_tokens = 1
            if seq.listener is not None:
                seq.listener(now, 1)
        seq.phase = DECODING
        if seq.decode_tokens_needed <= 0:
            self._finish(seq, now)
            return
        index = self.decode_index
        seq.kv_base = seq.prefill_end_position + 1 - self.tokens_per_step * index
        self.kv.static_tokens += seq.kv_base
        seq.decode_start_index = index
        self.decoders.append(seq)
        _heappush(self._completions, (index + seq.decode_tokens_needed, seq.rid, seq.version, seq))

    def _finish(self, seq: Sequence, now: float) -> None:
        """A sequence is done (the caller has taken it out of the decoders and their KV)."""
        seq.phase = Phase.FINISHED
        seq.finished_seconds = now
        request = seq.request
        e2e = now - request.arrival_seconds
        self.metrics.e2e.observe(e2e)
        self.metrics.request_success += 1
        if self.feeds_tallies:
            admitted = seq.admitted_seconds
            decode_start = admitted if admitted == admitted else request.arrival_seconds  # NaN: never admitted
            self.tallies.on_finish(request.prompt_tokens, request.output_tokens, e2e, now - decode_start)
        handle = self._handles.pop(seq.rid, None)
        if handle is not None:
            handle.finished_seconds = now
        self._recent_finished.append((seq, now))
        for hook in self.finish_hooks:
            hook(seq, now)

