"""The `promql` and `grafana` commands: output a user can paste, errors as one line with exit 2."""

from __future__ import annotations

import json

import pytest

from pdcensus.cli import main


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_promql_prints_commented_queries_for_the_chosen_profile(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "promql", "--profile", "vllm-v1", "--selector", '{job="vllm"}')
    assert code == 0
    assert out.startswith("# pdcensus census queries, profile vllm-v1")
    assert 'vllm:num_preemptions_total{job="vllm"}' in out


def test_promql_rules_default_to_four_scrapes_per_window(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "promql", "--rules", "--scrape-interval", "10s")
    assert code == 0
    assert "[40s]" in out and "$__rate_interval" not in out
    assert "    interval: 10s" in out


def test_promql_json_lists_every_query(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "promql", "--json")
    assert code == 0
    rows = json.loads(out)
    assert {"key", "title", "expr", "unit", "avoids", "record"} <= set(rows[0])
    assert any(r["key"] == "phase_ratio" for r in rows)


def test_grafana_prints_a_dashboard_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "grafana", "--profile", "sglang", "--title", "SGLang <prod>")
    assert code == 0
    dash = json.loads(out)
    assert dash["title"] == "SGLang <prod>"
    assert any("sglang:" in t["expr"] for p in dash["panels"] for t in p["targets"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("promql", "--profile", "radiance-9"), "unknown profile 'radiance-9'", id="profile"),
        pytest.param(("grafana", "--profile", "nope"), "choose one of: radiance-1.8", id="grafana-profile"),
        pytest.param(("promql", "--rules", "--window", "$__rate_interval"), "--window 1m", id="rules-window"),
        pytest.param(("promql", "--scrape-interval", "2m"), "at most 30s", id="slow-scrape"),
        pytest.param(("promql", "--selector", "{job=}"), "bad selector", id="selector"),
    ],
)
def test_bad_options_exit_2_with_one_error_line(capsys: pytest.CaptureFixture[str], args: tuple[str, ...],
                                                message: str) -> None:
    code, out, err = _run(capsys, *args)
    assert code == 2
    assert out == ""
    assert err.startswith("error: ") and message in err
    assert len(err.strip().splitlines()) == 1
