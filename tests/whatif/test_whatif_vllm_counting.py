"""vLLM 0.32's counting rules in the what-if's reads: a long step's silent seconds, prompts counted whole when
their prefill ends, and the length histograms observed when a request finishes (hand-made inputs)."""

from __future__ import annotations

import numpy as np

from pdcensus.series.vllm_steps import step_spans
from pdcensus.whatif.measure import span_rates


def test_a_second_inside_a_long_step_is_bucketed_with_the_interval_that_ends_the_step() -> None:
    # 1 s scrapes, 3 decoders: a 2 s chunk step starts after row 2 and ends in row 4; row 3 saw no step end,
    # no prompt counted and no token: on its own counters it reads idle at zero decode
    steps = np.array([np.nan, 55.0, 56.0, 0.0, 1.0, 55.0])
    busy = np.array([False, True, True, True, True, True])
    dt = np.array([np.nan, 1.0, 1.0, 1.0, 1.0, 1.0])
    decode = np.array([np.nan, 165.0, 168.0, 0.0, 3.0, 165.0])
    prefill = np.array([np.nan, 0.0, 0.0, 0.0, 1500.0, 0.0])
    span = step_spans(steps, busy)
    assert span[3] == 4
    d, p = span_rates(span, busy, dt, decode, prefill)
    assert p[3] == p[4] == 750.0 and d[3] == d[4] == 1.5
    # intervals that end their own step keep their own rates
    assert d[1] == 165.0 and p[5] == 0.0 and np.isnan(d[0])
