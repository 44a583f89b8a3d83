"""``GET /metrics`` of the live simulator: the engine's metric state through a prometheus_client registry.

A custom :class:`EngineCollector` yields, at each scrape, one family per entry of the metric
contract (:data:`pdcensus.sim.exporter.FAMILIES`) that the served build and profile export,
with the samples :func:`pdcensus.sim.exporter.family_samples` gives the recording exporter, so
a live scrape and a simulated recording carry the same names, labels and HELP. The text is
written by prometheus_client's own ``generate_latest`` (exposition format 0.0.4), as vLLM's
server writes it; nothing here formats text.

Under ``--profile sglang`` or ``--profile tgi`` the families are those engines' own
(:func:`pdcensus.sim.engine_exports.engine_families`, samples from
:func:`pdcensus.sim.engine_exports.engine_samples`), as a simulated recording of that profile
carries them; the radiance-only ``process_start_time_seconds`` is left out there too.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from pdcensus.series.model import MetricType
from pdcensus.sim.engine_exports import ENGINE_PROFILES, engine_families, engine_samples
from pdcensus.sim.exporter import PROCESS_START, exported_families, family_samples
from pdcensus.sim.server_clock import LiveEngine

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_TYPES = {MetricType.COUNTER: "counter", MetricType.GAUGE: "gauge", MetricType.HISTOGRAM: "histogram"}
_SUFFIXES = {MetricType.COUNTER: ("_total",), MetricType.GAUGE: ("",),
             MetricType.HISTOGRAM: ("_bucket", "_count", "_sum")}


class EngineCollector(Collector):
    """Yields the live engine's current metric state as prometheus_client families."""

    def __init__(self, live: LiveEngine) -> None:
        self.live = live

    def collect(self) -> Iterator[Metric]:
        live = self.live
        gauges = live.gauges()
        if live.profile in ENGINE_PROFILES:
            yield from self._engine_families(gauges)
            return
        labels = {"model_name": live.config.model}
        step_detail = live.scenario.step_detail_scraped
        for spec in exported_families(live.build, live.profile, step_detail):
            metric = Metric(spec.name, spec.help, _TYPES[spec.type])
            for sample_name, sample_labels, value in family_samples(spec, live.engine, gauges, labels):
                metric.add_sample(sample_name, sample_labels, value)
            yield metric
        if live.scenario.export_process_start:
            metric = Metric(PROCESS_START.name, PROCESS_START.help, "gauge")
            metric.add_sample(PROCESS_START.name, {}, live.epoch_start)
            yield metric


    def _engine_families(self, gauges: dict[str, float]) -> Iterator[Metric]:
        """SGLang's or TGI's families: each sample goes to the family its name extends."""
        live = self.live
        families = engine_families(live.profile)
        metrics = {f.name: Metric(f.name, f.help, _TYPES[f.type]) for f in families}
        owner = {f.name + suffix: f.name for f in families for suffix in _SUFFIXES[f.type]}
        samples = engine_samples(live.profile, live.engine.metrics.counters(), gauges, live.engine.tallies,
                                 live.config.model)
        for sample_name, sample_labels, value in samples:
            metrics[owner[sample_name]].add_sample(sample_name, sample_labels, float(value))
        yield from metrics.values()


def engine_registry(live: LiveEngine) -> CollectorRegistry:
    """A registry holding only the engine's families (no process or platform collectors)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(live))
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """The registry's current state in text format 0.0.4."""
    return generate_latest(registry)
