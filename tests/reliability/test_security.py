"""Security properties, checked on the code and through the CLI.

* No shell: the source tree (read as Python ASTs, not grepped) calls nothing with
  ``shell=True`` and never ``os.system``/``os.popen``/``asyncio.create_subprocess_shell``.
* Loopback by default: every ``--host``-like CLI option, every parameter or dataclass field
  named like a bind address, and every ZMQ-style address default is 127.0.0.1 / localhost;
  no ``0.0.0.0`` literal anywhere in the code.
* Secrets: a bearer token given by environment variable never reaches stdout or stderr,
  whatever the server answers (refusal, a 5xx, a body that echoes the token back).
* HTML: label values carrying markup come out of ``census --html`` escaped.
* A pinned source is text: ``lint`` over a C++ file with ``system("...")`` and a runbook
  with ``$(...)`` runs nothing (no process is spawned; the commands' marker files never
  appear).
"""

from __future__ import annotations

import ast
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pdcensus.cli import click_group, main

from .recordings import T0, sharing_recording, write_recording

SRC = Path(__file__).resolve().parents[2] / "src" / "pdcensus"
LOOPBACK = ("127.0.0.1", "localhost", "::1", "tcp://127.0.0.1", "tcp://localhost", "ipc://", "inproc://")
BIND_NAMES = {"host", "bind", "bind_host", "listen_host", "listen", "address", "bind_address", "listen_address"}
TOKEN = "pdc-secret-7f3a9c1e5b2d4f6a8e0c"
TOKEN_ENV = "PDCENSUS_RELIABILITY_TOKEN"


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def test_the_source_tree_is_parsed_not_skipped() -> None:
    modules = list(_modules())
    assert len(modules) > 50
    assert any(path.name == "recorder.py" for path, _ in modules)


def test_no_call_in_src_runs_a_shell() -> None:
    found = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _dotted(node.func)
            where = f"{path.relative_to(SRC)}:{node.lineno}"
            if name in {"os.system", "os.popen", "system", "popen", "asyncio.create_subprocess_shell",
                        "create_subprocess_shell", "commands.getoutput", "subprocess.getoutput",
                        "subprocess.getstatusoutput"}:
                found.append(f"{where} {name}()")
            for kw in node.keywords:
                if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                    found.append(f"{where} {name}(shell={ast.unparse(kw.value)})")
    assert not found, "shell use in src: " + "; ".join(found)


def _is_loopback(value: object) -> bool:
    return isinstance(value, str) and value.startswith(LOOPBACK)


def test_every_bind_address_default_in_src_is_loopback() -> None:
    defaults: list[tuple[str, str, object]] = []
    wildcard = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            where = f"{path.relative_to(SRC)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args.posonlyargs + node.args.args
                pairs = list(zip(args[len(args) - len(node.args.defaults):], node.args.defaults))
                pairs += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None]
                for arg, default in pairs:
                    if arg.arg in BIND_NAMES and isinstance(default, ast.Constant) and isinstance(default.value, str):
                        defaults.append((where, arg.arg, default.value))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if node.target.id.lower() in BIND_NAMES | {"default_address", "default_host"} and isinstance(
                        node.value, ast.Constant) and isinstance(node.value.value, str):
                    defaults.append((where, node.target.id, node.value.value))
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id in {"DEFAULT_ADDRESS", "DEFAULT_HOST"}:
                        defaults.append((where, target.id, node.value.value))
            elif isinstance(node, ast.Constant) and node.value in {"0.0.0.0", "tcp://0.0.0.0", "tcp://*"}:
                wildcard.append(f"{where} {node.value!r}")
    assert defaults, "expected the servers' host defaults to be found"
    bad = [f"{w} {name}={value!r}" for w, name, value in defaults if not _is_loopback(value)]
    assert not bad, "non-loopback bind defaults: " + "; ".join(bad)
    assert not wildcard, "wildcard bind addresses in src: " + "; ".join(wildcard)


def test_every_host_option_of_the_cli_defaults_to_loopback() -> None:
    group = click_group()
    commands_seen = getattr(group, "commands", {})
    assert "serve" in commands_seen and "census" in commands_seen
    options = []
    for name, command in commands_seen.items():
        for param in command.params:
            if param.param_type_name == "option" and any(o.lstrip("-") in {"host", "bind", "listen", "address"}
                                                         for o in param.opts):
                options.append((name, param.opts[0], param.default))
    assert ("serve", "--host", "127.0.0.1") in options
    bad = [f"{c} {o} default {d!r}" for c, o, d in options if d is not None and not _is_loopback(d)]
    assert not bad, "; ".join(bad)


class EchoingServer:
    """Answers every request with ``status`` and a body that quotes the Authorization header back."""

    def __init__(self, status: int) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                echo = self.headers.get("Authorization", "")
                body = f"refused: you sent {echo!r} (token {echo.removeprefix('Bearer ')})".encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer  # noqa: N815 (http.server's names)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


QUERY = ["query", "up", "--time", f"{T0:.0f}"]
CENSUS = ["census", "--start", f"{T0:.0f}", "--end", f"{T0 + 3600:.0f}"]


@pytest.mark.parametrize(("command", "status", "exit_code"), [
    pytest.param(QUERY, 401, 4, id="query-unauthorised"),
    pytest.param(QUERY, 403, 4, id="query-forbidden"),
    pytest.param(QUERY, 502, 4, id="query-bad-gateway-echoing-the-token"),
    pytest.param(QUERY, 200, 3, id="query-ok-status-with-the-token-in-a-non-json-body"),
    pytest.param(CENSUS, 401, 4, id="census-unauthorised"),
])
def test_a_bearer_token_from_the_environment_is_never_printed(command: list[str], status: int, exit_code: int) -> None:
    if command[0] == "census" and "--prometheus" not in subprocess.run(
            [sys.executable, "-m", "pdcensus", "census", "--help"], capture_output=True, text=True, timeout=60).stdout:
        pytest.skip("census has no --prometheus option yet")
    server = EchoingServer(status)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pdcensus", *command, "--prometheus", server.url,
             "--bearer-token-env", TOKEN_ENV, "--timeout", "5s"],
            capture_output=True, text=True, timeout=60, env={**os.environ, TOKEN_ENV: TOKEN}, check=False)
    finally:
        server.close()
    assert done.returncode == exit_code, done.stderr
    said = done.stdout + done.stderr
    assert TOKEN not in said and TOKEN[:12] not in said, said
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and server.url in lines[0], done.stderr


def test_label_values_with_markup_are_escaped_in_the_html_report(tmp_path: Path) -> None:
    recording = write_recording(tmp_path / "labels.om", sharing_recording(
        instance="<script>alert(1)</script>", model_name='"><img src=x onerror=alert(2)>'))
    page = tmp_path / "report.html"
    done = subprocess.run([sys.executable, "-m", "pdcensus", "census", str(recording), "--html", str(page), "--json"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    html = page.read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)" not in html
    assert "<img src=x" not in html


def test_lint_reads_a_pinned_source_and_a_runbook_as_text_and_spawns_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from pdcensus.sim.config_source import render_config_source

    markers = [tmp_path / f"ran-{i}" for i in range(3)]
    source = tmp_path / "config.cpp"
    source.write_text(render_config_source() + f'\nint main() {{ system("touch {markers[0]}"); '
                      f'popen("touch {markers[1]}", "r"); return 0; }}\n')
    runbook = tmp_path / "runbook.md"
    runbook.write_text("# arm\n\n```\nradiance serve --checkpoint-policy keep-everything "
                       f"--prefill-interleave $(touch {markers[2]})\n```\n")
    spawned: list[str] = []

    def refuse(name: str) -> object:
        def spawn(*args: object, **kwargs: object) -> None:
            spawned.append(f"{name}{args!r}")
            raise AssertionError(f"lint tried to run a process: {name}{args!r}")
        return spawn

    monkeypatch.setattr(subprocess, "Popen", refuse("subprocess.Popen"))
    for name in ("system", "popen", "posix_spawn", "posix_spawnp", "execv", "execve", "execvp", "fork"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refuse(f"os.{name}"))
    main(["lint", str(runbook), "--source", str(source), "--json", "--warn-only"])
    out = capsys.readouterr()
    assert not spawned
    assert not any(m.exists() for m in markers)
    assert "keep-everything" in out.out, "lint read the runbook and judged its enum value"
    assert "internal error" not in out.err
