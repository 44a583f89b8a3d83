"""The simulator's run exported under SGLang's and TGI's own names, labels and bucket bounds.

The engine model is one; what differs per engine is what its ``/metrics`` carries and when
each number moves. :class:`EngineTallies` keeps what radiance's own state does not: the
histograms with SGLang's and TGI's bucket bounds, per-method step durations (TGI) and the
counters those engines move only when a request ends. The engine feeds it at four events
(steps completed, first token, request arrival, request end). :func:`engine_families` and
:func:`engine_samples` give the families and the ``(sample name, labels, value)`` samples of
one scrape, for the recording assembler (:mod:`pdcensus.sim.exporter`).

Names, labels, bounds and timing were read in each engine's own source:

- SGLang, ``python/sglang/srt/metrics/collector.py``: scheduler metrics carry
  ``model_name, engine_type, tp_rank, pp_rank, moe_ep_rank``; tokenizer metrics carry
  ``model_name``. ``prompt_tokens_total`` and ``generation_tokens_total`` move when a request
  finishes (``observe_one_finished_request``); ``realtime_tokens_total{mode}`` moves as tokens
  are computed (on each log interval there; on each step here), so the census reads rates
  from it. Step time is ``gpu_execution_seconds_total{category}`` and decode batches
  ``cuda_graph_passes_total{mode}`` (both written by
  :func:`pdcensus.series.engine_ledger.ledger_samples`). TTFT / inter-token / e2e bounds
  are the collector's defaults. Cached prefix tokens (``mode="prefill_cache"``) are not
  modelled, so that child is not exported.
- TGI, ``router/src/server.rs`` and ``backends/v3/src/backend.rs``: no labels but ``method``
  on the batch histograms; every ``*duration`` histogram has 35 geometric bounds
  ``0.0001 x 1.5^k``; input-length and generated-token histograms have 100 linear bounds up
  to the maximum length. Input length is observed at validation (arrival), generated tokens,
  request duration and mean time per token when a request ends. TGI exports no TTFT
  histogram and no preemption counter; neither is invented here.

Hand-written tables rather than a prometheus_client registry: the recording is assembled
sample by sample at virtual scrape instants, exactly as :mod:`pdcensus.sim.exporter` does
for radiance's names, so that both paths share one assembler.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import cast

from prometheus_client.utils import floatToGoString

from pdcensus.series.engine_ledger import ledger_samples
from pdcensus.series.model import Family, MetricType
from pdcensus.sim.metrics_state import Histogram

SGLANG, TGI = "sglang", "tgi"
ENGINE_PROFILES = (SGLANG, TGI)

SGLANG_TTFT_BOUNDS: tuple[float, ...] = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0,
)
SGLANG_INTER_TOKEN_BOUNDS: tuple[float, ...] = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
    0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0,
)
SGLANG_E2E_BOUNDS: tuple[float, ...] = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0,
    600.0, 1200.0, 1800.0, 2400.0,
)
TGI_DURATION_BOUNDS: tuple[float, ...] = tuple(0.0001 * 1.5 ** k for k in range(1, 36))


def tgi_length_bounds(max_tokens: int) -> tuple[float, ...]:
    """TGI's token-length buckets: 100 equal steps up to ``max_tokens``."""
    return tuple(max_tokens / 100.0 * (x + 1) for x in range(100))


@dataclass
class EngineTallies:
    """What SGLang and TGI export beyond radiance's state, fed by the engine's events."""

    max_total_tokens: int = 131072
    sglang_ttft: Histogram = field(default_factory=lambda: Histogram(SGLANG_TTFT_BOUNDS))
    sglang_inter_token: Histogram = field(default_factory=lambda: Histogram(SGLANG_INTER_TOKEN_BOUNDS))
    sglang_e2e: Histogram = field(default_factory=lambda: Histogram(SGLANG_E2E_BOUNDS))
    tgi_forward_prefill: Histogram = field(default_factory=lambda: Histogram(TGI_DURATION_BOUNDS))
    tgi_forward_decode: Histogram = field(default_factory=lambda: Histogram(TGI_DURATION_BOUNDS))
    tgi_request_duration: Histogram = field(default_factory=lambda: Histogram(TGI_DURATION_BOUNDS))
    tgi_mean_time_per_token: Histogram = field(default_factory=lambda: Histogram(TGI_DURATION_BOUNDS))
    tgi_input_length: Histogram = field(default_factory=lambda: Histogram(()))
    tgi_generated_tokens: Histogram = field(default_factory=lambda: Histogram(()))
    finished_prompt_tokens: float = 0.0
    finished_generation_tokens: float = 0.0
    finished_requests: float = 0.0

    def __post_init__(self) -> None:
        if not self.tgi_input_length.bounds:
            self.tgi_input_length = Histogram(tgi_length_bounds(self.max_total_tokens))
            self.tgi_generated_tokens = Histogram(tgi_length_bounds(self.max_total_tokens))

    def on_steps(self, step_seconds: float, steps: int, chunk: bool) -> None:
        """``steps`` identical steps completed (a chunk step is TGI's ``method="prefill"`` call)."""
        (self.tgi_forward_prefill if chunk else self.tgi_forward_decode).observe(step_seconds, steps)

    def on_inter_token(self, seconds: float, tokens: float) -> None:
        self.sglang_inter_token.observe(seconds, tokens)

    def on_first_token(self, ttft_seconds: float) -> None:
        self.sglang_ttft.observe(ttft_seconds)

    def on_arrival(self, prompt_tokens: int) -> None:
        """A request passed validation (TGI observes its input length here)."""
        self.tgi_input_length.observe(float(prompt_tokens))

    def on_finish(self, prompt_tokens: int, output_tokens: int, e2e_seconds: float,
                  decode_seconds: float) -> None:
        """A request ended: SGLang's token counters and TGI's per-request histograms move now."""
        self.finished_prompt_tokens += prompt_tokens
        self.finished_generation_tokens += output_tokens
        self.finished_requests += 1
        self.sglang_e2e.observe(e2e_seconds)
        self.tgi_generated_tokens.observe(float(output_tokens))
        self.tgi_request_duration.observe(e2e_seconds)
        self.tgi_mean_time_per_token.observe(decode_seconds / max(1, output_tokens))


C, G, H = MetricType.COUNTER, MetricType.GAUGE, MetricType.HISTOGRAM
_FAMILIES: dict[str, tuple[Family, ...]] = {
    SGLANG: (
        Family("sglang:num_running_reqs", G, "The number of running requests."),
        Family("sglang:num_queue_reqs", G, "The number of requests in the waiting queue."),
        Family("sglang:token_usage", G, "The token usage."),
        Family("sglang:num_retracted_requests", C, "Total number of retracted requests."),
        Family("sglang:realtime_tokens", C, "Total number of tokens processed (updated on each log interval). "
               "mode: prefill_compute, prefill_cache, decode."),
        Family("sglang:gpu_execution_seconds", C, "Total time that GPU is busy executing a workload. "
               "Refer to ForwardMode for category labels."),
        Family("sglang:cuda_graph_passes", C, "Total number of forward passes categorized by CUDA graph."),
        Family("sglang:prompt_tokens", C, "Number of prefill tokens processed."),
        Family("sglang:generation_tokens", C, "Number of generation tokens processed."),
        Family("sglang:num_requests", C, "Number of requests processed."),
        Family("sglang:time_to_first_token_seconds", H, "Histogram of time to first token in seconds."),
        Family("sglang:inter_token_latency_seconds", H, "Histogram of inter-token latency in seconds."),
        Family("sglang:e2e_request_latency_seconds", H, "Histogram of End-to-end request latency in seconds"),
    ),
    TGI: (
        Family("tgi_batch_current_size", G, ""),
        Family("tgi_queue_size", G, ""),
        Family("tgi_batch_forward_duration", H, ""),
        Family("tgi_request_input_length", H, ""),
        Family("tgi_request_generated_tokens", H, ""),
        Family("tgi_request_duration", H, ""),
        Family("tgi_request_mean_time_per_token_duration", H, ""),
    ),
}


# prometheus_client.utils carries no annotations; its float formatter is typed here, once
_FLOAT_TO_GO_STRING = cast("Callable[[float], str]", floatToGoString)


def le_label(bound: float) -> str:
    """A bucket bound as the ``le`` label value prometheus_client writes (``0.5``, ``1e+06``, ``+Inf``)."""
    return _FLOAT_TO_GO_STRING(bound)


def engine_families(profile: str) -> tuple[Family, ...]:
    """The families one engine's ``/metrics`` carries in a simulated recording."""
    return _FAMILIES[profile]


def _histogram(name: str, hist: Histogram, labels: dict[str, str]) -> Iterator[tuple[str, dict[str, str], float]]:
    for bound, count in zip((*hist.bounds, float("inf")), hist.cumulative()):
        yield name + "_bucket", {**labels, "le": le_label(bound)}, count
    yield name + "_count", labels, hist.count
    yield name + "_sum", labels, hist.total


def _sglang_samples(counters: dict[str, float], gauges: dict[str, float], tallies: EngineTallies,
                     model: str) -> list[tuple[str, dict[str, str], float]]:
    sched = {"model_name": model, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
    tok = {"model_name": model}
    ledger = ledger_samples(SGLANG, counters["steps"], counters["steps_decode"], counters["step_seconds"],
                            counters["step_seconds_decode"])
    return [
        ("sglang:num_running_reqs", sched, gauges["running"]),
        ("sglang:num_queue_reqs", sched, gauges["waiting"]),
        ("sglang:token_usage", sched, gauges["kv_usage"]),
        ("sglang:num_retracted_requests_total", sched, counters["preemptions"]),
        ("sglang:realtime_tokens_total", {**sched, "mode": "prefill_compute"}, counters["prompt_tokens"]),
        ("sglang:realtime_tokens_total", {**sched, "mode": "decode"}, counters["generation_tokens"]),
        *((name, {**sched, **labels}, value) for name, labels, value in ledger),
        ("sglang:prompt_tokens_total", tok, tallies.finished_prompt_tokens),
        ("sglang:generation_tokens_total", tok, tallies.finished_generation_tokens),
        ("sglang:num_requests_total", tok, tallies.finished_requests),
        *_histogram("sglang:time_to_first_token_seconds", tallies.sglang_ttft, tok),
        *_histogram("sglang:inter_token_latency_seconds", tallies.sglang_inter_token, tok),
        *_histogram("sglang:e2e_request_latency_seconds", tallies.sglang_e2e, tok),
    ]


def _tgi_samples(counters: dict[str, float], gauges: dict[str, float], tallies: EngineTallies,
                 model: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        ("tgi_batch_current_size", {}, gauges["running"]),
        ("tgi_queue_size", {}, gauges["waiting"]),
        *_histogram("tgi_batch_forward_duration", tallies.tgi_forward_prefill, {"method": "prefill"}),
        *_histogram("tgi_batch_forward_duration", tallies.tgi_forward_decode, {"method": "decode"}),
        *_histogram("tgi_request_input_length", tallies.tgi_input_length, {}),
        *_histogram("tgi_request_generated_tokens", tallies.tgi_generated_tokens, {}),
        *_histogram("tgi_request_duration", tallies.tgi_request_duration, {}),
        *_histogram("tgi_request_mean_time_per_token_duration", tallies.tgi_mean_time_per_token, {}),
    ]


_SAMPLES: dict[str, Callable[[dict[str, float], dict[str, float], EngineTallies, str],
                             list[tuple[str, dict[str, str], float]]]] = {SGLANG: _sglang_samples, TGI: _tgi_samples}


def engine_samples(profile: str, counters: dict[str, float], gauges: dict[str, float], tallies: EngineTallies,
                   model: str) -> list[tuple[str, dict[str, str], float]]:
    """One scrape of one engine: ``(sample name, labels, value)`` (KeyError for a profile with no table here).

    ``counters`` is :meth:`pdcensus.sim.metrics_state.MetricsState.counters`, ``gauges`` the
    engine's instant gauges, ``tallies`` the engine's :class:`EngineTallies`.
    """
    return _SAMPLES[profile](counters, gauges, tallies, model)
