"""Census speed: the whole census of a 24 h, 15 s recording (load included) against the time
prometheus_client's text parser needs merely to read the same samples.

The recording is simulated (step-time-sharing), written as OpenMetrics (what
``pdcensus census`` reads) and as Prometheus text 0.0.4 with millisecond timestamps
(what ``prometheus_client.parser.text_string_to_metric_families`` parses). Usage::

    python bench/census_speed.py [--duration 24h] [--scrape-interval 15]

Goal: census (load + all passes) under a tenth of the parser's time; never over half.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from pdcensus.census.run import census_recording
from pdcensus.commands.base import parse_duration
from pdcensus.series.model import Recording
from pdcensus.sim import simulate
from pdcensus.sources.load import load_source
from pdcensus.sources.openmetrics_writer import write_openmetrics


def write_text_004(recording: Recording, path: Path) -> int:
    """The same samples as Prometheus text 0.0.4, one scrape block per timestamp (ms)."""
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for ep in recording.endpoints:
            names = [str(k) for k in ep.keys]
            for row, ts in enumerate(ep.timestamps):
                ms = int(round(ts * 1000))
                for col in range(len(ep.keys)):
                    if ep.present[row, col]:
                        fh.write(f"{names[col]} {float(ep.values[row, col])!r} {ms}\n")
                        n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", default="24h")
    ap.add_argument("--scrape-interval", type=float, default=15.0)
    args = ap.parse_args()
    t = time.perf_counter()
    result = simulate("step-time-sharing", duration_seconds=parse_duration(args.duration), seed=0,
                      scrape_interval_seconds=args.scrape_interval)
    print(f"simulated {args.duration} in {time.perf_counter() - t:.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        om, txt = Path(tmp) / "metrics.om", Path(tmp) / "metrics.prom"
        write_openmetrics(result.recording, om)
        samples = write_text_004(result.recording, txt)
        print(f"{samples} samples; OpenMetrics {om.stat().st_size / 1e6:.0f} MB, 0.0.4 {txt.stat().st_size / 1e6:.0f} MB")
        best_census = best_load = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            rec = load_source(om)
            t_load = time.perf_counter() - t
            report = census_recording(rec)[0]
            best_census = min(best_census, time.perf_counter() - t)
            best_load = min(best_load, t_load)
        t = time.perf_counter()
        parsed = sum(len(f.samples) for f in text_string_to_metric_families(txt.read_text(encoding="utf-8")))
        t_parse = time.perf_counter() - t
    ratio = best_census / t_parse
    print(f"census (load {best_load:.2f} s + passes) {best_census:.2f} s; verdict {report.verdict.mechanism.value}")
    print(f"prometheus_client text parser: {t_parse:.2f} s for {parsed} samples")
    print(f"census / parser = {ratio:.3f} ({'goal met' if ratio < 0.1 else 'under half' if ratio < 0.5 else 'OVER HALF'})")


if __name__ == "__main__":
    main()
