"""Which step spans carry a prefill that ran across scrapes (pdcensus.census.measure._across_scrapes).

The depth the census reports on vLLM is read over those spans alone: a decoder's own short
re-prompt, begun and ended inside one scrape, marks a scrape that decoded at full pace.
"""

from __future__ import annotations

import numpy as np

from pdcensus.census.measure import _across_scrapes
from pdcensus.series.vllm_steps import CountedSteps, itl_depth, span_mask, step_spans

NAN = float("nan")


def _steps(steps: list[float], itl_s: list[float], itl_c: list[float]) -> CountedSteps:
    s = np.array(steps)
    busy = np.r_[False, np.ones(len(steps) - 1, dtype=bool)]
    return CountedSteps(s, busy, step_spans(s, busy), np.array(itl_s), np.array(itl_c))


def test_one_chunk_step_longer_than_a_scrape_is_across_and_a_short_re_prompt_is_not() -> None:
    # rows: 1-2 decode at 50 ms (3 decoders); 3-4 one 2 s chunk step (no step ends in 3); 5 a short re-prompt
    cs = _steps([NAN, 20, 20, 0, 1, 20, 20], [0, 3, 3, 0, 6, 3, 3], [0, 60, 60, 0, 3, 60, 60])
    chunk = np.array([False, False, False, False, True, True, False])
    across = _across_scrapes(cs, chunk, None)
    assert list(np.flatnonzero(across)) == [3, 4]
    within = span_mask(cs, chunk) & ~span_mask(cs, across)
    assert list(np.flatnonzero(within)) == [5]
    ratio, _, c_in, _ = itl_depth(cs, across, within)
    assert c_in == 3 and np.isclose(ratio, (3 / 6) / (180 / 9))  # the re-prompt's 60 fast tokens left out
    diluted, _, _, _ = itl_depth(cs, chunk)
    assert diluted > 10 * ratio


def test_a_prompt_admitted_and_not_done_marks_its_intervals() -> None:
    cs = _steps([NAN, 20, 4, 4, 20], [0, 3, 3, 3, 3], [0, 60, 12, 12, 60])
    admitted = np.array([False, False, True, True, False])
    assert list(np.flatnonzero(_across_scrapes(cs, admitted, admitted))) == [2, 3]


def test_the_spans_across_scrapes_stand_for_the_chunk_steps_only_where_they_hold_most_long_gaps() -> None:
    from pdcensus.census.measure import _holds_most_long_gaps
    from pdcensus.census.signals import Histogram

    # vLLM's inter-token bounds; rows 1-10 decode at 40 ms (3 decoders, 25 steps), rows 11-20 each add one
    # chunk step: 3 gaps of 1-2.5 s
    bounds = np.array([0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, np.inf])
    fast = np.where(bounds >= 0.05, 75.0, 0.0)
    slow = fast + np.where(bounds >= 2.5, 3.0, 0.0)
    inc = np.vstack([np.full(bounds.size, np.nan)] + [fast] * 10 + [slow] * 10)
    n = inc.shape[0]
    cs = _steps([NAN] + [25.0] * (n - 1), [0] + [3.0] * 10 + [5.7] * 10, [0] + [75.0] * 10 + [78.0] * 10)
    itl = Histogram("vllm:inter_token_latency_seconds", bounds, inc)
    rows = np.arange(n)
    whole, clean = rows >= 11, (rows >= 1) & (rows <= 10)
    assert not _holds_most_long_gaps(cs, (rows >= 11) & (rows <= 12), whole, clean, itl)  # 6 of 30 long gaps
    assert _holds_most_long_gaps(cs, (rows >= 11) & (rows <= 17), whole, clean, itl)  # 21 of 30
