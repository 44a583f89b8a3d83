"""`pdcensus query` prints Prometheus's API JSON and maps errors to one line and an exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdcensus.cli import main
from pdcensus.series.model import Family, MetricType, RecordingBuilder, SeriesKey
from pdcensus.sources.openmetrics_writer import write_openmetrics

T0 = 1_700_000_000.0


@pytest.fixture
def recording_path(tmp_path: Path) -> Path:
    builder = RecordingBuilder("cli")
    builder.add_family(Family("req", MetricType.COUNTER))
    key = SeriesKey("req_total", (("instance", "i:1"), ("job", "j")))
    for i in range(9):
        builder.add(key, T0 + 15 * i, 10.0 * i)
    path = tmp_path / "metrics.om"
    write_openmetrics(builder.build(), path)
    return path


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_instant_query_prints_the_api_json(recording_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["query", str(recording_path), "increase(req_total[1m])", "--time", str(T0 + 120)], capsys)
    assert code == 0
    body = json.loads(out)
    assert body["status"] == "success" and body["data"]["resultType"] == "vector"
    [sample] = body["data"]["result"]
    assert sample["metric"] == {"instance": "i:1", "job": "j"}
    assert float(sample["value"][1]) == pytest.approx(40.0)


def test_range_query_with_semantics_2_returns_a_matrix(recording_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    args = ["query", str(recording_path), "req_total", "--start", str(T0), "--end", str(T0 + 60),
            "--step", "30s", "--semantics", "2"]
    code, out, _ = _run(args, capsys)
    assert code == 0
    [series] = json.loads(out)["data"]["result"]
    assert [v for _, v in series["values"]] == ["0", "20", "40"]


@pytest.mark.parametrize(
    ("extra", "exit_code", "message"),
    [
        pytest.param(["predict_linear(req_total[1m], 5)", "--time", str(T0)], 3, "predict_linear", id="unsupported"),
        pytest.param(["req_total", "--time", str(T0), "--semantics", "4"], 2, "--semantics", id="semantics"),
        pytest.param(["req_total"], 2, "--time", id="no-time"),
        pytest.param(["sum(", "--time", str(T0)], 2, "cannot parse", id="syntax"),
    ],
)
def test_errors_print_one_line_and_the_documented_exit_code(
    recording_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], exit_code: int, message: str
) -> None:
    code, out, err = _run(["query", str(recording_path), *extra], capsys)
    assert code == exit_code
    assert out == ""
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
