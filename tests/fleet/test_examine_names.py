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


def test_a_counter_rate_in_the_screen_is_a_mean_of_per_scrape_rates() -> None:
    s = signal_exprs(PROFILES["vllm-v1"], 'job="vllm"', step_seconds=1.0)
    for key in ("decode", "prefill"):
        assert "irate(" in s[key] and not re.search(r"(?<!i)rate\(", s[key]), s[key]
        assert s[key].startswith("avg_over_time(") and "[3s999ms:1s]" in s[key]
    exprs = [q.expr for q in screen_queries(PROFILES["vllm-v1"], "", chunk_seconds=600, step_seconds=1.0,
                                            window_seconds=600, window_end=1e9)]
    assert exprs and not any(re.search(r"(?<!i)rate\(", e) for e in exprs)
    gauge = signal_exprs(PROFILES["radiance-1.8"], "", step_seconds=15.0)  # gauges stay gauges
    assert "rate(" not in gauge["decode"] and "rate(" not in gauge["prefill"]
