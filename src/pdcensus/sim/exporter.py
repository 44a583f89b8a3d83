"""The metric contract (METRICS.md) as a table, and the recording exporter that samples it.

:data:`FAMILIES` lists every family the simulator can export, with its type, HELP text, the
builds that export it and the profiles it belongs to (``radiance`` = radiance's own metric set,
``vllm`` = plain vLLM V1 names only). A recording can also be exported under SGLang's or TGI's
own names (:data:`RECORDING_PROFILES`; tables in :mod:`pdcensus.sim.engine_exports`). :class:`RecordingAssembler` samples an engine's
:class:`~pdcensus.sim.metrics_state.MetricsState` and instant gauges at each scrape instant and
builds a :class:`~pdcensus.series.model.Recording` (one row per scrape, ``up`` included: a
failed scrape or a scrape while the process is down carries ``up`` = 0 and nothing else).

A live server reads the same table through :func:`family_samples` to feed a prometheus_client
collector, so both paths export the same names.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from pdcensus.series.model import Endpoint, Family, MetricType, Recording, SeriesKey, normalize_labels
from pdcensus.sim.config import Build
from pdcensus.sim.engine import Engine
from pdcensus.sim.engine_exports import ENGINE_PROFILES, engine_families, engine_samples, le_label
from pdcensus.sim.metrics_state import Histogram

RADIANCE, VLLM = "radiance", "vllm"
PROFILES = (RADIANCE, VLLM)  # what the live server serves
RECORDING_PROFILES = (*PROFILES, *ENGINE_PROFILES)  # what a simulated recording can be exported as
BOTH = frozenset(PROFILES)
ONLY_RADIANCE = frozenset({RADIANCE})
ONLY_VLLM = frozenset({VLLM})
ALL_BUILDS = frozenset(Build)
NEW_BUILDS = frozenset({Build.V1_8_3})
OLD_BUILDS = frozenset({Build.V1_0_13})


@dataclass(frozen=True)
class FamilySpec:
    """One exported family: name (counters without ``_total``), type, HELP, where it comes from."""

    name: str
    type: MetricType
    help: str
    source: str
    profiles: frozenset[str] = ONLY_RADIANCE
    builds: frozenset[Build] = ALL_BUILDS
    step_detail: bool = False
    # a labelled counter: (label name, ((label value, source), ...)), one child per value
    children: tuple[str, tuple[tuple[str, str], ...]] | None = None


C, G, H = MetricType.COUNTER, MetricType.GAUGE, MetricType.HISTOGRAM
FAMILIES: tuple[FamilySpec, ...] = (
    FamilySpec("radiance:engine_steps", C, "Engine steps (forward passes).", "steps"),
    FamilySpec("radiance:engine_steps_decode", C, "Decode-only engine steps (no prefill token in the batch).",
               "steps_decode", builds=NEW_BUILDS),
    FamilySpec("radiance:engine_step_seconds", C, "Wall seconds spent in engine steps.", "step_seconds"),
    FamilySpec("radiance:engine_step_seconds_decode", C, "Wall seconds spent in decode-only engine steps.",
               "step_seconds_decode", builds=NEW_BUILDS),
    FamilySpec("radiance:engine_steps_held", C,
               "Decode-only steps held by --prefill-interleave; they admit nothing.", "steps_held",
               builds=NEW_BUILDS),
    FamilySpec("radiance:prefix_hit_cut_tokens", C,
               "Prefix-cache-hit tokens replayed as prefill (reuse stops at the last retained checkpoint).",
               "prefix_hit_cut_tokens", builds=NEW_BUILDS),
    FamilySpec("radiance:decode_tokens_per_second", G, "Decode tokens per second, ~1 s decayed, batch-pooled.",
               "decode_tokens_per_second"),
    FamilySpec("radiance:prefill_tokens_per_second", G,
               "Prefill tokens per second (replayed tokens included), ~1 s decayed.", "prefill_tokens_per_second"),
    FamilySpec("radiance:num_requests_preempted", G, "Preempted sequences waiting to resume (instant depth).",
               "preempted"),
    FamilySpec("radiance:prefill_steps_duration", H, "Duration of steps that carry a prefill chunk in seconds.",
               "prefill_step_seconds", step_detail=True),
    FamilySpec("radiance:prefill_step_tokens", H, "Prefill tokens per chunk step.", "prefill_step_tokens",
               step_detail=True),
    FamilySpec("radiance:token_queue_wait", H, "Wait of a request's first token in the queue in seconds.",
               "queue_wait", step_detail=True),
    FamilySpec("vllm:num_requests_running", G, "Number of requests in model execution batches.", "running", BOTH),
    FamilySpec("vllm:num_requests_waiting", G, "Number of requests waiting to be processed.", "waiting", BOTH),
    FamilySpec("vllm:num_preemptions", C, "Cumulative number of preemption from the engine.", "preemptions",
               ONLY_RADIANCE),
    # vLLM counts a preemption when the resumed request emits its next token (v1/core/sched/scheduler.py:
    # the PREEMPTED event is taken with the request's next EngineCoreOutput)
    FamilySpec("vllm:num_preemptions", C, "Cumulative number of preemption from the engine.", "preemptions_at_resume",
               ONLY_VLLM),
    FamilySpec("vllm:prompt_tokens", C, "Number of prefill tokens processed.", "prompt_tokens", ONLY_RADIANCE),
    # vLLM counts a prompt, cache hits included, in the step that emits its first token
    # (v1/metrics/stats.py, IterationStats.update_from_output; see pdcensus.census.prefill_progress)
    FamilySpec("vllm:prompt_tokens", C, "Number of prefill tokens processed.", "prompt_tokens_at_first_token",
               ONLY_VLLM),
    FamilySpec("vllm:prompt_tokens_by_source", C, "Number of prompt tokens by source.", "", ONLY_VLLM,
               children=("source", (("local_compute", "prompt_tokens_local_compute"),
                                    ("local_cache_hit", "prompt_tokens_local_cache_hit")))),
    FamilySpec("vllm:prefix_cache_queries", C, "Prefix cache queries, in terms of number of queried tokens.",
               "prefix_cache_queries", ONLY_VLLM),
    FamilySpec("vllm:prefix_cache_hits", C, "Prefix cache hits, in terms of number of cached tokens.",
               "prefix_cache_hits", ONLY_VLLM),
    FamilySpec("vllm:generation_tokens", C, "Number of generation tokens processed.", "generation_tokens", BOTH),
    FamilySpec("vllm:request_success", C, "Count of successfully processed requests.", "request_success", ONLY_VLLM),
    FamilySpec("vllm:kv_cache_usage_perc", G, "KV-cache usage. 1 means 100 percent usage.", "kv_usage", ONLY_VLLM),
    FamilySpec("vllm:time_to_first_token_seconds", H, "Histogram of time to first token in seconds.", "ttft", BOTH),
    FamilySpec("vllm:inter_token_latency_seconds", H, "Histogram of inter-token latency in seconds.",
               "inter_token", BOTH, NEW_BUILDS),
    FamilySpec("vllm:time_per_output_token_seconds", H, "Histogram of time per output token in seconds.",
               "inter_token", ONLY_RADIANCE, OLD_BUILDS),
    FamilySpec("vllm:e2e_request_latency_seconds", H, "Histogram of end to end request latency in seconds.",
               "e2e", BOTH),
    FamilySpec("vllm:iteration_tokens_total", H, "Histogram of number of tokens per engine_step.",
               "iteration_tokens", ONLY_VLLM),
)
PROCESS_START = Family("process_start_time_seconds", G, "Start time of the process since unix epoch in seconds.")


def exported_families(build: Build, profile: str, step_detail: bool = True) -> list[FamilySpec]:
    """The families one build exports under a profile (step-detail histograms optional)."""
    return [
        f for f in FAMILIES
        if profile in f.profiles and build in f.builds and (step_detail or not f.step_detail)
    ]


def family_samples(
    spec: FamilySpec, engine: Engine, gauges: dict[str, float], labels: dict[str, str]
) -> Iterator[tuple[str, dict[str, str], float]]:
    """``(sample name, labels, value)`` for one family of one engine at the gauges' instant."""
    if spec.type is C and spec.children is not None:
        label, children = spec.children
        for value, source in children:
            yield spec.name + "_total", {**labels, label: value}, float(getattr(engine.metrics, source))
    elif spec.type is C:
        yield spec.name + "_total", labels, float(getattr(engine.metrics, spec.source))
    elif spec.type is G:
        yield spec.name, labels, float(gauges[spec.source])
    else:
        hist: Histogram = getattr(engine.metrics, spec.source)
        for bound, count in zip((*hist.bounds, float("inf")), hist.cumulative()):
            yield spec.name + "_bucket", {**labels, "le": le_label(bound)}, count
        yield spec.name + "_count", labels, hist.count
        yield spec.name + "_sum", labels, hist.total


def _sources(spec: FamilySpec) -> list[str]:
    """Where a family's samples come from, in :func:`family_samples` order (a histogram: its attribute)."""
    if spec.children is not None:
        return [source for _value, source in spec.children[1]]
    return [spec.source]


class RecordingAssembler:
    """Collects scrapes of one endpoint into an aligned :class:`Recording`."""

    def __init__(self, job: str, instance: str, profile: str, step_detail: bool) -> None:
        self.job, self.instance, self.profile, self.step_detail = job, instance, profile, step_detail
        self.families: dict[str, Family] = {}
        self._columns: dict[SeriesKey, int] = {}
        self._rows: list[tuple[float, list[int], list[float]]] = []
        self._readers: dict[tuple[Build, str], list[tuple[MetricType, list[str], list[int]]]] = {}
        # histogram samples are filled in when the recording is built: (row, histogram, mark, columns)
        self._marked: list[tuple[int, Histogram, int, list[int]]] = []
        self._up = self._column("up", {})
        self._start_col = -1

    def _column(self, name: str, labels: dict[str, str]) -> int:
        key = SeriesKey(name, normalize_labels({**labels, "job": self.job, "instance": self.instance}))
        col = self._columns.get(key)
        if col is None:
            col = self._columns[key] = len(self._columns)
        return col

    def scrape_failed(self, t: float) -> None:
        """A scrape that got nothing (process down, or the scrape timed out): ``up`` = 0 only."""
        self._rows.append((t, [self._up], [0.0]))

    def scrape(
        self, t: float, engine: Engine, engine_seconds: float, build: Build, process_start: float | None = None
    ) -> None:
        """Sample every family the build exports; ``t`` is the timestamp, ``engine_seconds`` the engine's clock."""
        gauges = engine.gauges(engine_seconds)
        model = engine.config.model
        if self.profile in ENGINE_PROFILES:
            self._scrape_engine(t, engine, gauges, model)
            return
        readers = self._readers.get((build, model))
        if readers is None:
            labels = {"model_name": model}
            readers = self._readers[(build, model)] = []
            for spec in exported_families(build, self.profile, self.step_detail):
                self.families[spec.name] = Family(spec.name, spec.type, spec.help)
                cols = [self._column(n, lab) for n, lab, _ in family_samples(spec, engine, gauges, labels)]
                readers.append((spec.type, _sources(spec), cols))
        cols, vals = [self._up], [1.0]
        metrics, row = engine.metrics, len(self._rows)
        for kind, sources, spec_cols in readers:
            if kind is H:
                hist: Histogram = getattr(metrics, sources[0])
                self._marked.append((row, hist, hist.mark(), spec_cols))
                continue
            cols.extend(spec_cols)
            if kind is G:
                vals.append(float(gauges[sources[0]]))
            else:
                vals.extend([float(getattr(metrics, source)) for source in sources])
        if process_start is not None:
            if self._start_col < 0:
                self.families[PROCESS_START.name] = PROCESS_START
                self._start_col = self._column(PROCESS_START.name, {})
            cols.append(self._start_col)
            vals.append(process_start)
        self._rows.append((t, cols, vals))

    def _scrape_engine(self, t: float, engine: Engine, gauges: dict[str, float], model: str) -> None:
        """One scrape under another engine's names (no build split, no process_start_time_seconds)."""
        if not self.families:
            self.families.update({f.name: f for f in engine_families(self.profile)})
        samples = engine_samples(self.profile, engine.metrics.counters(), gauges, engine.tallies, model)
        cols, vals = [self._up], [1.0]
        for name, labels, value in samples:
            cols.append(self._column(name, labels))
            vals.append(float(value))
        self._rows.append((t, cols, vals))

    def build(self, source: str = "sim") -> Recording:
        keys = sorted(self._columns, key=lambda k: (k.name, k.labels))
        order = np.empty(len(self._columns), dtype=int)
        for new, key in enumerate(keys):
            order[self._columns[key]] = new
        n = len(self._rows)
        values = np.full((n, len(keys)), np.nan)
        present = np.zeros((n, len(keys)), dtype=bool)
        timestamps = np.empty(n)
        for r, (t, cols, vals) in enumerate(self._rows):
            idx = order[np.asarray(cols, dtype=int)]
            values[r, idx] = vals
            present[r, idx] = True
            timestamps[r] = round(t, 3)
        self._fill_histograms(order, values, present)
        endpoint = Endpoint(self.job, self.instance, timestamps, keys, values, present)
        return Recording(families=dict(self.families), endpoints=[endpoint], source=source)

    def _fill_histograms(self, order: np.ndarray, values: np.ndarray, present: np.ndarray) -> None:
        """Each histogram's rows at its marks (binned in one pass per histogram) into the scrapes' rows."""
        groups: dict[tuple[int, tuple[int, ...]], tuple[Histogram, list[int], list[int]]] = {}
        for row, hist, mark, cols in self._marked:
            group = groups.setdefault((id(hist), tuple(cols)), (hist, [], []))
            group[1].append(row)
            group[2].append(mark)
        for (_hist_id, columns), (hist, rows, marks) in groups.items():
            where = np.ix_(np.asarray(rows, dtype=int), order[np.asarray(columns, dtype=int)])
            values[where] = hist.snapshot_rows()[np.asarray(marks, dtype=int)]
            present[where] = True
