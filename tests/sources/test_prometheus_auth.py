"""Auth and TLS of the Prometheus source against a real HTTP(S) server on 127.0.0.1; secrets stay secret."""

from __future__ import annotations

import base64
import http.server
import json
import logging
import shutil
import ssl
import subprocess
import threading
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from pdcensus.errors import SourceUnreachableError, UsageError
from pdcensus.sources.prometheus import fetch_recording
from pdcensus.sources.prometheus_http import AuthConfig, RetryPolicy

TOKEN = "s3cr3t-t0ken-7f2a9c"
PASSWORD = "hunter2-pa55w0rd-b7"
FAST = RetryPolicy(attempts=2, base_delay_seconds=0.001)
T = 1_700_000_000.0


@dataclass
class ApiServer:
    """A real server speaking a sliver of the Prometheus API, behind a required credential."""

    url: str
    want_authorization: str
    seen_authorization: list[str] = field(default_factory=list)
    echo_secret_on_500: bool = False


def _serve(expect: str, tls: ssl.SSLContext | None = None) -> tuple[ApiServer, http.server.HTTPServer]:
    state = ApiServer("", expect)

    class Handler(http.server.BaseHTTPRequestHandler):
        def reply(self, code: int, body: object) -> None:
            raw = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def handle_api(self, form: dict[str, list[str]]) -> None:
            auth = self.headers.get("Authorization", "")
            state.seen_authorization.append(auth)
            if state.echo_secret_on_500:  # a hostile proxy that echoes what it got
                self.reply(500, {"status": "error", "errorType": "internal", "error": f"bad header {auth}"})
                return
            if auth != state.want_authorization:
                self.reply(401, {"status": "error", "errorType": "unauthorized", "error": f"got {auth!r}"})
                return
            path = self.path.split("?")[0]
            up = {"__name__": "up", "job": "radiance", "instance": "e:1"}
            if path == "/api/v1/series":
                self.reply(200, {"status": "success", "data": [up]})
            elif path == "/api/v1/metadata":
                self.reply(200, {"status": "success", "data": {}})
            elif "count_over_time" in form.get("query", [""])[0]:
                self.reply(200, {"status": "success", "data": {"resultType": "vector",
                                                               "result": [{"metric": {}, "value": [T, "1"]}]}})
            else:
                self.reply(200, {"status": "success", "data": {"resultType": "matrix",
                                                               "result": [{"metric": up, "values": [[T, "1"]]}]}})

        def do_GET(self) -> None:  # noqa: N802
            self.handle_api(parse_qs(self.path.partition("?")[2]))

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length", "0"))
            self.handle_api(parse_qs(self.rfile.read(length).decode()))

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    scheme = "http"
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
        scheme = "https"
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    state.url = f"{scheme}://127.0.0.1:{httpd.server_address[1]}"
    return state, httpd


@pytest.fixture
def bearer_server() -> Iterator[ApiServer]:
    state, httpd = _serve(f"Bearer {TOKEN}")
    yield state
    httpd.shutdown()
    httpd.server_close()


def fetch(url: str, auth: AuthConfig) -> tuple:
    return fetch_recording(url, start=T - 60, end=T + 60, auth=auth, retry=FAST)


def test_a_bearer_token_from_an_environment_variable_is_sent(bearer_server: ApiServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROM_TOKEN", TOKEN)
    rec, _ = fetch(bearer_server.url, AuthConfig(bearer_token_env="PROM_TOKEN"))
    assert rec.endpoint().instance == "e:1"
    assert set(bearer_server.seen_authorization) == {f"Bearer {TOKEN}"}


def test_a_bearer_token_from_a_file_is_sent(bearer_server: ApiServer, tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    rec, _ = fetch(bearer_server.url, AuthConfig(bearer_token_file=path))
    assert rec.endpoint().n_scrapes == 1


def test_basic_auth_takes_its_password_from_a_file(tmp_path: Path) -> None:
    expect = "Basic " + base64.b64encode(f"census:{PASSWORD}".encode()).decode()
    state, httpd = _serve(expect)
    try:
        path = tmp_path / "pw"
        path.write_text(PASSWORD)
        rec, _ = fetch(state.url, AuthConfig(basic_user="census", basic_password_file=path))
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert rec.endpoint().instance == "e:1"


def _everything_said(exc: BaseException, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> str:
    out = capsys.readouterr()
    return "\n".join([str(exc), repr(exc), "".join(traceback.format_exception(exc)), caplog.text, out.out, out.err])


@pytest.mark.parametrize("echo", [pytest.param(False, id="refused-401"), pytest.param(True, id="echoed-in-500")])
def test_the_token_never_appears_in_any_error_log_or_output(
    bearer_server: ApiServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str], echo: bool,
) -> None:
    caplog.set_level(logging.DEBUG)
    bearer_server.want_authorization = "Bearer something-else"
    bearer_server.echo_secret_on_500 = echo
    monkeypatch.setenv("PROM_TOKEN", TOKEN)
    with pytest.raises(SourceUnreachableError) as info:
        fetch(bearer_server.url, AuthConfig(bearer_token_env="PROM_TOKEN"))
    assert bearer_server.seen_authorization[0] == f"Bearer {TOKEN}"  # it was sent...
    said = _everything_said(info.value, caplog, capsys)
    assert TOKEN not in said  # ...and never shown
    assert bearer_server.url in said
    assert ("after 2 attempts" if echo else "refused the credentials (bearer token from $PROM_TOKEN)") in said


def test_the_password_is_never_shown_when_basic_auth_is_refused(
    bearer_server: ApiServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("PROM_PW", PASSWORD)
    with pytest.raises(SourceUnreachableError) as info:
        fetch(bearer_server.url, AuthConfig(basic_user="census", basic_password_env="PROM_PW"))
    said = _everything_said(info.value, caplog, capsys)
    assert PASSWORD not in said and base64.b64encode(f"census:{PASSWORD}".encode()).decode() not in said
    assert "basic auth as 'census'" in said


def test_a_password_inline_in_the_url_is_refused_without_echoing_it() -> None:
    with pytest.raises(UsageError, match="credentials in the URL") as info:
        fetch(f"http://census:{PASSWORD}@127.0.0.1:9/", AuthConfig())
    assert PASSWORD not in str(info.value)


@pytest.mark.parametrize(
    ("auth", "env", "match"),
    [
        pytest.param(AuthConfig(bearer_token_env="NOPE_UNSET"), {}, r"\$NOPE_UNSET is not set", id="unset-env"),
        pytest.param(AuthConfig(bearer_token_file=Path("/nonexistent/tok")), {}, "cannot read the bearer token file",
                     id="missing-file"),
        pytest.param(AuthConfig(bearer_token_env="T", basic_user="u"), {"T": "x"}, "not both", id="bearer-and-basic"),
        pytest.param(AuthConfig(basic_password_env="P"), {"P": "x"}, "without a user", id="password-no-user"),
        pytest.param(AuthConfig(bearer_token_env="T", bearer_token_file=Path("/x")), {"T": "x"},
                     "environment variable or a file, not both", id="env-and-file"),
    ],
)
def test_bad_auth_settings_are_usage_errors(auth: AuthConfig, env: dict[str, str], match: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOPE_UNSET", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(UsageError, match=match):
        fetch("http://127.0.0.1:9", auth)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    return cert, key


@pytest.fixture
def tls_server(tls_files: tuple[Path, Path]) -> Iterator[ApiServer]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*map(str, tls_files))
    state, httpd = _serve("", tls=ctx)
    yield state
    httpd.shutdown()
    httpd.server_close()


def test_tls_with_the_servers_ca_file_works(tls_server: ApiServer, tls_files: tuple[Path, Path]) -> None:
    rec, _ = fetch(tls_server.url, AuthConfig(ca_file=tls_files[0]))
    assert rec.endpoint().instance == "e:1"


def test_tls_to_an_unknown_ca_is_refused_and_insecure_skip_verify_accepts_it(tls_server: ApiServer) -> None:
    with pytest.raises(SourceUnreachableError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        fetch(tls_server.url, AuthConfig())
    rec, _ = fetch(tls_server.url, AuthConfig(insecure_skip_verify=True))
    assert rec.endpoint().instance == "e:1"


def test_a_missing_ca_file_is_a_usage_error_naming_it() -> None:
    with pytest.raises(UsageError, match="cannot load the CA file '/nonexistent/ca.pem'"):
        fetch("https://127.0.0.1:9", AuthConfig(ca_file=Path("/nonexistent/ca.pem")))


def test_httpx_logging_at_debug_carries_no_secret(bearer_server: ApiServer, monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="httpx")
    caplog.set_level(logging.DEBUG, logger="httpcore")
    monkeypatch.setenv("PROM_TOKEN", TOKEN)
    fetch(bearer_server.url, AuthConfig(bearer_token_env="PROM_TOKEN"))
    assert caplog.records  # the logs were captured...
    assert TOKEN not in caplog.text  # ...and hold no token
