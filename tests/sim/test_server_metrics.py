"""`pdcensus serve`'s /metrics, /stats and /diagnostics: the sim's names and files, live; and its CLI refusals."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pdcensus.series.profiles import detect_profile
from pdcensus.sim.run import simulate
from pdcensus.sim.server_process import ServeProcess
from pdcensus.sources.textformat import parse_scrape

MODEL = "radiance/hybrid-moe-a3b"


@pytest.fixture(scope="module")
def busy_server() -> Iterator[ServeProcess]:
    """The scenario's own traffic at 20x: a minute of engine time every three seconds."""
    with ServeProcess("step-time-sharing", speed=20) as server:
        yield server


def scrape(server: ServeProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(server.url + "/metrics", timeout=10).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_metrics_carry_the_recordings_families_with_the_same_help_types_and_labels(busy_server: ServeProcess) -> None:
    response = httpx.get(busy_server.url + "/metrics", timeout=10)
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    live = {f.name: f for f in text_string_to_metric_families(response.text)}
    recording = simulate("step-time-sharing", duration_seconds=60).recording
    assert set(live) == set(recording.families)
    for name, fam in recording.families.items():
        assert (live[name].documentation, live[name].type) == (fam.help, fam.type.value), name
    recorded = {(k.name, tuple(sorted(k.without("job", "instance").labels))) for k in recording.endpoints[0].keys
                if k.name != "up"}
    served = {(s.name, tuple(sorted(s.labels.items()))) for f in live.values() for s in f.samples}
    assert served == recorded


def test_counters_grow_between_scrapes_as_engine_time_passes_at_the_given_speed(busy_server: ServeProcess) -> None:
    steps = ("radiance:engine_steps_total", (("model_name", MODEL),))
    seconds = ("radiance:engine_step_seconds_total", (("model_name", MODEL),))
    t0 = time.monotonic()  # before the first scrape is asked for and after the second has answered:
    first = scrape(busy_server)  # the server's clock ran no longer than t1 - t0 between the two,
    time.sleep(1.0)  # however long either took under load
    second = scrape(busy_server)
    t1 = time.monotonic()
    assert second[steps] > first[steps]
    busy_engine_seconds = second[seconds] - first[seconds]
    assert busy_engine_seconds <= 20 * (t1 - t0) * 1.0001  # the engine cannot be busy longer than it ran
    counters = [k for k in first if k[0].endswith("_total")]
    assert len(counters) >= 8 and all(second[k] >= first[k] for k in counters)


def test_stats_and_diagnostics_answer_like_the_sim_files_plus_the_live_clock(busy_server: ServeProcess) -> None:
    stats = httpx.get(busy_server.url + "/stats", timeout=10).json()
    diagnostics = httpx.get(busy_server.url + "/diagnostics", timeout=10).json()
    offline = simulate("step-time-sharing", duration_seconds=60)
    assert set(stats) == set(offline.stats) | {"live"}
    assert set(diagnostics) == set(offline.diagnostics)
    assert stats["live"]["speed"] == 20 and stats["live"]["background_traffic"] is True
    assert stats["live"]["engine_seconds"] > 0 and stats["counters"]["steps"] > 0


def test_client_requests_join_the_scenarios_own_traffic(busy_server: ServeProcess) -> None:
    before = httpx.get(busy_server.url + "/stats", timeout=10).json()
    answer = httpx.post(busy_server.url + "/v1/completions", timeout=30,
                        json={"model": MODEL, "prompt": "hello", "max_tokens": 8}).json()
    after = httpx.get(busy_server.url + "/stats", timeout=10).json()
    assert answer["usage"]["completion_tokens"] == 8
    assert after["live"]["clients_served"] == before["live"]["clients_served"] + 1
    produced = after["counters"]["generation_tokens"] - before["counters"]["generation_tokens"]
    assert produced > 8  # the background decoders generated too
    kinds = {r["kind"] for r in after["recent_requests"]}
    assert "client" in kinds and kinds - {"client"}


def test_created_is_wall_clock_unix_seconds_not_the_engines_clock_at_speed_20(busy_server: ServeProcess) -> None:
    time.sleep(1.0)  # at 20x the engine clock is now well ahead of the wall clock's elapsed time
    before = time.time()
    done = httpx.post(busy_server.url + "/v1/completions", timeout=30,
                      json={"model": MODEL, "prompt": "hi", "max_tokens": 2}).json()
    chat = httpx.post(busy_server.url + "/v1/chat/completions", timeout=30,
                      json={"model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}).json()
    models = httpx.get(busy_server.url + "/v1/models", timeout=10).json()
    after = time.time()
    engine_seconds = httpx.get(busy_server.url + "/stats", timeout=10).json()["live"]["engine_seconds"]
    assert engine_seconds > 10 * (after - before)  # the engine's clock does run ahead
    for created in (done["created"], chat["created"]):
        assert int(before) <= created <= after, (created, before, after)
    assert models["data"][0]["created"] <= int(after)


def test_the_boot_ledger_is_printed_at_start_with_the_real_port(busy_server: ServeProcess) -> None:
    port = busy_server.url.rsplit(":", 1)[1]
    log = busy_server.log_text()
    assert "prefill stager: smallest pass" in log and f"--port {port}" in log


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.parametrize(("args", "exit_code", "message"), [
    pytest.param(["serve", "no-such-scenario", "--port", "0"], 2, "unknown scenario", id="unknown-scenario"),
    pytest.param(["serve", "idle", "--port", "0", "--speed", "0"], 2, "--speed", id="speed-zero"),
    pytest.param(["serve", "idle", "--port", "0", "--set", "--checkpoint-policy=keepall"], 2, "keep-all",
                 id="bad-enum-value"),
    pytest.param(["serve", "idle", "--port", "0", "--set", "--no-such-flag=1"], 2, "unknown flag",
                 id="unknown-flag"),
])
def test_bad_serve_arguments_fail_with_one_error_line(args: list[str], exit_code: int, message: str) -> None:
    done = run_cli(*args)
    assert done.returncode == exit_code
    assert done.stderr.startswith("error: ") and message in done.stderr and "Traceback" not in done.stderr


def test_a_port_in_use_is_refused_with_a_usage_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = run_cli("serve", "idle", "--port", str(port))
    assert done.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in done.stderr


@pytest.mark.parametrize("profile", [pytest.param("sglang", id="sglang"), pytest.param("tgi", id="tgi")])
def test_serve_with_another_engines_profile_scrapes_as_that_engine(profile: str) -> None:
    with ServeProcess("step-time-sharing", speed=20, extra_args=["--profile", profile]) as server:
        httpx.post(server.url + "/v1/completions", timeout=30, json={"model": MODEL, "prompt": "hi", "max_tokens": 4})
        time.sleep(0.5)
        response = httpx.get(server.url + "/metrics", timeout=10)
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    recording = parse_scrape(response.text, scrape_time=time.time())
    names = {k.name for e in recording.endpoints for k in e.keys}
    detection = detect_profile(names)
    assert detection is not None and detection.profile.name == profile, (detection, sorted(names)[:10])
    offline = simulate("step-time-sharing", duration_seconds=60, profile=profile).recording
    served = {s.name for f in text_string_to_metric_families(response.text) for s in f.samples}
    recorded = {k.name for k in offline.endpoints[0].keys if k.name != "up"}
    assert served == recorded
    assert all(not n.startswith(("radiance:", "vllm:")) for n in served)
