"""The direct-scrape recorder against a real HTTP server on 127.0.0.1 (port 0)."""

from __future__ import annotations

import asyncio
import http.server
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from pdcensus.errors import DataError, RecordingParseError, UsageError
from pdcensus.sources.prometheus_local import free_port
from pdcensus.sources.recorder import JournalWriter, parse_target, record
from pdcensus.sources.recorder_journal import (
    MAGIC,
    ScrapeHeader,
    encode_block,
    is_record_journal,
    load_record_journal,
    scan_journal,
)

Responder = Callable[[str, int], tuple[int, str, bytes]]
T0 = 1_700_000_000.0


def scrape_text(n: int) -> bytes:
    """Scrape number n of a tiny engine: a counter that grows by n, a gauge, a histogram."""
    steps = n * (n + 1) // 2
    return (
        "# HELP radiance:engine_steps_total every engine step\n"
        "# TYPE radiance:engine_steps_total counter\n"
        f'radiance:engine_steps_total{{model_name="m"}} {steps}\n'
        "# TYPE radiance:decode_tokens_per_second gauge\n"
        f'radiance:decode_tokens_per_second{{model_name="m",job="engine-own"}} {n * 1.5}\n'
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        f'vllm:time_to_first_token_seconds_bucket{{le="0.5"}} {n}\n'
        f'vllm:time_to_first_token_seconds_bucket{{le="+Inf"}} {2 * n}\n'
        f"vllm:time_to_first_token_seconds_count {2 * n}\n"
        f"vllm:time_to_first_token_seconds_sum {n * 0.75}\n"
    ).encode()


class MetricsServer:
    """A threaded HTTP server on 127.0.0.1:0; ``responder(path, n)`` answers request n."""

    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.count = 0
        self.lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                with owner.lock:
                    owner.count += 1
                    n = owner.count
                status, ctype, body = owner.responder(self.path, n)
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def text_responder(path: str, n: int) -> tuple[int, str, bytes]:
    return 200, "text/plain; version=0.0.4; charset=utf-8", scrape_text(n)


@pytest.fixture
def server() -> Iterator[MetricsServer]:
    srv = MetricsServer(text_responder)
    yield srv
    srv.close()



def run_record(urls: list[str], out: Path, interval: float, duration: float, job: str = "pdcensus-record") -> int:
    targets = [parse_target(u) for u in urls]
    return asyncio.run(record(targets, out, interval_seconds=interval, duration_seconds=duration, job=job))


def test_each_scrape_lands_with_up_1_and_the_served_values(server: MetricsServer, tmp_path: Path) -> None:
    out = tmp_path / "run.pdrec"
    rounds = run_record([server.url], out, interval=0.05, duration=0.3)
    rec = load_record_journal(out)
    ep = rec.endpoint()
    assert (ep.job, ep.instance) == ("pdcensus-record", f"127.0.0.1:{server.port}")
    assert ep.n_scrapes == rounds == server.count
    _, up = ep.samples(ep.select("up")[0])
    assert up.tolist() == [1.0] * rounds
    _, steps = ep.samples(ep.select("radiance:engine_steps_total")[0])
    n = np.arange(1, rounds + 1)
    assert steps.tolist() == (n * (n + 1) // 2).astype(float).tolist()
    assert rec.type_of("radiance:engine_steps_total").value == "counter"
    assert rec.type_of("vllm:time_to_first_token_seconds_bucket").value == "histogram"


def test_a_sample_carrying_its_own_job_label_keeps_it_as_exported_job(server: MetricsServer, tmp_path: Path) -> None:
    out = tmp_path / "run.pdrec"
    run_record([server.url], out, interval=0.05, duration=0.1, job="bench")
    key = load_record_journal(out).endpoint().select("radiance:decode_tokens_per_second")[0]
    assert key.label("job") == "bench"
    assert key.label("exported_job") == "engine-own"


def test_a_failed_scrape_is_up_0_with_no_other_sample(tmp_path: Path) -> None:
    def flaky(path: str, n: int) -> tuple[int, str, bytes]:
        if n % 3 == 0:
            return 500, "text/plain", b"engine busy"
        if n % 3 == 2:
            return 200, "text/html", b"<html><body>login</body></html>"
        return text_responder(path, n)

    srv = MetricsServer(flaky)
    try:
        out = tmp_path / "run.pdrec"
        rounds = run_record([srv.url], out, interval=0.04, duration=0.36)
    finally:
        srv.close()
    ep = load_record_journal(out).endpoint()
    up_vals, _ = ep.column(ep.select("up")[0])
    assert up_vals.tolist() == [1.0 if (i + 1) % 3 == 1 else 0.0 for i in range(rounds)]
    others = [i for i, k in enumerate(ep.keys) if k.name != "up"]
    down = up_vals == 0
    assert not ep.present[np.ix_(down, others)].any()
    errors = [b.header.error for b in scan_journal(out).blocks]
    assert "HTTP 500 Internal Server Error" in errors
    assert any("does not parse" in e for e in errors)


def test_an_unreachable_endpoint_is_recorded_as_down_beside_a_live_one(server: MetricsServer, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}/metrics"
    out = tmp_path / "run.pdrec"
    rounds = run_record([server.url, dead], out, interval=0.05, duration=0.15)
    rec = load_record_journal(out)
    by_instance = {ep.instance: ep for ep in rec.endpoints}
    dead_ep = by_instance[parse_target(dead).instance]
    assert [k.name for k in dead_ep.keys] == ["up"]
    live = by_instance[f"127.0.0.1:{server.port}"]
    # each target keeps its own schedule: the counts may differ by a skipped slot
    assert dead_ep.values[:, 0].tolist() == [0.0] * dead_ep.n_scrapes
    assert live.n_scrapes >= 1 and rounds == max(live.n_scrapes, dead_ep.n_scrapes)


@pytest.mark.parametrize(
    ("url", "expected_url", "instance"),
    [
        pytest.param("http://10.0.0.5:7770", "http://10.0.0.5:7770/metrics", "10.0.0.5:7770", id="adds-metrics"),
        pytest.param("10.0.0.5:8000", "http://10.0.0.5:8000/metrics", "10.0.0.5:8000", id="bare-host-port"),
        pytest.param("https://box/x/metrics", "https://box:443/x/metrics", "box:443", id="https-default-port"),
        pytest.param("http://[::1]:9/m", "http://[::1]:9/m", "[::1]:9", id="ipv6"),
    ],
)
def test_a_target_url_gets_prometheus_style_instance(url: str, expected_url: str, instance: str) -> None:
    target = parse_target(url)
    assert (target.url, target.instance) == (expected_url, instance)


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("ftp://box:21/metrics", id="scheme"),
        pytest.param("http://user:pw@box:1/metrics", id="credentials"),
        pytest.param("http://:80/metrics", id="no-host"),
        pytest.param("notaurl", id="bare-word-without-port"),
        pytest.param("box:99999", id="port-out-of-range"),
        pytest.param("http://box:port/metrics", id="port-not-a-number"),
    ],
)
def test_a_bad_target_url_is_a_usage_error(url: str) -> None:
    with pytest.raises(UsageError, match="URL"):
        parse_target(url)


def test_an_existing_file_that_is_not_a_journal_is_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "metrics.om"
    out.write_text("# TYPE up gauge\nup 1 1\n# EOF\n")
    with pytest.raises(UsageError, match="not a pdcensus recording journal"):
        JournalWriter(out)
    assert out.read_text().endswith("# EOF\n")


def test_a_second_recorder_on_the_same_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run.pdrec"
    with JournalWriter(out), pytest.raises(UsageError, match="another recorder"):
        JournalWriter(out)


def write_journal(path: Path, n_scrapes: int) -> None:
    """A journal of ``n_scrapes`` good scrapes, 15 s apart, written by hand."""
    blocks = []
    for n in range(1, n_scrapes + 1):
        body = scrape_text(n)
        blocks.append(encode_block(ScrapeHeader(T0 + 15 * n, "j", "e:1", 1, len(body), "text/plain"), body))
    path.write_bytes(MAGIC + b"".join(blocks))


def test_every_cut_inside_the_last_block_still_loads_the_blocks_before_it(tmp_path: Path) -> None:
    out = tmp_path / "run.pdrec"
    write_journal(out, 3)
    data = out.read_bytes()
    scan = scan_journal(out)
    last = scan.blocks[-1]
    cut_file = tmp_path / "cut.pdrec"
    for cut in range(last.offset, last.end_offset, 7):
        cut_file.write_bytes(data[:cut])
        cut_scan = scan_journal(cut_file)
        assert len(cut_scan.blocks) == len(scan.blocks) - 1
        assert cut_scan.torn_bytes == cut - last.offset
    assert load_record_journal(cut_file).endpoint().n_scrapes == len(scan.blocks) - 1 == 2


def test_a_damaged_block_before_the_tail_names_its_line(tmp_path: Path) -> None:
    out = tmp_path / "run.pdrec"
    write_journal(out, 3)
    blocks = scan_journal(out).blocks
    data = bytearray(out.read_bytes())
    victim = blocks[1]
    data[victim.end_offset - 20] ^= 0x01  # flip a bit in the second block's body
    out.write_bytes(bytes(data))
    with pytest.raises(RecordingParseError, match="checksum") as info:
        scan_journal(out)
    assert info.value.line == victim.line


def test_a_file_cut_inside_the_magic_line_is_started_afresh(tmp_path: Path) -> None:
    out = tmp_path / "run.pdrec"
    out.write_bytes(MAGIC[:5])
    with JournalWriter(out) as writer:
        assert not writer.resumed
    assert out.read_bytes() == MAGIC


def _recorder_cmd(url: str, out: Path, *extra: str, file_size_limit: int | None = None) -> list[str]:
    code = "import sys; from pdcensus.cli import main; main(sys.argv[1:])"
    if file_size_limit is not None:  # set in the child itself: no preexec_fn beside our server thread
        code = f"import resource; resource.setrlimit(resource.RLIMIT_FSIZE, ({file_size_limit}, {file_size_limit})); " + code
    return [sys.executable, "-c", code, "record", url, "--out", str(out), "--interval", "50ms", *extra]


def _wait_for_blocks(out: Path, n: int, timeout_seconds: float = 120.0) -> None:  # a bound, not a claim
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if out.exists() and is_record_journal(out) and len(scan_journal(out).blocks) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} scrapes in {out} after {timeout_seconds}s")


def test_kill_9_mid_run_loses_nothing_and_a_restart_resumes_the_file(server: MetricsServer, tmp_path: Path) -> None:
    out = tmp_path / "run.pdrec"
    proc = subprocess.Popen(_recorder_cmd(server.url, out), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        _wait_for_blocks(out, 6)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
        assert proc.stderr is not None
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    killed = scan_journal(out)
    kept = out.read_bytes()[: killed.good_bytes]
    before = load_record_journal(out).endpoint()
    assert before.n_scrapes == len(killed.blocks) >= 6
    # a torn block, as a crash in the middle of a write would leave it
    with open(out, "ab") as fh:
        fh.write(b'# scrape {"time":1,"job":"x","instance":"y","up":1,"bytes":500}\nradiance:engine_st')
    resumed = subprocess.run(_recorder_cmd(server.url, out, "--duration", "300ms"), capture_output=True, text=True,
                             timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming {out}: {len(killed.blocks)} scrape(s) kept; cut a torn tail of" in resumed.stderr
    assert out.read_bytes().startswith(kept)
    after = load_record_journal(out).endpoint()
    assert after.n_scrapes > before.n_scrapes
    assert np.array_equal(after.timestamps[: before.n_scrapes], before.timestamps)
    assert np.all(np.diff(after.timestamps) > 0)
    assert scan_journal(out).torn_bytes == 0


def test_a_full_disk_stops_with_one_clear_line_and_the_file_still_loads(server: MetricsServer, tmp_path: Path) -> None:
    out = tmp_path / "run.pdrec"
    limit = 4000  # a few scrapes of ~700 bytes each
    proc = subprocess.run(_recorder_cmd(server.url, out, "--duration", "30s", file_size_limit=limit),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {out}: disk full (EFBIG")
    assert "still loads" in last
    assert "Traceback" not in proc.stderr
    scan = scan_journal(out)
    assert scan.torn_bytes == 0 and out.stat().st_size <= limit
    assert load_record_journal(out).endpoint().n_scrapes == len(scan.blocks) >= 2


def test_an_openmetrics_answer_is_recorded_and_loaded(tmp_path: Path) -> None:
    def openmetrics(path: str, n: int) -> tuple[int, str, bytes]:
        body = f"# TYPE radiance:engine_steps counter\nradiance:engine_steps_total {n * 10}\n# EOF\n".encode()
        return 200, "application/openmetrics-text; version=1.0.0; charset=utf-8", body

    srv = MetricsServer(openmetrics)
    try:
        out = tmp_path / "run.pdrec"
        rounds = run_record([srv.url], out, interval=0.04, duration=0.12)
    finally:
        srv.close()
    rec = load_record_journal(out)
    ep = rec.endpoint()
    _, steps = ep.samples(ep.select("radiance:engine_steps_total")[0])
    assert steps.tolist() == [10.0 * n for n in range(1, rounds + 1)]
    assert rec.type_of("radiance:engine_steps_total").value == "counter"


def test_a_body_that_does_not_parse_is_named_by_its_journal_line(tmp_path: Path) -> None:
    out = tmp_path / "hand.pdrec"
    good = scrape_text(1)
    bad = b"# TYPE g gauge\ng 1\ng{ 2\n"
    blocks = [
        encode_block(ScrapeHeader(T0, "j", "e:1", 1, len(good), "text/plain"), good),
        encode_block(ScrapeHeader(T0 + 15, "j", "e:1", 1, len(bad), "text/plain"), bad),
    ]
    out.write_bytes(MAGIC + b"".join(blocks))
    with pytest.raises(RecordingParseError) as info:
        load_record_journal(out)
    bad_line = 1 + (len(good.splitlines()) + 3) + 1 + 3  # magic, block 1 (header, body, blank, end), header 2, line 3
    assert info.value.line == bad_line
    assert out.read_bytes().decode().splitlines()[bad_line - 1] == "g{ 2"


def test_an_empty_journal_is_a_data_error_saying_so(tmp_path: Path) -> None:
    out = tmp_path / "new.pdrec"
    out.write_bytes(MAGIC)
    with pytest.raises(DataError, match="no complete scrape yet"):
        load_record_journal(out)
