"""Evidence bundles: collect against a real local server and a real process, read back safely."""

from __future__ import annotations

import http.server
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pdcensus.errors import DataError, UsageError
from pdcensus.sources.bundle import collect_bundle, find_process, read_bundle, split_log_command

STATS = {"requests": [{"id": "r1", "ttft_seconds": 0.4}], "steps": {"decode_only": 120, "chunk": 4}}
DIAGNOSTICS = {"findings": [{"what": "VRAM split 60/40", "fix": "--max-num-batched-tokens 4096"}]}
METRICS = b'# TYPE radiance:engine_steps_total counter\nradiance:engine_steps_total{model_name="m"} 124\n'


@pytest.fixture
def endpoint() -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            routes = {
                "/stats": (200, json.dumps(STATS).encode()),
                "/diagnostics": (200, json.dumps(DIAGNOSTICS).encode()),
                "/metrics": (200, METRICS),
                "/html/stats": (200, b"<html>login</html>"),
            }
            code, body = routes.get(self.path, (404, b"no such page"))
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def engine_process() -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in engine: a real process with flags in its argv."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "--prefill-interleave", "2", "--model", "a b"],
    )
    # exec done? (a stand-in that never starts fails at pytest's timeout, not at a wall-clock figure here)
    while b"--prefill-interleave" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
        assert proc.poll() is None, "the stand-in engine exited before it started"
        time.sleep(0.01)
    yield proc
    proc.kill()
    proc.wait()


def test_a_bundle_holds_argv_stats_diagnostics_metrics_and_boot_lines(
    endpoint: str, engine_process: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    log = tmp_path / "serve.log"
    log.write_text("boot: prefill stager smallest pass 512 tokens\nboot: arena 12 GiB\nready\n")
    out = tmp_path / "evidence.tar.gz"
    manifest = collect_bundle(out, pid=engine_process.pid, url=endpoint, log_cmd=f"cat '{log}'")
    assert {k: v["status"] for k, v in manifest["items"].items()} == dict.fromkeys(
        ["argv", "stats", "diagnostics", "metrics", "boot_log"], "ok"
    )
    bundle = read_bundle(out)
    assert bundle.argv is not None and bundle.argv[-4:] == ("--prefill-interleave", "2", "--model", "a b")
    assert bundle.stats == STATS and bundle.diagnostics == DIAGNOSTICS
    assert bundle.metrics_text == METRICS.decode()
    assert bundle.boot_lines[0] == "boot: prefill stager smallest pass 512 tokens" and len(bundle.boot_lines) == 3
    assert bundle.failures() == {}
    assert bundle.manifest["pid"] == engine_process.pid


def test_what_fails_is_listed_with_why_and_the_rest_is_still_collected(endpoint: str, tmp_path: Path) -> None:
    out = tmp_path / "evidence.tar.gz"
    dead_pid = _dead_pid()
    collect_bundle(out, pid=dead_pid, url=endpoint, log_cmd="podman-not-installed-here logs svc")
    bundle = read_bundle(out)
    failures = bundle.failures()
    assert failures["argv"] == f"no process with pid {dead_pid}"
    assert failures["boot_log"] == "no such command: 'podman-not-installed-here'"
    assert bundle.stats == STATS and bundle.argv is None and bundle.boot_lines == ()


def test_a_non_json_stats_answer_and_a_failing_log_command_are_failures(tmp_path: Path, endpoint: str) -> None:
    out = tmp_path / "b.tar.gz"
    manifest = collect_bundle(out, url=endpoint + "/html", log_cmd=f"{sys.executable} -c 'import sys; "
                              "print(\"no such container\"); sys.exit(125)'")
    items = manifest["items"]
    assert items["stats"]["error"].startswith("not JSON: Expecting value")
    assert items["diagnostics"]["error"] == "HTTP 404 Not Found"
    assert items["boot_log"]["error"] == "exit status 125: no such container"
    assert "argv" not in items


def test_an_unreachable_endpoint_still_writes_a_bundle_saying_so(tmp_path: Path) -> None:
    out = tmp_path / "b.tar.gz"
    manifest = collect_bundle(out, url="http://127.0.0.1:9", pid=os.getpid(), timeout_seconds=1.0)
    assert manifest["items"]["argv"]["status"] == "ok"
    assert manifest["items"]["stats"]["error"].startswith("ConnectError")
    assert read_bundle(out).argv is not None


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize(
    "command",
    [
        pytest.param("sudo podman logs radiance", id="sudo"),
        pytest.param("/usr/bin/sudo -u deploy podman logs radiance", id="sudo-path"),
        pytest.param("doas podman logs radiance", id="doas"),
    ],
)
def test_a_log_command_under_sudo_is_refused_with_the_runbooks_reason(command: str) -> None:
    with pytest.raises(UsageError, match="root's container store") as info:
        split_log_command(command)
    assert repr(command) in str(info.value)


@pytest.mark.parametrize(
    ("command", "match"),
    [pytest.param("", "is empty", id="empty"), pytest.param("podman logs 'svc", "cannot split", id="unbalanced")],
)
def test_a_bad_log_command_is_a_usage_error(command: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        split_log_command(command)


def test_the_log_command_runs_without_a_shell(tmp_path: Path) -> None:
    out = tmp_path / "b.tar.gz"
    marker = tmp_path / "pwned"
    collect_bundle(out, url="http://127.0.0.1:9", timeout_seconds=0.5, log_cmd=f"echo hi; touch {marker}")
    assert read_bundle(out).boot_lines == (f"hi; touch {marker}",)
    assert not marker.exists()


def test_find_process_by_name_returns_the_one_match(engine_process: subprocess.Popen[bytes]) -> None:
    name = Path(sys.executable).name
    try:
        pid = find_process(name)
    except UsageError as exc:  # other interpreters of the same name are running: the error lists them
        assert str(engine_process.pid) in str(exc)
    else:
        assert pid == engine_process.pid


def test_an_unknown_process_name_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no process named 'no-such-engine-xyz'"):
        find_process("no-such-engine-xyz")


def _tar_with(tmp_path: Path, members: list[tarfile.TarInfo], data: bytes = b"{}") -> Path:
    path = tmp_path / "evil.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for info in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return path


def _member(name: str, kind: bytes = tarfile.REGTYPE, size: int = 2, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, size if kind == tarfile.REGTYPE else 0, link
    return info


@pytest.mark.parametrize(
    ("member", "match"),
    [
        pytest.param(_member("../stats.json"), "outside the bundle", id="dotdot"),
        pytest.param(_member("/etc/stats.json"), "outside the bundle", id="absolute"),
        pytest.param(_member("stats.json", tarfile.SYMTYPE, link="/etc/passwd"), "not a regular file", id="symlink"),
        pytest.param(_member("stats.json", tarfile.LNKTYPE, link="/etc/passwd"), "not a regular file", id="hardlink"),
        pytest.param(_member("boot.log", tarfile.CHRTYPE), "not a regular file", id="device"),
    ],
)
def test_reading_refuses_members_that_point_outside_the_bundle(tmp_path: Path, member: tarfile.TarInfo,
                                                               match: str) -> None:
    with pytest.raises(DataError, match=match):
        read_bundle(_tar_with(tmp_path, [member]))


def test_a_symlink_in_a_bundle_directory_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"secret": true}')
    d = tmp_path / "bundle"
    d.mkdir()
    (d / "stats.json").symlink_to(secret)
    (d / "diagnostics.json").write_text(json.dumps(DIAGNOSTICS))
    bundle = read_bundle(d)
    assert bundle.stats is None and bundle.diagnostics == DIAGNOSTICS


@pytest.mark.parametrize(
    ("content", "match"),
    [
        pytest.param(b"not a tarball at all", "not a readable bundle", id="garbage"),
        pytest.param(None, "no such bundle", id="missing"),
    ],
)
def test_an_unreadable_bundle_is_a_data_error(tmp_path: Path, content: bytes | None, match: str) -> None:
    path = tmp_path / "b.tar.gz"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(DataError, match=match):
        read_bundle(path)


def test_the_cli_prints_each_item_and_exits_0(endpoint: str, tmp_path: Path) -> None:
    out = tmp_path / "cli.tar.gz"
    code = "import sys; from pdcensus.cli import main; main(sys.argv[1:])"
    proc = subprocess.run([sys.executable, "-c", code, "collect", "--url", endpoint, "--pid", str(os.getpid()),
                           "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "ok      stats" in proc.stdout and f"wrote {out}" in proc.stdout
    refused = subprocess.run([sys.executable, "-c", code, "collect", "--log-cmd", "sudo podman logs x", "--out",
                              str(out)], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and refused.stderr.startswith("error: refusing --log-cmd")
    assert "Traceback" not in refused.stderr
