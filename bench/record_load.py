"""Loading a recorder journal: a day of direct scrapes read back into the aligned model.

Builds a journal (:mod:`pdcensus.sources.recorder_journal`) of ``--hours`` hours of one
endpoint scraped every ``--scrape-interval`` seconds, each body a radiance-like 0.0.4
scrape made by prometheus_client (step-ledger counters, gauges, vLLM-style histograms),
then times ``load_record_journal`` (scan + checksum + stamp + bulk read + align) and, for
scale, prometheus_client's 0.0.4 parser merely iterating the same bodies one by one.
Usage::

    .venv/bin/python bench/record_load.py --hours 24
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pdcensus.sources.recorder_journal import MAGIC, ScrapeHeader, encode_block, load_record_journal

BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0)


def make_bodies(n_scrapes: int) -> list[bytes]:
    """``n_scrapes`` successive scrapes of one registry whose metrics move between scrapes."""
    reg = CollectorRegistry()
    labels = ["model_name"]
    counters = [Counter(f"radiance:{n}", n, labels, registry=reg) for n in
                ("engine_steps", "engine_steps_decode", "engine_step_seconds", "engine_step_seconds_decode",
                 "engine_steps_held", "prefix_hit_cut_tokens")]
    gauges = [Gauge(f"radiance:{n}", n, labels, registry=reg) for n in
              ("decode_tokens_per_second", "prefill_tokens_per_second", "num_requests_preempted")]
    hists = [Histogram(f"vllm:{n}", n, labels, buckets=BUCKETS, registry=reg) for n in
             ("time_to_first_token_seconds", "inter_token_latency_seconds", "e2e_request_latency_seconds")]
    bodies = []
    for i in range(n_scrapes):
        for j, c in enumerate(counters):
            c.labels("m").inc(1 + (i * 7 + j) % 13)
        for j, g in enumerate(gauges):
            g.labels("m").set((i * 31 + j) % 97)
        for j, h in enumerate(hists):
            h.labels("m").observe(((i + j) % 50) / 10)
        bodies.append(generate_latest(reg))
    return bodies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--scrape-interval", type=float, default=15.0)
    args = parser.parse_args()
    n = int(args.hours * 3600 / args.scrape_interval)
    bodies = make_bodies(n)
    t0 = 1_700_000_000.0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "day.pdrec"
        with open(path, "wb") as fh:
            fh.write(MAGIC)
            for i, body in enumerate(bodies):
                header = ScrapeHeader(t0 + i * args.scrape_interval, "pdcensus-record", "10.0.0.1:7770", 1,
                                      len(body), "text/plain; version=0.0.4; charset=utf-8", 0.01)
                fh.write(encode_block(header, body))
        size_mb = path.stat().st_size / 1e6
        started = time.perf_counter()
        rec = load_record_journal(path)
        ours = time.perf_counter() - started
        ep = rec.endpoint()
        samples = int(ep.present.sum())
        started = time.perf_counter()
        theirs_samples = sum(len(m.samples) for b in bodies for m in text_string_to_metric_families(b.decode()))
        theirs = time.perf_counter() - started
    print(f"journal: {n} scrapes, {size_mb:.1f} MB, {samples} samples ({ep.n_scrapes} rows x {len(ep.keys)} series)")
    print(f"load_record_journal:          {ours:7.2f} s  {samples / ours:12,.0f} samples/s")
    print(f"prometheus_client (parse only): {theirs:5.2f} s  {theirs_samples / theirs:12,.0f} samples/s")
    print(f"ratio: {theirs / ours:.1f}x")


if __name__ == "__main__":
    main()
