"""`pdcensus promql`: PromQL per census quantity, names from the profiles, rules promtool accepts."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import promql_parser
import pytest

from pdcensus.errors import UsageError
from pdcensus.queries.promql_export import (
    census_queries, check_window, normalize_selector, prometheus_duration, render_promql, render_rules,
)
from pdcensus.series.profiles import PROFILES

ALL_PROFILES = sorted(PROFILES)


def _selectors(expr: str) -> list[str]:
    """Every metric name an expression selects (walking the parsed tree's text form)."""
    found: list[str] = []
    for name in {n for p in PROFILES.values() for n in p.signals.values()}:
        for suffix in ("", "_bucket"):
            if f"{name}{suffix}{{" in expr or f"{name}{suffix}[" in expr or f"{name}{suffix})" in expr:
                found.append(name + suffix)
    return found


@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_every_query_parses_as_promql(profile: str) -> None:
    for window in ("5m", "$__rate_interval"):
        for q in census_queries(PROFILES[profile], selector='{job="radiance"}', window=window):
            promql_parser.parse(q.expr.replace("$__rate_interval", "1m"))


@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_every_selected_name_comes_from_the_profile(profile: str) -> None:
    prof = PROFILES[profile]
    names = {n for n in prof.signals.values()} | {n + "_bucket" for n in prof.signals.values()}
    for q in census_queries(prof):
        selected = _selectors(q.expr)
        assert selected, q.key
        assert set(selected) <= names, (q.key, selected)


def test_the_phase_ratio_is_built_from_the_decode_counters_never_the_mean_step() -> None:
    prof = PROFILES["radiance-1.8"]
    by_key = {q.key: q for q in census_queries(prof, window="1m")}
    decode = by_key["decode_only_step_seconds"].expr
    assert "increase(radiance:engine_step_seconds_decode_total[1m])" in decode
    assert "increase(radiance:engine_steps_decode_total[1m])" in decode
    chunk = by_key["chunk_step_seconds"].expr
    assert chunk.count(" - ") == 2  # (seconds - decode seconds) / (steps - decode steps)
    assert "dilutes the chunk" in by_key["chunk_step_seconds"].avoids
    assert "held_steps" in by_key


def test_preemptions_come_from_the_counter_never_the_instant_depth() -> None:
    for profile in ALL_PROFILES:
        queries = census_queries(PROFILES[profile])
        assert all("num_requests_preempted" not in q.expr for q in queries)
    pre = {q.key: q for q in census_queries(PROFILES["radiance-1.8"])}["preemptions"]
    assert "increase(vllm:num_preemptions_total[" in pre.expr
    assert "radiance:num_requests_preempted" in pre.avoids


def test_ttft_is_a_quantile_over_the_vllm_histogram_summed_by_le() -> None:
    ttft = [q for q in census_queries(PROFILES["radiance-1.8"]) if q.key.startswith("ttft_")]
    assert [q.key for q in ttft] == ["ttft_seconds_p50", "ttft_seconds_p90", "ttft_seconds_p99"]
    for q in ttft:
        assert q.expr.startswith("histogram_quantile(0.")
        assert "sum by (job, instance, le) (rate(vllm:time_to_first_token_seconds_bucket[" in q.expr
        assert "radiance:" in q.avoids


def test_per_stream_rate_divides_by_running_and_never_by_zero() -> None:
    q = {q.key: q for q in census_queries(PROFILES["radiance-1.8"])}["per_stream_decode_tokens_per_second"]
    assert "radiance:decode_tokens_per_second" in q.expr
    assert q.expr.endswith("(vllm:num_requests_running) > 0)")


def test_a_build_without_the_ledger_says_so_and_offers_no_mean_step() -> None:
    prof = PROFILES["radiance-1.0.13"]
    text = render_promql(prof, census_queries(prof))
    assert "No step ledger on radiance-1.0.13" in text
    assert "engine_step_seconds_total" not in text.replace("step_seconds/steps", "")


def test_the_output_carries_the_step_hint() -> None:
    prof = PROFILES["radiance-1.8"]
    text = render_promql(prof, census_queries(prof))
    assert "never more than 30 s" in text
    blocks = text.split("\n\n")[1:]
    assert all(b.splitlines()[1].startswith("# Avoids: ") for b in blocks)


def test_the_selector_is_merged_into_every_series() -> None:
    for q in census_queries(PROFILES["vllm-v1"], selector='{job="vllm", instance=~"a.*"}'):
        for name in _selectors(q.expr):
            assert f'{name}{{job="vllm", instance=~"a.*"}}' in q.expr


@pytest.mark.parametrize(
    "selector",
    [
        pytest.param('{job="x"', id="unclosed"),
        pytest.param("job=x", id="unquoted"),
        pytest.param('{job="x"}} or vector(1) {', id="injection"),
        pytest.param('job="a"\njob="b"', id="newline"),
        pytest.param("{job=~\"(\"}", id="bad-regex"),
    ],
)
def test_a_bad_selector_is_refused_with_an_example(selector: str) -> None:
    with pytest.raises(UsageError, match="bad selector") as info:
        normalize_selector(selector)
    assert repr(selector) in str(info.value)  # the message quotes the input
    assert 'job="radiance"' in str(info.value)  # and shows what a good one looks like


@pytest.mark.parametrize(
    ("window", "grafana", "match"),
    [
        pytest.param("5 minutes", True, "bad window", id="words"),
        pytest.param("$__rate_interval", False, "Grafana variable", id="grafana-in-rules"),
        pytest.param("0s", False, "bad window", id="zero"),
        pytest.param("", True, "bad window", id="empty"),
    ],
)
def test_a_bad_window_is_refused(window: str, grafana: bool, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        check_window(window, allow_grafana=grafana)


@pytest.mark.parametrize(("seconds", "text"), [(60, "1m"), (90, "1m30s"), (15, "15s"), (0.5, "500ms"),
                                               (3600, "1h")])
def test_prometheus_duration_round_trips_through_the_parser(seconds: float, text: str) -> None:
    assert prometheus_duration(seconds) == text
    if seconds >= 1:  # promql-parser 0.11 reads "ms" as microseconds; Prometheus does not
        assert promql_parser.parse_duration(text).total_seconds() == seconds


def test_rules_name_each_record_by_level_metric_and_operation() -> None:
    prof = PROFILES["radiance-1.8"]
    text = render_rules(prof, census_queries(prof, window="1m"), interval_seconds=15)
    records = [line.split(": ", 1)[1] for line in text.splitlines() if "- record: " in line]
    assert "job_instance:pdcensus_decode_only_step_seconds:mean1m" in records
    assert len(records) == len(set(records)) == len(census_queries(prof))
    assert "    interval: 15s" in text


def test_rules_refuse_a_grafana_window() -> None:
    prof = PROFILES["radiance-1.8"]
    with pytest.raises(UsageError, match="--window"):
        render_rules(prof, census_queries(prof), interval_seconds=15)


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_promtool_accepts_the_rules_file(tmp_path: Path, profile: str) -> None:
    prof = PROFILES[profile]
    path = tmp_path / "rules.yml"
    path.write_text(render_rules(prof, census_queries(prof, selector='{job="a"}', window="1m"),
                                 interval_seconds=15))
    proc = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(census_queries(prof))} rules found" in proc.stdout

