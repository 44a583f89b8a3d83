"""A second, independent engine model: fixed ticks, a fluid batch, its own step-time law.

Written without reference to ``pdcensus.sim``: the census must hold on recordings that
engine did not make. The model advances in ticks of ``TICK_SECONDS``; inside a tick the
engine runs *runs* of identical steps (k chunk steps of one prompt, or n decode-only
steps, fractional n allowed) until the tick's time is spent (a step that overruns the
tick is paid from the next one). Decoders are a count, not objects: each finishes with a
geometric output length, so completions per tick are binomial in the tokens it got.

Step-time law (its own shape and magnitudes):

- decode-only step = a + b x batch + c x context tokens of the batch (+ an eviction penalty);
- chunk step = d + e x chunk tokens, plus the decode-only step when decode rows ride in the
  chunk (``rows_in_chunk``); without rows decoders get no token for the whole chunk step.

Causes, each made by its mechanism, never by painting a metric:

- step-time sharing: long prompts arrive beside decoders;
- eviction: after a large prefill finishes, decode steps pay a penalty (a multiple of the
  decode step) for a random 3-12 minutes, flat or decaying;
- preemption stall: bursts preempt a share of the batch; those sequences wait for KV, then
  re-prefill from token 0 and rejoin;
- healthy: only short prompts; idle: (almost) nothing.

Ground truth is accounted per tick, per decoder: the decode time it spent, and what it lost
to each cause (chunk time beyond its decode-only step; the penalty; time stopped while
preempted). :mod:`.generator` applies the verdict rule to the analysed shape.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass
from enum import Enum

import numpy as np

TICK_SECONDS = 0.25
GAUGE_DECAY_SECONDS = 1.0  # the tps gauges: ~1 s exponentially decayed windows
# vLLM's own histogram bounds (vllm/engine/metrics.py)
TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
               20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BOUNDS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
              40.0, 80.0)
ITERATION_BOUNDS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


class Cause(str, Enum):
    """What the workload injects (the verdict comes from the loss accounting, not from this)."""

    SHARING = "sharing"
    EVICTION = "eviction"
    PREEMPTION = "preemption"
    HEALTHY = "healthy"
    IDLE = "idle"


@dataclass(frozen=True)
class StepLaw:
    """Step times in seconds: decode-only = a + b*rows + c*context, chunk = d + e*tokens (+ rows)."""

    decode_base_seconds: float
    per_row_seconds: float
    per_context_token_seconds: float
    chunk_base_seconds: float
    per_chunk_token_seconds: float
    chunk_tokens: int
    rows_in_chunk: bool
    interleave_steps: int  # held decode-only steps after each chunk step beside decoders

    def decode_step_seconds(self, rows: int, context_tokens: float) -> float:
        return self.decode_base_seconds + self.per_row_seconds * rows + self.per_context_token_seconds * context_tokens

    def chunk_part_seconds(self, tokens: int) -> float:
        return self.chunk_base_seconds + self.per_chunk_token_seconds * tokens


@dataclass(frozen=True)
class Traffic:
    """The workload and the injected cause's parameters."""

    cause: Cause
    arrivals_per_second: float
    short_prompt_tokens: tuple[int, int]
    output_tokens_mean: float
    max_num_seqs: int
    long_prompt_every_seconds: float = math.inf
    long_prompt_tokens: tuple[int, int] = (0, 0)
    eviction_penalty: tuple[float, float] = (0.0, 0.0)  # x the decode-only step
    eviction_seconds: tuple[float, float] = (180.0, 720.0)
    eviction_decays: bool = False
    burst_every_seconds: float = math.inf
    burst_share: tuple[float, float] = (0.0, 0.0)
    kv_wait_seconds: tuple[float, float] = (0.0, 0.0)
    kv_capacity_tokens: float = 2.0e6


@dataclass
class Trace:
    """Per-tick increments, state at each tick's end, and the loss accounting."""

    tick_seconds: float
    start_seconds: float  # time of tick 0 relative to the window start (negative: warm-up)
    up: np.ndarray
    generation_tokens: np.ndarray
    prompt_tokens: np.ndarray
    steps: np.ndarray
    decode_steps: np.ndarray
    step_seconds: np.ndarray
    decode_step_seconds: np.ndarray
    held_steps: np.ndarray
    preemptions: np.ndarray
    running: np.ndarray
    waiting: np.ndarray
    preempted: np.ndarray
    kv_usage: np.ndarray
    decode_gauge: np.ndarray
    prefill_gauge: np.ndarray
    ttft: np.ndarray  # (ticks, len(TTFT_BOUNDS) + 1) observation counts per bucket
    itl: np.ndarray
    iteration_tokens: np.ndarray
    decoder_seconds: np.ndarray
    sharing_seconds: np.ndarray
    eviction_seconds: np.ndarray
    preemption_seconds: np.ndarray
    chunk_steps_beside_decoders: np.ndarray
    sharing_active_seconds: np.ndarray  # decoders' time in chunk steps (sharing's depth = 1 - loss / this)
    eviction_active_seconds: np.ndarray  # decoders' time in steps with an eviction penalty

    def tick_of(self, t: float) -> int:
        return int(np.clip(math.floor((t - self.start_seconds) / self.tick_seconds), 0, self.up.size - 1))


def _new_trace(n: int, start: float) -> Trace:
    z = lambda: np.zeros(n)  # noqa: E731
    return Trace(TICK_SECONDS, start, np.ones(n, bool), z(), z(), z(), z(), z(), z(), z(), z(), z(), z(), z(), z(),
                 z(), z(), np.zeros((n, len(TTFT_BOUNDS) + 1)), np.zeros((n, len(ITL_BOUNDS) + 1)),
                 np.zeros((n, len(ITERATION_BOUNDS) + 1)), z(), z(), z(), z(), z(), z(), z())


def _bucket(bounds: tuple[float, ...], value: float) -> int:
    return bisect.bisect_left(bounds, value)


def run_engine(law: StepLaw, traffic: Traffic, duration_seconds: float, seed: int, *,
               warmup_seconds: float = 600.0, restart: tuple[float, float] | None = None) -> Trace:
    """Run the model over ``[-warmup, duration)``; ``restart`` = (time, downtime seconds) or None.

    Written for speed in plain Python (a 2 h window is ~30,000 ticks): per-tick totals are
    local floats written once per tick into lists, histogram counts into numpy rows.
    """
    rng = np.random.default_rng(seed)
    h = TICK_SECONDS
    n = int(math.ceil((duration_seconds + warmup_seconds) / h))
    tr = _new_trace(n, -warmup_seconds)
    cols: dict[str, list[float]] = {name: [0.0] * n for name in _PER_TICK}
    alpha = math.exp(-h / GAUGE_DECAY_SECONDS)
    p_finish = 1.0 / max(traffic.output_tokens_mean, 1.0)
    arrivals = rng.poisson(traffic.arrivals_per_second * h, n).tolist()
    sizes = iter(rng.integers(*traffic.short_prompt_tokens, size=sum(arrivals), endpoint=True).tolist())
    queue: deque[list[float]] = deque()  # [tokens_left, total, arrival, kind(0 new, 1 re), count, preempt_t]
    parked: list[list[float]] = []  # [resume_t, count, tokens_each, preempt_t]
    running, context = 0, 0.0
    debt, hold_left = 0.0, 0.0
    g_dec = g_pre = 0.0
    evict_start, evict_until, evict_level = -math.inf, -math.inf, 0.0
    t_start = -warmup_seconds
    next_long = t_start + rng.exponential(traffic.long_prompt_every_seconds) if math.isfinite(
        traffic.long_prompt_every_seconds) else math.inf
    next_burst = t_start + rng.exponential(traffic.burst_every_seconds) if math.isfinite(
        traffic.burst_every_seconds) else math.inf
    down_from, down_to = (restart[0], restart[0] + restart[1]) if restart else (math.inf, math.inf)
    ttft, itl, iteration = tr.ttft, tr.itl, tr.iteration_tokens

    for i in range(n):
        t = t_start + i * h
        if down_from <= t < down_to:  # the process is gone: state lost, arrivals refused
            tr.up[i] = False
            queue.clear()
            parked.clear()
            running, context, debt, hold_left, g_dec, g_pre = 0, 0.0, 0.0, 0.0, 0.0, 0.0
            evict_until = -math.inf
            for _ in range(arrivals[i]):
                next(sizes)
            continue
        for _ in range(arrivals[i]):
            tokens = float(next(sizes))
            queue.append([tokens, tokens, t, 0.0, 1.0, 0.0])
        while next_long <= t:
            tokens = float(rng.integers(*traffic.long_prompt_tokens, endpoint=True))
            queue.append([tokens, tokens, t, 0.0, 1.0, 0.0])
            next_long += rng.exponential(traffic.long_prompt_every_seconds)
        preempted_now = 0.0
        while next_burst <= t:
            if running >= 2:
                m = max(1, int(round(rng.uniform(*traffic.burst_share) * running)))
                each = context / running
                running -= m
                context -= m * each
                parked.append([t + rng.uniform(*traffic.kv_wait_seconds), float(m), each, t])
                preempted_now += m
            next_burst += rng.exponential(traffic.burst_every_seconds)
        if parked:
            for p in [p for p in parked if p[0] <= t]:  # KV freed: re-prefill from token 0, at the head
                parked.remove(p)
                tokens = float(max(1, round(p[1] * p[2])))
                queue.appendleft([tokens, tokens, t, 1.0, p[1], p[3]])

        gen = pre = steps = dsteps = ssec = dsec = held = 0.0
        dec_s = shr_s = ev_s = beside = shr_on = ev_on = 0.0
        budget = h + debt
        per_stream = 0.0
        pen_frac = 0.0
        if t < evict_until:
            pen_frac = evict_level
            if traffic.eviction_decays:
                pen_frac *= max(0.0, 1.0 - (t - evict_start) / (evict_until - evict_start))
        while budget > 1e-12:
            s = law.decode_step_seconds(running, context)
            pen = pen_frac * s
            head_ok = bool(queue) and (queue[0][3] == 1.0 or running + 1 <= traffic.max_num_seqs)
            if running > 0 and (hold_left > 0 or not head_ok):
                k_dec = budget / (s + pen) if hold_left <= 0 else min(hold_left, budget / (s + pen))
                if hold_left > 0:
                    held += k_dec
                    hold_left -= k_dec
                budget -= k_dec * (s + pen)
                steps += k_dec
                dsteps += k_dec
                ssec += k_dec * (s + pen)
                dsec += k_dec * (s + pen)
                gen += running * k_dec
                dec_s += running * k_dec * (s + pen)
                ev_s += running * k_dec * pen
                ev_on += running * k_dec * (s + pen) if pen > 0 else 0.0
                itl[i, _bucket(ITL_BOUNDS, s + pen)] += running * k_dec
                iteration[i, _bucket(ITERATION_BOUNDS, running)] += k_dec
                per_stream += k_dec
                continue
            if not head_ok:
                break  # nothing to run: the engine idles for the rest of the tick
            head = queue[0]
            tokens = int(min(law.chunk_tokens, head[0]))
            rows = running if law.rows_in_chunk else 0
            step = law.chunk_part_seconds(tokens) + ((s + pen) if rows else 0.0)
            full = int(head[0] // law.chunk_tokens)
            k = 1 if (full == 0 or (law.interleave_steps and running)) else max(1, min(full, int(budget // step)))
            budget -= k * step
            head[0] -= k * tokens
            steps += k
            ssec += k * step
            pre += k * tokens
            iteration[i, _bucket(ITERATION_BOUNDS, tokens + rows)] += k
            if running:
                beside += k
                dec_s += running * k * step
                shr_on += running * k * step
                ev_on += running * k * step if (rows and pen > 0) else 0.0
                itl[i, _bucket(ITL_BOUNDS, step if rows else k * step)] += running * (k if rows else 1)
                if rows:
                    shr_s += running * k * (step - s - pen)
                    ev_s += running * k * pen
                    gen += running * k
                    per_stream += k
                else:
                    shr_s += running * k * step
                hold_left = float(law.interleave_steps)
            if head[0] <= 0:
                queue.popleft()
                waited = t + (h - max(budget, 0.0)) - head[2]
                if head[3] == 0.0:
                    running += 1
                    context += head[1]
                    gen += 1
                    ttft[i, _bucket(TTFT_BOUNDS, waited)] += 1
                    if (traffic.cause is Cause.EVICTION and head[1] >= traffic.long_prompt_tokens[0]
                            and traffic.long_prompt_tokens[0] > 0):
                        evict_start = t
                        evict_until = t + rng.uniform(*traffic.eviction_seconds)
                        evict_level = rng.uniform(*traffic.eviction_penalty)
                else:
                    running += int(head[4])
                    context += head[1]
        debt = min(budget, 0.0)

        stopped = sum(p[1] for p in parked) + sum(q[4] for q in queue if q[3] == 1.0) if parked or queue else 0.0
        if running and per_stream > 0:
            done = int(rng.binomial(running, 1.0 - (1.0 - p_finish) ** per_stream))
            context += running * per_stream
            context -= done * context / running
            running -= done
        g_dec = alpha * g_dec + (1 - alpha) * gen / h
        g_pre = alpha * g_pre + (1 - alpha) * pre / h
        for name, value in (("generation_tokens", gen), ("prompt_tokens", pre), ("steps", steps),
                            ("decode_steps", dsteps), ("step_seconds", ssec), ("decode_step_seconds", dsec),
                            ("held_steps", held), ("preemptions", preempted_now), ("running", running),
                            ("waiting", len(queue) + sum(p[1] for p in parked)), ("preempted", stopped),
                            ("kv_usage", min(1.0, context / traffic.kv_capacity_tokens)), ("decode_gauge", g_dec),
                            ("prefill_gauge", g_pre), ("decoder_seconds", dec_s + stopped * h),
                            ("sharing_seconds", shr_s), ("eviction_seconds", ev_s),
                            ("preemption_seconds", stopped * h), ("chunk_steps_beside_decoders", beside),
                            ("sharing_active_seconds", shr_on), ("eviction_active_seconds", ev_on)):
            cols[name][i] = value
    for name, values in cols.items():
        setattr(tr, name, np.asarray(values, dtype=np.float64))
    return tr


_PER_TICK = ("generation_tokens", "prompt_tokens", "steps", "decode_steps", "step_seconds", "decode_step_seconds",
             "held_steps", "preemptions", "running", "waiting", "preempted", "kv_usage", "decode_gauge",
             "prefill_gauge", "decoder_seconds", "sharing_seconds", "eviction_seconds", "preemption_seconds",
             "chunk_steps_beside_decoders", "sharing_active_seconds", "eviction_active_seconds")
