"""Metric profiles: the census's logical signals mapped to each engine's sample names, gathered.

A profile says, for one engine and build, which sample name carries each logical signal
(decode rate, prefill rate, running, the step-ledger counters, ...). Counter signals name
the sample (``..._total``); histogram signals name the family base (``..._bucket``,
``_count`` and ``_sum`` are derived). Names come from METRICS.md (radiance) and from the
real dumps in ``shared/realdata/metrics`` (vLLM V0/V1, SGLang).

``detect_profile`` reads the metric set of a recording or a scrape and says which profile
it is, with the names that decided it.

Engine names were checked against each engine's own source (repository + path):

- vLLM: ``vllm-project/vllm`` ``vllm/v1/metrics/loggers.py`` (V1) and
  ``vllm/engine/metrics.py`` (V0): ``vllm:iteration_tokens_total`` is a histogram of tokens
  per engine step; there is no step time on ``/metrics``. Where its ``_count`` and the
  inter-token histogram are both scraped (0.32: every step that emitted output is observed),
  ``pdcensus.series.vllm_steps`` counts steps per scrape and times them by the scrape's wall
  time: the census's counted step ledger, on the ``vllm-v1`` profile's own names.
- SGLang: ``sgl-project/sglang`` ``python/sglang/srt/metrics/collector.py``:
  ``sglang:num_running_reqs``, ``sglang:num_queue_reqs``, ``sglang:num_retracted_requests_total``
  (its preemption), ``sglang:realtime_tokens_total{mode=prefill_compute|prefill_cache|decode}``,
  ``sglang:gpu_execution_seconds_total{category=<forward mode>}`` (renamed
  ``sglang:forward_execution_seconds_total`` in later trees; needs
  ``SGLANG_ENABLE_METRICS_DEVICE_TIMER=1``), ``sglang:cuda_graph_passes_total{mode}`` (one per
  decode batch), TTFT / inter-token / e2e histograms; all behind ``--enable-metrics``.
- TGI: ``huggingface/text-generation-inference`` ``backends/v3/src/backend.rs``:
  ``tgi_batch_forward_duration{method=prefill|decode}``, ``tgi_batch_decode_duration``,
  ``tgi_batch_inference_duration`` per call, ``tgi_batch_current_size``; ``tgi_queue_size`` and
  the request histograms come from the router. TGI has no TTFT histogram and no preemption.
- llama.cpp server: ``ggml-org/llama.cpp`` tag b11434, ``tools/server/server-task.cpp``
  (``server_task_result_metrics::to_metrics``, behind ``--metrics``) and
  ``tools/server/server-context.cpp`` (where each moves): ``n_decode_total`` (one per
  ``llama_decode()`` call of the server loop, as it happens), ``n_busy_slots_per_decode`` (a
  gauge: cumulative busy slots / calls), ``prompt_tokens_total`` and ``prompt_seconds_total``
  (flushed per call that has an output: per chunk call while decoders run; the seconds are the
  chunk calls' wall time, server-wide), ``tokens_predicted_total`` and
  ``tokens_predicted_seconds_total`` (added when a request *ends*: never a decode rate),
  ``requests_processing`` (non-idle slots), ``requests_deferred``. The census reads them through
  ``pdcensus.series.llamacpp`` (decode rows, spread prompt work, decoders per call, ledger).

Each engine's profiles, ledger specs and rate terms are written in its module of the engines
wing (:mod:`pdcensus.engines.vllm`, ...), in the words of :mod:`pdcensus.engines.metrics`
(re-exported here, where the series and the census read them); this module gathers them from
the registry. :data:`LEDGER_SPECS` says, per engine, how the step ledger's four counters are derived from
that engine's names (``pdcensus.series.engine_ledger`` does the arithmetic). :data:`RATE_TERMS`
names, per engine, a labelled counter that carries the prefill / decode token rate more
promptly than the profile's own counter (SGLang's ``prompt_tokens_total`` and
``generation_tokens_total`` move only when a request finishes; ``realtime_tokens_total{mode}``
moves as tokens are computed): the census prefers it where the recording has it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pdcensus.engines import ENGINES
from pdcensus.engines.metrics import (  # noqa: F401 (re-exported: the words every profile is written in)
    COUNTER_SIGNALS as COUNTER_SIGNALS, HISTOGRAM_SIGNALS as HISTOGRAM_SIGNALS, LEDGER_SIGNALS as LEDGER_SIGNALS,
    LedgerQuantity as LedgerQuantity, LedgerSpec as LedgerSpec, LedgerTerm as LedgerTerm, Profile as Profile,
    Signal as Signal,
)
from pdcensus.engines.sglang import SGLANG_CHUNK_MODES as SGLANG_CHUNK_MODES  # noqa: F401
from pdcensus.engines.sglang import SGLANG_DECODE_MODES as SGLANG_DECODE_MODES  # noqa: F401
from pdcensus.engines.vllm import (  # noqa: F401 (re-exported: the vLLM names the census reads beside the profile)
    VLLM_COMPUTED_PROMPT as VLLM_COMPUTED_PROMPT, VLLM_FINISHED as VLLM_FINISHED,
    VLLM_PREFIX_CACHE_HITS as VLLM_PREFIX_CACHE_HITS, VLLM_PREFIX_CACHE_QUERIES as VLLM_PREFIX_CACHE_QUERIES,
    VLLM_SIDE_NAMES as VLLM_SIDE_NAMES, VLLM_V1_MARKERS as VLLM_V1_MARKERS,
)
from pdcensus.errors import UsageError

PROFILES: dict[str, Profile] = {p.name: p for r in ENGINES for p in r.profiles}


@dataclass(frozen=True)
class Detection:
    """Which profile a metric set is, and the names that decided it."""

    profile: Profile
    reason: str


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UsageError(f"unknown profile {name!r}; choose one of: {', '.join(PROFILES)}") from None


def detect_profile(sample_names: Iterable[str]) -> Detection | None:
    """The profile a set of sample names belongs to, or None if no engine metric is there.

    Each engine's record says which of its profiles the names are (``detect``); the engines are
    asked in their ``detect_order`` (vLLM's last: radiance exports vLLM's common names too).
    """
    names = set(sample_names)
    for rules in sorted(ENGINES, key=lambda r: r.detect_order):
        found = rules.detect(names) if rules.detect is not None else None
        if found is not None:
            return Detection(*found)
    return None


LEDGER_SPECS: dict[str, LedgerSpec] = {spec.profile: spec for r in ENGINES for spec in r.ledger_specs}


def ledger_spec(profile: Profile) -> LedgerSpec:
    """The ledger spec for a profile (a profile with no spec gets an empty one saying so)."""
    spec = LEDGER_SPECS.get(profile.name)
    if spec is not None:
        return spec
    missing = {q: f"no step-ledger spec for profile {profile.name!r}" for q in LedgerQuantity}
    return LedgerSpec(profile.name, "", missing=missing)


def census_sample_names() -> set[str]:
    """Every sample name some profile reads, plus ``up``: all a census ever pulls from a server.

    Beside the profiles' own names: the ledger terms (:data:`LEDGER_SPECS`), the rate terms
    (:data:`RATE_TERMS`) and the vLLM names the prefill reconstruction reads
    (:data:`VLLM_SIDE_NAMES`); a pull without them gives a census other than the file's.
    """
    names = {"up"} | set(EXTRA_SAMPLE_NAMES) | set(VLLM_SIDE_NAMES)
    for profile in PROFILES.values():
        names |= profile.sample_names()
    for terms in [spec.terms for spec in LEDGER_SPECS.values()] + list(RATE_TERMS.values()):
        for term in terms.values():
            names |= set(term.sample_names)
    return names


# Names a profile's derivation reads beside its signals (llama.cpp: pdcensus.series.llamacpp).
EXTRA_SAMPLE_NAMES = tuple(name for r in ENGINES for name in r.extra_sample_names)

# --- Prompter token counters: read instead of the profile's own where present (SGLang's realtime_tokens_total)
RATE_TERMS: dict[str, dict[Signal, LedgerTerm]] = {
    profile: dict(terms) for r in ENGINES for profile, terms in r.rate_terms.items()
}
