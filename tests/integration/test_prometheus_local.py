"""The local Prometheus helper: clear errors when the binary is missing, the backfill fails or the server dies."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import httpx
import pytest

from pdcensus.errors import DataError, SourceUnreachableError
from pdcensus.sources import prometheus_local
from pdcensus.sources.prometheus_local import LocalPrometheus

pytestmark = pytest.mark.integration


def test_a_missing_binary_names_the_debian_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(prometheus_local.shutil, "which", lambda name: None)
    with pytest.raises(SourceUnreachableError, match="promtool is not installed .Debian package 'prometheus'"):
        LocalPrometheus.backfilled(tmp_path / "x.om", tmp_path / "work")


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_a_file_promtool_refuses_is_a_data_error_with_promtools_reason(tmp_path: Path) -> None:
    bad = tmp_path / "bad.om"
    bad.write_text("this is not openmetrics\n")
    with pytest.raises(DataError, match=r"promtool could not backfill .*bad\.om"):
        LocalPrometheus.backfilled(bad, tmp_path / "work")


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus is not installed")
def test_a_server_that_cannot_start_is_reported_with_its_log(tmp_path: Path) -> None:
    broken = LocalPrometheus(tmp_path / "work", "global: [this is not a config\n")
    with pytest.raises(SourceUnreachableError, match="prometheus exited with"):
        broken.start()


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus is not installed")
def test_a_scraping_server_binds_loopback_and_stops_on_exit(tmp_path: Path) -> None:
    with LocalPrometheus.scraping(["127.0.0.1:9"], tmp_path / "work", job="probe") as prom:
        assert prom.url.startswith("http://127.0.0.1:")
        jobs: list[str] = []
        deadline = time.monotonic() + 120  # a bound for a busy machine, not a claim about speed
        while not jobs and time.monotonic() < deadline:  # discovery runs just after /-/ready
            targets = httpx.get(prom.url + "/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
            jobs = [t["labels"]["job"] for t in targets]
            time.sleep(0.2)
        assert jobs == ["probe"]
        process = prom.process
    assert process is not None and process.poll() is not None


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus is not installed")
def test_the_longest_scrape_gap_is_read_from_the_stored_up_samples(tmp_path: Path) -> None:
    """A window whose ``up`` has a 63 s hole (what a loaded CI machine once stored) reads 63 s; the
    ends of the window count as edges, so a window past the last sample reads to its end."""
    base = 1_700_000_000
    stamps = [base + i for i in range(13)] + [base + 76 + i for i in range(10)]  # no sample in (12, 76)
    lines = ["# TYPE up gauge"] + [f'up{{job="probe",instance="a"}} 1 {t}' for t in stamps] + ["# EOF"]
    om = tmp_path / "gap.om"
    om.write_text("\n".join(lines) + "\n")
    with LocalPrometheus.backfilled(om, tmp_path / "work") as prom:
        assert prom.longest_scrape_gap("probe", base, base + 80) == pytest.approx(64.0)
        assert prom.longest_scrape_gap("probe", base, base + 12) == pytest.approx(1.0)
        assert prom.longest_scrape_gap("probe", base + 80, base + 100) == pytest.approx(15.0)
        assert prom.longest_scrape_gap("other", base, base + 10) == pytest.approx(10.0)


def test_a_retried_load_draws_prompts_no_cache_holds() -> None:
    """The retry after a scrape gap sends other prompt ids than the discarded attempt (the prefix cache has those)."""
    from dataclasses import replace

    from pdcensus.engine.experiment import retry_seed
    from pdcensus.engine.vllm_load import VllmPlan, prompt_ids

    plan = VllmPlan(scenario="t", decoders=1, decoder_prompt_tokens=8, max_tokens=4, prompt_tokens=64,
                    prompt_max_tokens=1, phases=((0.0, 1.0),), duration_seconds=2.0, seed=11)
    assert retry_seed(11, 1) == 11
    first, second = prompt_ids(plan, 3), prompt_ids(replace(plan, seed=retry_seed(11, 2)), 3)
    assert len(first) == len(second) == 3 and all(len(p) == 64 for p in first + second)
    assert not {tuple(p[:16]) for p in first} & {tuple(p[:16]) for p in second}
