"""`pdcensus census` end to end on a recording file written in OpenMetrics, and its HTML."""

from __future__ import annotations

import json

import pytest

from pdcensus.cli import main
from pdcensus.report.html import render_html
from pdcensus.api import census
from pdcensus.sources.openmetrics_writer import write_openmetrics

from .synth import Synth, synth_recording


@pytest.fixture(scope="module")
def recording_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("rec") / "metrics.om"
    write_openmetrics(synth_recording(Synth(mechanism="sharing", duration_seconds=3600)), path)
    return path


def _run(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
        raise SystemExit(0)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_census_json_on_a_recording_file_names_the_mechanism(recording_file, tmp_path, capsys):
    html = tmp_path / "r.html"
    code, out, _ = _run(["census", str(recording_file), "--json", "--html", str(html)], capsys)
    assert code == 0
    d = json.loads(out)
    assert d["verdict"]["mechanism"] == "step-time-sharing"
    assert "step-time-sharing" in html.read_text()


def test_census_terminal_report_puts_the_verdict_first(recording_file, capsys):
    code, out, _ = _run(["census", str(recording_file), "--segment", "1", "--full"], capsys)
    assert code == 0
    first = out.index("step-time-sharing")
    assert first < out.index("Evidence") < out.index("Shape") < out.index("Traps")


def test_census_terminal_report_is_short_without_full(recording_file, capsys):
    code, short, _ = _run(["census", str(recording_file), "--segment", "1"], capsys)
    assert code == 0
    code, full, _ = _run(["census", str(recording_file), "--segment", "1", "--full"], capsys)
    assert code == 0
    assert short.index("how sure it is there") < short.index("how much it costs") < short.index("Advice")
    assert "Traps" not in short and "Traps" in full
    assert len(short.splitlines()) < len(full.splitlines()) / 3


@pytest.mark.parametrize("args,code,match", [
    pytest.param(["census", "/nonexistent/x.om"], 3, "no such file", id="missing-file"),
    pytest.param(["census", "REC", "--segment", "9"], 2, "choose 1..1", id="bad-segment"),
    pytest.param(["census", "REC", "--instance", "nope"], 2, "choose one of", id="bad-instance"),
])
def test_census_errors_are_one_line_with_the_documented_exit_code(recording_file, capsys, args, code, match):
    args = [str(recording_file) if a == "REC" else a for a in args]
    got, _, err = _run(args, capsys)
    assert got == code
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and match in lines[0]


def test_html_escapes_label_values():
    rec = synth_recording(Synth(duration_seconds=1800))
    rec.endpoints[0].instance = "<script>alert(1)</script>"
    html = render_html([census(rec)])
    assert "<script>alert" not in html and "&lt;script&gt;" in html


def test_terminal_report_prints_rich_markup_in_label_values_literally():
    from pdcensus.report.terminal import render_text

    rec = synth_recording(Synth(duration_seconds=1800))
    rec.endpoints[0].instance = "[/bold][red]x"
    text = render_text(census(rec))
    assert "[/bold][red]x" in text
