"""A missing sample is a gap in its own series, nowhere else (issue #25, item 3): the unit rules.

Each rule below was found by ``tests/reliability/test_gap_property.py`` (random samples deleted
from whole recordings); these tests pin each one on a handful of rows, and each fails on the
rule it replaced.
"""

from __future__ import annotations

import numpy as np

from pdcensus.census.prefill_progress import admission_to_completion
from pdcensus.census.recovery import since_long_prompt
from pdcensus.census.shape import data_rows
from pdcensus.census.vllm_counted import admitted_not_done
from pdcensus.series.model import Endpoint, SeriesKey


def test_a_scrape_that_lost_only_its_up_sample_is_still_a_good_scrape() -> None:
    keys = [SeriesKey("up"), SeriesKey("engine_steps_total")]
    values = np.array([[1.0, 10.0], [np.nan, 20.0], [0.0, np.nan], [1.0, 40.0]])
    present = np.array([[True, True], [False, True], [True, False], [True, True]])
    ep = Endpoint("j", "i", np.array([0.0, 15.0, 30.0, 45.0]), keys, values, present)
    # row 1: no `up`, but the scrape's samples are there; row 2: up=0 is a failed scrape
    assert data_rows(ep).tolist() == [0, 1, 3]


def test_a_completion_shared_before_its_admission_leaves_nothing_pending() -> None:
    # a 96-token prompt admitted in interval 2 and done in interval 2; the prompt counter's sample
    # at row 1 is missing, so its 96 is shared 48/48 over intervals 1 and 2
    queries = np.array([np.nan, 0.0, 96.0, 0.0, 0.0])
    prompt = np.array([np.nan, 48.0, 48.0, 0.0, 0.0])
    merged = np.array([False, True, True, False, False])
    assert not admitted_not_done(queries, prompt, merged)[3:].any()
    # read interval by interval, the 48 counted "before" the admission stays pending to the end
    assert admitted_not_done(queries, prompt)[3:].all()


def test_the_tokens_in_flight_at_the_start_are_read_where_both_counts_were_observed() -> None:
    times = np.arange(8) * 15.0
    admitted = np.array([np.nan, 0.0, 0.0, 0.0, 96.0, 0.0, 0.0, 0.0])
    completed = np.array([np.nan, 0.0, 0.0, 48.0, 48.0, 0.0, 0.0, 0.0])  # shared over 3-4 (a missing sample)
    share = np.ones(8)
    merged = np.array([False, False, False, True, True, False, False, False])
    tokens = admission_to_completion(times, admitted, completed, share, merged)
    # all 96 tokens ran in the run (intervals 3-4), none before: nothing was in flight at the start
    assert np.nansum(tokens[3:5]) == np.nansum(tokens) == 96.0
    shifted = admission_to_completion(times, admitted, completed, share)
    assert np.nansum(shifted[:3]) > 0  # the old reading: 48 tokens admitted before the window


def test_a_long_prompt_shared_over_a_run_is_one_long_prompt_timed_from_the_runs_end() -> None:
    n = 200
    times = np.arange(n) * 15.0
    tokens = np.full(n, 100.0)
    for at in (20, 80, 140):
        tokens[at] = 2000.0
    tokens[140:143] = 1000.0 / 3  # a 1,000-token prompt shared over three intervals (two samples missing)
    merged = np.zeros(n, dtype=bool)
    merged[140:143] = True
    found = since_long_prompt(times, tokens, merged)
    assert found is not None
    since, long = found
    assert np.flatnonzero(long).tolist() == [20, 80, 140, 141, 142]
    assert since[150] == times[150] - times[142]
    # read interval by interval, no third of it is long: the third prompt is missed and the time
    # since the second runs on through it
    old = since_long_prompt(times, tokens)
    assert old is None or (not old[1][140:143].any() and old[0][150] == times[150] - times[80])
