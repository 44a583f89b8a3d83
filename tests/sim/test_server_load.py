"""`pdcensus serve` under load (the small version of bench/serve_load.py): 64 streaming clients, 10 s.

The clients stream back to back with a scraper reading /metrics every second. What is checked
holds whatever else runs on the machine: every stream ends with ``[DONE]``, every scrape
answers, no token reaches its client before the engine emitted it, every gap between two
tokens of a stream is at least the model's smallest step, and the server's memory stays flat.
How close the clients' gaps come to the model's is a latency figure, so it is measured, not
asserted: bench/serve_load.py and BENCHMARKS.md, "Serve under load".
"""

from __future__ import annotations

import asyncio

import pytest

from pdcensus.sim.cost_model import CostModel, StepShape
from pdcensus.sim.server_load import run_load
from pdcensus.sim.server_process import ServeProcess

pytestmark = pytest.mark.slow

CLIENTS = 64
DURATION_SECONDS = 10.0


def test_sixty_four_streaming_clients_get_every_token_never_before_the_model_emits_it() -> None:
    with ServeProcess("step-time-sharing", background=False) as server:
        report = asyncio.run(run_load(server.url, clients=CLIENTS, duration_seconds=DURATION_SECONDS,
                                      pid=server.pid()))
    assert report.errors == 0, report.error_samples
    assert report.requests_done > CLIENTS and report.requests_cut == 0
    assert report.scrape_errors == 0 and report.scrapes >= 2
    assert report.tokens > report.requests_done and report.early_tokens == 0
    smallest_step = CostModel().decode_only_seconds(StepShape(1, 0, 0, 0, 0))
    assert report.model_gap_min_seconds >= smallest_step - 1e-6
    rss = [r for t, r in report.rss_samples if t >= 3.0]
    assert rss and max(rss) <= 1.15 * rss[0], rss
