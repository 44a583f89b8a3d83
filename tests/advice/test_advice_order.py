"""The advice follows the losses: the headline mechanism's first, a minor mechanism's after it, in one line."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from pdcensus import api
from pdcensus.census.model import Mechanism, Severity


@pytest.fixture(scope="module")
def eviction_tail(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pdcensus.sim.output import write_sim_dir
    from pdcensus.sim.run import simulate

    return write_sim_dir(simulate("eviction-tail", duration_seconds=7200, seed=0),
                         tmp_path_factory.mktemp("order") / "ev")


def test_the_headline_mechanisms_advice_comes_first_and_the_minor_one_after(eviction_tail: Path) -> None:
    report = api.census(eviction_tail)
    v = report.verdict
    assert v.mechanism is Mechanism.EVICTION
    minor = {f.mechanism.value for f in v.found if f.severity is Severity.MINOR}
    assert "step-time-sharing" in minor  # the case the order is about: a minor sharing beside a material eviction
    advice = report.advice
    assert [r.mechanism for r in advice][:1] == ["eviction"]
    losses = {f.mechanism.value: f.loss_share for f in v.found}
    shares = [losses[r.mechanism] for r in advice if r.mechanism in losses]
    assert shares == sorted(shares, reverse=True)  # in the order of the losses
    assert [r.minor for r in advice] == [r.mechanism in minor for r in advice]


def test_the_full_terminal_view_gives_a_minor_mechanism_one_line(eviction_tail: Path) -> None:
    from pdcensus.report.terminal import render

    buf = io.StringIO()
    render(api.census(eviction_tail), Console(file=buf, width=120, emoji=False, highlight=False), full=True)
    text = buf.getvalue()
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.endswith("(for eviction)"))
    minor = next(i for i, line in enumerate(lines) if line.endswith("(for step-time-sharing)"))
    one = [i for i, line in enumerate(lines) if line.startswith("step-time-sharing is minor here")]
    assert "--prefill-interleave" in lines[one[0]] and "(--json has it)" in lines[one[0]]  # one line at 120
    assert one == [minor + 1] and minor > head
    findings = lines.index("All findings and evidence")
    assert not any(line.strip() for line in lines[minor + 2:findings])  # no 44-line box for a 2 % loss
