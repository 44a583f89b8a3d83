"""Inputs that used to end in exit 1 ``internal error``: each is now one line and a documented exit code.

Millisecond timestamps in an OpenMetrics file, Prometheus answers of the wrong shape (real
local server), evidence JSON nested 100,000 deep, an ``--html``/``--markdown`` path that
cannot be written (missing directory, ``/dev/full``, a real file-size limit mid-write), and
``record --out /dev/full``. Every case runs the real CLI in a subprocess.
"""

from __future__ import annotations

import http.server
import io
import json
import os
import resource
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.reliability.recordings import write_recording
from tests.sources.hostile_servers import GOOD_ANSWERS, HostileServer, answer_json


def _cli(*args: str, preexec: object = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True, timeout=120,
                          check=False, env=dict(os.environ), preexec_fn=preexec)  # type: ignore[arg-type]


def _error(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    return errors[0]


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_recording(tmp_path_factory.mktemp("rec") / "good.om")


@pytest.mark.parametrize("every", [1, 240], ids=["one-family-in-ms", "one-sample-in-ms"])
def test_millisecond_timestamps_in_openmetrics_are_refused_with_their_line(good: Path, tmp_path: Path,
                                                                          every: int) -> None:
    lines, seen = [], 0
    for line in good.read_text().splitlines():
        if line.startswith("vllm:num_requests_running"):
            seen += 1
            if seen % every == 0:
                series, value, stamp = line.rsplit(" ", 2)
                line = f"{series} {value} {float(stamp) * 1000:.0f}"
        lines.append(line)
    bad = tmp_path / "ms.om"
    bad.write_text("\n".join(lines) + "\n")
    done = _cli("census", str(bad))
    assert done.returncode == 3, done.stderr
    line = _error(done)
    assert "ms.om:" in line and "past year 5138" in line and "milliseconds in an OpenMetrics file" in line


def _shape(kind: str, path: str) -> object:
    good = GOOD_ANSWERS.get(path, {"resultType": "matrix", "result": []})
    listing = path.endswith(("/series", "/metadata", "/values"))
    if kind == "data-5":
        return {"status": "success", "data": 5}
    if kind == "warnings-5":
        return {"status": "success", "data": good, "warnings": 5}
    if kind == "value-abc":
        return {"status": "success", "data": good if listing else {
            "resultType": "matrix", "result": [{"metric": {"__name__": "up"}, "values": [[1.7e9, "abc"]]}]}}
    return {"status": "success", "data": good if listing else {  # a result with no metric
        "resultType": "matrix", "result": [{"values": [[1.7e9, "1"]]}]}}


@pytest.mark.parametrize("command", ["census", "fleet"])
@pytest.mark.parametrize(("kind", "said"), [
    ("data-5", "data is int '5'"),
    ("warnings-5", "'warnings' is int, not a list"),
    ("value-abc", "a sample is \"[1700000000.0, 'abc']\""),
    ("no-metric", "a result has no 'metric'"),
])
def test_a_prometheus_answer_of_the_wrong_shape_is_exit_3_with_one_line(command: str, kind: str, said: str) -> None:
    def answer(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
        answer_json(req, _shape(kind, req.path.split("?", 1)[0]))

    with HostileServer(answer) as server:
        done = _cli(command, "--prometheus", server.url, "--window", "1h")
    assert done.returncode == 3, done.stderr
    line = _error(done)
    assert server.url in line and "not a Prometheus API answer" in line and said in line


@pytest.mark.parametrize("member", ["stats.json", "diagnostics.json", "manifest.json"])
def test_evidence_json_nested_100k_deep_is_exit_3_with_one_line(good: Path, tmp_path: Path, member: str) -> None:
    bundle = tmp_path / "e.tar.gz"
    deep = b"[" * 100_000 + b"]" * 100_000
    with tarfile.open(bundle, "w:gz") as tar:
        manifest = [] if member == "manifest.json" else [("manifest.json", b'{"schema": "pdcensus/bundle/v1"}')]
        for name, data in [*manifest, (member, deep)]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    done = _cli("census", str(good), "--evidence", str(bundle))
    assert done.returncode == 3, done.stderr
    assert f"{member}: JSON nested deeper than 64 levels" in _error(done)


@pytest.mark.parametrize("flag", ["--html", "--markdown"])
def test_a_report_file_in_a_missing_directory_fails_after_the_report_is_printed(good: Path, tmp_path: Path,
                                                                              flag: str) -> None:
    target = tmp_path / "nope" / "deeper" / "r.html"
    if flag == "--markdown":  # markdown makes its plots directory; a file where a directory must be cannot
        (tmp_path / "nope").write_text("a file, not a directory")
    done = _cli("census", str(good), flag, str(target))
    assert done.returncode == 3, done.stderr
    assert "Verdict" in done.stdout or "verdict" in done.stdout.lower()  # the terminal report came first
    assert str(target) in _error(done) or "nope" in _error(done)


def test_a_report_to_dev_full_is_exit_3_and_dev_full_stays_a_device(good: Path) -> None:
    done = _cli("census", str(good), "--html", "/dev/full")
    assert done.returncode == 3, done.stderr
    assert "cannot write '/dev/full': No space left on device" in _error(done)
    assert Path("/dev/full").is_char_device()  # written into, never renamed over
    assert done.stdout.strip()


def _limit_file_size() -> None:  # a real kernel limit: the write fails with EFBIG part way
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 10, 16 << 10))


def test_a_write_cut_short_by_the_disk_leaves_the_old_report_whole_and_no_temporary_file(
        good: Path, tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("<p>yesterday's report</p>")
    done = _cli("census", str(good), "--html", str(target), preexec=_limit_file_size)
    assert done.returncode == 3, done.stderr
    assert "File too large (EFBIG)" in _error(done)
    assert target.read_text() == "<p>yesterday's report</p>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_a_report_written_whole_replaces_the_old_one(good: Path, tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("old")
    done = _cli("census", str(good), "--html", str(target), "--json")
    assert done.returncode == 0, done.stderr
    assert target.read_text().startswith("<!DOCTYPE html>") and json.loads(done.stdout)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_record_out_dev_full_is_a_usage_error_not_an_internal_one() -> None:
    done = _cli("record", "http://127.0.0.1:9/metrics", "--out", "/dev/full", "--duration", "1s")
    assert done.returncode == 2, done.stderr
    assert "'/dev/full' is not a regular file" in _error(done)


def test_record_fpm_out_dev_full_is_exit_3_with_one_line() -> None:
    pytest.importorskip("zmq")
    done = _cli("record", "--fpm", "tcp://127.0.0.1:9", "--out", "/dev/full", "--duration", "1s")
    assert done.returncode == 3, done.stderr
    assert "/dev/full: disk full (ENOSPC" in _error(done)
