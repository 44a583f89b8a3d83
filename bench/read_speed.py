"""Reading speed: pdcensus's text readers against prometheus_client's parsers, same content.

Generates a multi-scrape recording of a radiance-like metric set (step-ledger counters,
rate gauges, vLLM-style latency histograms with vLLM's bucket bounds, process gauges) at
one scrape every ``--scrape-interval`` seconds for ``--hours`` hours, writes it twice,

* as OpenMetrics (float-second timestamps, ``# EOF``), as the simulator writes it, and
* as Prometheus text 0.0.4 with integer-millisecond timestamps (what
  ``prometheus_client.parser.text_string_to_metric_families`` parses),

then times reading each: ours (``read_openmetrics`` / ``read_prometheus_text``, all the way
to the aligned model), prometheus_client's 0.0.4 text parser (just iterating its samples),
and prometheus_client's OpenMetrics parser where it accepts the file. Prints samples/s and
the ratio. Usage::

    .venv/bin/python bench/read_speed.py --hours 24
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from pdcensus.series.model import Family, MetricType, Recording, SeriesKey, align_endpoint, normalize_labels
from pdcensus.sources.openmetrics_writer import write_openmetrics
from pdcensus.sources.store import load_parquet, save_parquet
from pdcensus.sources.textformat import read_openmetrics, read_prometheus_text

LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                   7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
HISTOGRAMS = [
    "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds", "vllm:e2e_request_latency_seconds",
    "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds", "vllm:request_queue_time_seconds",
    "vllm:request_inference_time_seconds", "vllm:request_time_per_output_token_seconds",
    "radiance:prefill_steps_duration", "radiance:prefill_step_tokens", "radiance:token_queue_wait",
    "vllm:request_prompt_tokens", "vllm:request_generation_tokens", "vllm:iteration_tokens_total",
]
COUNTERS = [
    "radiance:engine_steps_total", "radiance:engine_steps_decode_total", "radiance:engine_step_seconds_total",
    "radiance:engine_step_seconds_decode_total", "radiance:engine_steps_held_total",
    "radiance:prefix_hit_cut_tokens_total", "vllm:num_preemptions_total", "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
]
GAUGES = [
    "radiance:decode_tokens_per_second", "radiance:prefill_tokens_per_second", "radiance:num_requests_preempted",
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
    "process_start_time_seconds", "process_resident_memory_bytes",
]


def make_recording(hours: float, scrape_interval_seconds: float, seed: int = 1) -> Recording:
    """A radiance-like recording: ~390 series per scrape, counters increasing, gauges noisy."""
    n = int(hours * 3600 / scrape_interval_seconds)
    ts = 1.7e9 + np.arange(n) * scrape_interval_seconds
    rng = np.random.default_rng(seed)
    base = {"job": "radiance", "instance": "10.0.0.1:8000"}
    series: dict[SeriesKey, tuple[np.ndarray, np.ndarray]] = {}
    families: dict[str, Family] = {"up": Family("up", MetricType.GAUGE)}

    def add(name: str, values: np.ndarray, **labels: str) -> None:
        series[SeriesKey(name, normalize_labels({**base, "model_name": "org/model-30b", **labels}))] = (ts, values)

    for name in COUNTERS:
        families[name.removesuffix("_total")] = Family(name.removesuffix("_total"), MetricType.COUNTER, "a counter")
        add(name, np.cumsum(rng.random(n) * 100))
    for name in GAUGES:
        families[name] = Family(name, MetricType.GAUGE, "a gauge")
        add(name, np.round(rng.random(n) * 1000, 3))
    for name in HISTOGRAMS:
        families[name] = Family(name, MetricType.HISTOGRAM, "a histogram")
        count = np.cumsum(rng.integers(0, 5, n)).astype(float)
        for le in LATENCY_BUCKETS:
            add(name + "_bucket", np.floor(count * min(1.0, le / 10)), le=repr(le))
        add(name + "_bucket", count, le="+Inf")
        add(name + "_count", count)
        add(name + "_sum", np.round(count * 0.37, 3))
    series[SeriesKey("up", normalize_labels(base))] = (ts, np.ones(n))
    return Recording(families, [align_endpoint(base["job"], base["instance"], series)])


def openmetrics_to_prometheus_text(om_path: Path, out_path: Path) -> None:
    """The same samples as 0.0.4 with integer-millisecond timestamps (no UNIT, no EOF)."""
    with open(om_path, encoding="utf-8") as src, open(out_path, "w", encoding="utf-8") as dst:
        for line in src:
            if line.startswith("# UNIT") or line.startswith("# EOF"):
                continue
            if line.startswith("#"):
                dst.write(line)
                continue
            head, _, stamp = line.rstrip("\n").rpartition(" ")
            dst.write(f"{head} {round(float(stamp) * 1000)}\n")


def timed(label: str, n_samples: int, fn) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 (a reference parser refusing the file is a result)
        print(f"{label:<46} refused the file: {type(exc).__name__}: {str(exc)[:80]}")
        return float("nan")
    elapsed = time.perf_counter() - started
    print(f"{label:<46} {elapsed:8.2f} s  {n_samples / elapsed / 1e6:7.3f} M samples/s")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--scrape-interval", type=float, default=15.0, help="seconds")
    parser.add_argument("--skip-openmetrics-reference", action="store_true",
                        help="do not time prometheus_client's OpenMetrics parser (slow)")
    args = parser.parse_args()

    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families
    from prometheus_client.parser import text_string_to_metric_families as text_families

    recording = make_recording(args.hours, args.scrape_interval)
    n = int(recording.endpoints[0].present.sum())
    with tempfile.TemporaryDirectory() as tmp:
        om_path, prom_path, parquet_path = Path(tmp) / "rec.om", Path(tmp) / "rec.prom", Path(tmp) / "rec.parquet"
        write_openmetrics(recording, om_path)
        openmetrics_to_prometheus_text(om_path, prom_path)
        save_parquet(recording, parquet_path)
        print(f"{args.hours:g} h at {args.scrape_interval:g} s: {n:,} samples, "
              f"{len(recording.endpoints[0].keys)} series; OpenMetrics {om_path.stat().st_size / 1e6:.0f} MB, "
              f"0.0.4 {prom_path.stat().st_size / 1e6:.0f} MB, Parquet {parquet_path.stat().st_size / 1e6:.1f} MB")

        def reference_text() -> None:
            text = prom_path.read_text()
            for family in text_families(text):
                for _sample in family.samples:
                    pass

        def reference_openmetrics() -> None:
            text = om_path.read_text()
            for family in om_families(text):
                for _sample in family.samples:
                    pass

        ours_om = timed("pdcensus read_openmetrics (OpenMetrics)", n, lambda: read_openmetrics(om_path))
        ours_text = timed("pdcensus read_prometheus_text (0.0.4, ms)", n,
                          lambda: read_prometheus_text(prom_path, scrape_time=None))
        timed("pdcensus load_parquet", n, lambda: load_parquet(parquet_path))
        reference = timed("prometheus_client text parser (0.0.4, ms)", n, reference_text)
        if not args.skip_openmetrics_reference:
            timed("prometheus_client OpenMetrics parser", n, reference_openmetrics)
        print(f"ratio prometheus_client 0.0.4 / ours OpenMetrics: {reference / ours_om:.1f}x; "
              f"/ ours 0.0.4: {reference / ours_text:.1f}x")


if __name__ == "__main__":
    main()
