"""Faults of live sources, injected into real servers: the endpoint dies mid-recording, Prometheus dies mid-fetch.

* The recorder scrapes a real local engine that answers, then wedges (every request hangs
  past the scrape timeout), then dies (connection refused). Every scrape it made is in
  the journal: ``up`` 1 while it answered and 0 after, no other sample at a failed
  scrape, each failure's reason kept; the file loads and the census runs on it.
* A real Prometheus (backfilled with promtool) is killed with SIGKILL between two of the
  requests that ``fetch_recording`` makes: the fetch fails as a whole with
  ``SourceUnreachableError`` (exit 4) naming the URL, never a partial recording passed off
  as complete; the same server alive gives every sample back.
* A Prometheus answer that stops in the middle of its body (the server stalls, or hangs up
  before Content-Length bytes): retried, then exit 4, never half a JSON answer parsed.
* ``census --prometheus`` against a Prometheus that is gone: exit 4 and one ``error:`` line.
"""

from __future__ import annotations

import asyncio
import http.server
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from pdcensus.census.model import Mechanism
from pdcensus.census.run import CensusOptions, census_recording
from pdcensus.errors import SourceUnreachableError
from pdcensus.sources.load import load_source
from pdcensus.sources.prometheus import fetch_recording
from pdcensus.sources.prometheus_http import RetryPolicy
from pdcensus.sources.prometheus_local import LocalPrometheus, free_port
from pdcensus.sources.recorder import ScrapeOutcome, parse_target, record
from pdcensus.sources.recorder_journal import scan_journal

from .live_servers import EngineServer
from .recordings import SCRAPE_SECONDS, T0, sharing_recording, write_recording

SIX = {m.value for m in Mechanism}
FAST_RETRY = RetryPolicy(attempts=2, base_delay_seconds=0.01, max_delay_seconds=0.02)
ANSWERED, WEDGED, TOTAL = 40, 3, 48


def test_an_endpoint_dying_mid_recording_leaves_up_0_rows_a_loadable_file_and_a_census(tmp_path: Path) -> None:
    server = EngineServer()
    out = tmp_path / "dying.pdrec"
    stop_event: asyncio.Event | None = None

    def on_scrape(outcome: ScrapeOutcome) -> None:
        done = outcome.round + 1
        if done == ANSWERED:
            server.stop_answering()
        elif done == ANSWERED + WEDGED:
            server.close()
        elif done == TOTAL and stop_event is not None:
            stop_event.set()

    async def run() -> int:
        nonlocal stop_event
        stop_event = asyncio.Event()
        return await record([parse_target(server.url)], out, interval_seconds=0.1, on_scrape=on_scrape,
                            stop=stop_event, job="radiance")

    try:
        rounds = asyncio.run(run())
    finally:
        server.close()
    assert rounds == TOTAL
    errors = [block.header.error for block in scan_journal(out).blocks]
    # while it answered, a scrape can still time out on a loaded machine: allow a few
    assert errors[:ANSWERED].count("") >= ANSWERED - 4, errors
    assert all(e == "" or "no answer within" in e for e in errors[:ANSWERED]), errors
    assert all("no answer within" in e for e in errors[ANSWERED:ANSWERED + WEDGED]), errors
    assert all("ConnectError" in e for e in errors[ANSWERED + WEDGED:]), errors

    recording = load_source(out)
    ep = recording.endpoint()
    assert ep.n_scrapes == TOTAL
    up = ep.values[:, ep.keys.index(next(k for k in ep.keys if k.name == "up"))]
    good = np.array([e == "" for e in errors])
    assert up.tolist() == good.astype(float).tolist()
    others = [i for i, k in enumerate(ep.keys) if k.name != "up"]
    assert ep.present[good][:, others].all()
    assert not ep.present[~good][:, others].any()

    report = census_recording(recording, CensusOptions(replicates=50))[0]
    assert report.verdict.mechanism.value in SIX
    assert report.shape.segments, "the census lists the shape it analysed"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    if shutil.which("promtool") is None or shutil.which("prometheus") is None:
        pytest.skip("promtool and prometheus are not installed")
    work = tmp_path_factory.mktemp("prometheus")
    with LocalPrometheus.backfilled(write_recording(work / "sharing.om", sharing_recording(240)), work) as server:
        assert server.process is not None
        yield server.process, server.url


WINDOW = (T0, T0 + 239 * SCRAPE_SECONDS)
NAMES = {"radiance:decode_tokens_per_second", "radiance:prefill_tokens_per_second", "vllm:num_requests_running"}


class KillAfter(httpx.AsyncBaseTransport):
    """The real HTTP transport, except that the server process is SIGKILLed before request ``n`` + 1."""

    def __init__(self, process: subprocess.Popen[bytes], n: int) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.process = process
        self.n = n
        self.seen = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.seen += 1
        if self.seen == self.n + 1:
            self.process.kill()
            self.process.wait(timeout=15)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.integration
def test_prometheus_killed_between_requests_fails_the_fetch_whole_with_exit_4(
        prometheus: tuple[subprocess.Popen[bytes], str]) -> None:
    process, url = prometheus
    complete, _ = fetch_recording(url, selector='{job="radiance"}', start=WINDOW[0], end=WINDOW[1], names=NAMES,
                                  retry=FAST_RETRY)
    ep = complete.endpoint()
    assert ep.n_scrapes == 240 and bool(ep.present.all())
    killer = KillAfter(process, n=3)
    with pytest.raises(SourceUnreachableError) as caught:
        fetch_recording(url, selector='{job="radiance"}', start=WINDOW[0], end=WINDOW[1], names=NAMES,
                        retry=FAST_RETRY, transport=killer, concurrency=1)
    assert killer.seen > 3
    assert caught.value.exit_code == 4
    assert url in str(caught.value) and "after 2 attempts" in str(caught.value)


class MidBodyServer:
    """A Prometheus API that sends its headers and part of a JSON answer, then hangs or hangs up."""

    def __init__(self, hang_up: bool) -> None:
        self.released = released = threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                body = b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"up"'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body) * 10))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                if not hang_up:
                    released.wait()  # never finishes: the client's timeout fires, however late

            do_GET = do_POST = _answer  # noqa: N815 (http.server's names)

            def log_message(self, *args: object) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                pass

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize(("hang_up", "said"), [
    pytest.param(False, "no answer within", id="stalls-mid-body"),
    pytest.param(True, "RemoteProtocolError", id="hangs-up-mid-body"),
])
def test_a_prometheus_answer_cut_mid_body_is_unreachable_not_a_partial_answer(hang_up: bool, said: str) -> None:
    server = MidBodyServer(hang_up)
    try:
        with pytest.raises(SourceUnreachableError) as caught:
            fetch_recording(server.url, selector='{job="radiance"}', start=WINDOW[0], end=WINDOW[1], names=NAMES,
                            retry=FAST_RETRY, timeout=0.5)
    finally:
        server.close()
    assert caught.value.exit_code == 4
    assert server.url in str(caught.value) and said in str(caught.value), str(caught.value)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True, timeout=60,
                          check=False)


def _census_has_prometheus() -> bool:
    return "--prometheus" in _cli("census", "--help").stdout


def test_the_census_cli_against_a_prometheus_that_is_gone_is_exit_4_with_one_line() -> None:
    # (query --prometheus: tests/integration/test_remote_query_and_census.py)
    if not _census_has_prometheus():
        pytest.skip("census has no --prometheus option yet")
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there any more
    done = _cli("census", "--start", f"{WINDOW[0]:.0f}", "--end", f"{WINDOW[1]:.0f}", "--prometheus", url,
                "--timeout", "2s")
    assert done.returncode == 4, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and url in lines[0], done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""

