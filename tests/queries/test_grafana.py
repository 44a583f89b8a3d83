"""`pdcensus grafana`: a dashboard in Grafana's current schema whose every target parses."""

from __future__ import annotations

import json

import promql_parser
import pytest

from pdcensus.queries.grafana import SCHEMA_VERSION, build_dashboard
from pdcensus.queries.promql_export import census_queries
from pdcensus.series.profiles import PROFILES

ALL_PROFILES = sorted(PROFILES)


def _as_grafana_would(expr: str) -> str:
    """Substitute the dashboard variables the way Grafana does before it sends the query."""
    return expr.replace("$__rate_interval", "1m").replace("$instance", "10.0.0.7:7770|10.0.0.8:7770")


@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_every_panel_has_type_title_grid_position_and_targets(profile: str) -> None:
    dash = json.loads(json.dumps(build_dashboard(PROFILES[profile])))
    assert dash["schemaVersion"] >= 39 == SCHEMA_VERSION
    assert dash["panels"]
    for panel in dash["panels"]:
        assert panel["type"] == "timeseries" and panel["title"]
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}
        assert panel["targets"]
        assert panel["datasource"]["uid"] == "${datasource}"
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids))


@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_every_target_expression_parses_and_selects_the_instance_variable(profile: str) -> None:
    dash = build_dashboard(PROFILES[profile])
    targets = [t for p in dash["panels"] for t in p["targets"]]
    assert len(targets) == len(census_queries(PROFILES[profile]))
    for t in targets:
        assert t["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert 'instance=~"$instance"' in t["expr"]
        promql_parser.parse(_as_grafana_would(t["expr"]))


def test_the_instance_and_datasource_variables_are_defined() -> None:
    dash = build_dashboard(PROFILES["radiance-1.8"])
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    inst = variables["instance"]
    assert inst["type"] == "query"
    assert inst["definition"] == "label_values(vllm:num_requests_running, instance)"
    assert inst["query"]["query"] == inst["definition"]


def test_panels_tile_the_grid_without_overlapping() -> None:
    panels = build_dashboard(PROFILES["radiance-1.8"])["panels"]
    cells: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine
        cells |= mine


def test_the_step_stays_at_the_scrape_interval() -> None:
    dash = build_dashboard(PROFILES["radiance-1.8"], scrape_interval_seconds=10)
    for p in dash["panels"]:
        assert p["interval"] == "10s"
        assert p["maxDataPoints"] >= 2 * 86400 / 10 * 0.6  # a day at 10 s stays under the cap
    assert "never above 30 s" in dash["description"]


def test_panel_ids_are_unique_and_descriptions_name_the_trap() -> None:
    panels = build_dashboard(PROFILES["radiance-1.8"])["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    ledger = next(p for p in panels if p["title"] == "Step ledger")
    assert "dilutes the chunk" in ledger["description"]
    assert [t["refId"] for t in ledger["targets"]] == ["A", "B"]
