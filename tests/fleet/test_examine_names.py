"""The examine stage pulls every sample name the census reads, and the screen reads counters per scrape.

Without vLLM's prefill-reconstruction names (``prompt_tokens_by_source_total``, the prefix-cache
lookups, finished requests) a census from the store is another census than the file's: on the
real vLLM runs it said ``inconclusive`` where the file said ``step-time-sharing``
(``tests/fleet/test_fleet_real_vllm.py`` checks the whole path on real stores).
"""

from __future__ import annotations

import re

import pytest

from pdcensus.fleet.examine import census_names
from pdcensus.fleet.screen_queries import rate_window, screen_queries, signal_exprs
from pdcensus.series.profiles import LEDGER_SPECS, PROFILES, RATE_TERMS, VLLM_SIDE_NAMES


def test_the_examine_pull_has_every_name_the_census_reads() -> None:
    names = census_names()
    assert set(VLLM_SIDE_NAMES) <= names
    assert {"vllm:prompt_tokens_by_source_total", "vllm:prefix_cache_queries_total"} <= names
    for spec in LEDGER_SPECS.values():
        for term in spec.terms.values():
            assert set(term.sample_names) <= names, spec.profile
    for terms in RATE_TERMS.values():
        for term in terms.values():
            assert set(term.sample_names) <= names


@pytest.mark.parametrize(("step", "window"), [(15.0, "1m"), (1.0, "4s")])
def test_the_rate_window_is_four_steps(step: float, window: str) -> None:
    assert rate_window(step) == window


@pytest.mark.parametrize(("step", "span"), [(1.0, "4s"), (15.0, "15s"), (30.0, "30s")])
def test_a_counter_rate_in_the_screen_is_its_increase_over_the_last_step_as_the_census_reads_it(
    step: float, span: str,
) -> None:
    # the last sample now less the last sample one span before (at least SMOOTH_SECONDS), per second;
    # no rate()/irate(), which the engines compute differently or from one poll only
    s = signal_exprs(PROFILES["vllm-v1"], 'job="vllm"', step_seconds=step)
    for key in ("decode", "prefill"):
        assert not re.search(r"rate\(", s[key]), s[key]
        assert f"offset {span})" in s[key] and s[key].count("last_over_time(") == 2 and "clamp_min(" in s[key]
    lagged = signal_exprs(PROFILES["vllm-v1"], "", step_seconds=15.0, offset_seconds=120.0)["prefill"]
    assert "offset 2m)" in lagged and "offset 2m15s)" in lagged
    exprs = [q.expr for q in screen_queries(PROFILES["vllm-v1"], "", chunk_seconds=600, step_seconds=step,
                                            window_seconds=600, window_end=1e9)]
    assert exprs and not any(re.search(r"(?<![a-z_])rate\(", e) for e in exprs if "increase(" not in e)
    gauge = signal_exprs(PROFILES["radiance-1.8"], "", step_seconds=15.0)  # gauges stay gauges
    assert "rate(" not in gauge["decode"] and "rate(" not in gauge["prefill"]
