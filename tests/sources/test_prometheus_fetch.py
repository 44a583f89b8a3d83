"""fetch_recording against an in-memory Prometheus API (httpx.MockTransport) and its faults.

The fake answers the calls fetch_recording makes (series, count_over_time, range
selectors with 2.x closed-range semantics, query_range, metadata) from a table of raw
samples; the faults are injected around it. The real-server equivalents live in
tests/integration/test_prometheus_source.py and tests/sources/test_prometheus_auth.py.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from urllib.parse import parse_qs

import httpx
import numpy as np
import promql_parser
import pytest

from pdcensus.errors import DataError, SourceUnreachableError, UsageError
from pdcensus.sources.prometheus import FetchMode, fetch_recording, instant_query_api, selector_matchers
from pdcensus.sources.prometheus_http import RetryPolicy
from pdcensus.sources.prometheus_local import free_port

FAST = RetryPolicy(attempts=3, base_delay_seconds=0.001, max_delay_seconds=0.002)
T0 = 1_700_000_000.0
Labels = tuple[tuple[str, str], ...]


def make_store(n: int = 200, interval: float = 15.0) -> dict[Labels, list[tuple[float, float]]]:
    rng = np.random.default_rng(7)
    store: dict[Labels, list[tuple[float, float]]] = {}
    for inst in ("a:1", "b:2"):
        ts = T0 + np.arange(n) * interval + rng.integers(0, 500, n) / 1000
        base = {"job": "radiance", "instance": inst}
        for name, vals in (
            ("up", np.ones(n)),
            ("radiance:engine_steps_total", np.cumsum(rng.integers(1, 50, n)).astype(float)),
            ("radiance:decode_tokens_per_second", rng.random(n) * 100),
        ):
            labels = tuple(sorted({**base, "__name__": name}.items()))
            store[labels] = list(zip(ts.round(3).tolist(), vals.tolist()))
    return store


def _matches(labels: dict[str, str], sel: promql_parser.VectorSelector) -> bool:
    if sel.name and labels.get("__name__") != sel.name:
        return False
    for m in sel.matchers.matchers:
        value = labels.get(m.name, "")
        if m.op == promql_parser.MatchOp.Equal:
            ok = value == m.value
        elif m.op == promql_parser.MatchOp.NotEqual:
            ok = value != m.value
        elif m.op == promql_parser.MatchOp.Re:
            ok = re.fullmatch(m.value, value) is not None
        else:
            ok = re.fullmatch(m.value, value) is None
        if not ok:
            return False
    return True


class FakePrometheus:
    """Answers the HTTP API from ``store``; records every request it saw."""

    def __init__(self, store: dict[Labels, list[tuple[float, float]]], *, raw: bool = True) -> None:
        self.store = store
        self.raw = raw
        self.requests: list[httpx.Request] = []
        self.extra_warnings: list[str] = []

    def answer(self, data: object) -> httpx.Response:
        body: dict[str, object] = {"status": "success", "data": data}
        if self.extra_warnings:
            body["warnings"] = self.extra_warnings
        return httpx.Response(200, json=body)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        form = {k: v for k, v in parse_qs(request.content.decode()).items()} if request.content else {}
        form.update({k: request.url.params.get_list(k) for k in request.url.params})
        path = request.url.path
        if path == "/api/v1/series":
            sels = [promql_parser.parse(m) for m in form["match[]"]]
            return self.answer([dict(k) for k in self.store if any(_matches(dict(k), s) for s in sels)])
        if path == "/api/v1/metadata":
            return self.answer({"radiance:engine_steps_total": [{"type": "counter", "help": "steps", "unit": ""}]})
        if path == "/api/v1/query":
            return self.query(form["query"][0], float(form["time"][0]))
        if path == "/api/v1/query_range":
            return self.query_range(form["query"][0], *(float(form[k][0]) for k in ("start", "end", "step")))
        return httpx.Response(404)

    def window(self, sel: promql_parser.VectorSelector, lo: float, hi: float) -> list[tuple[dict[str, str], list]]:
        out = []
        for labels, points in self.store.items():
            if _matches(dict(labels), sel):
                out.append((dict(labels), [[t, repr(v)] for t, v in points if lo - 1e-9 <= t <= hi + 1e-9]))
        return out

    def query(self, expr: str, t: float) -> httpx.Response:
        count = re.fullmatch(r"max\(count_over_time\((.*)\)\)", expr)
        parsed = promql_parser.parse(count.group(1) if count else expr)
        if not isinstance(parsed, promql_parser.MatrixSelector):
            return httpx.Response(400, json={"status": "error", "errorType": "bad_data", "error": "unsupported"})
        if not self.raw and not count:
            return httpx.Response(400, json={"status": "error", "errorType": "bad_data",
                                             "error": "range vectors are not allowed here"})
        series = self.window(parsed.vector_selector, t - parsed.range.total_seconds(), t)
        if count:
            best = max((len(p) for _, p in series), default=0)
            return self.answer({"resultType": "vector", "result": [{"metric": {}, "value": [t, str(best)]}]})
        return self.answer({"resultType": "matrix", "result": [{"metric": m, "values": p} for m, p in series if p]})

    def query_range(self, expr: str, start: float, end: float, step: float) -> httpx.Response:
        sel = promql_parser.parse(expr)
        result = []
        for labels, points in self.window(sel, start - 300, end):
            values = []
            for k in range(int(round((end - start) / step)) + 1):
                at = start + k * step
                before = [p for p in points if at - 300 < p[0] <= at]
                if before:
                    values.append([at, before[-1][1]])
            if values:
                result.append({"metric": labels, "values": values})
        return self.answer({"resultType": "matrix", "result": result})


def fetch(handler: Callable[[httpx.Request], httpx.Response], **kwargs: object) -> tuple:
    kwargs.setdefault("start", T0 - 60)
    kwargs.setdefault("end", T0 + 200 * 15)
    kwargs.setdefault("retry", FAST)
    return fetch_recording("http://prom.test:9090", transport=httpx.MockTransport(handler), **kwargs)


def expected_samples(store: dict[Labels, list[tuple[float, float]]]) -> dict[tuple[str, Labels], list]:
    return {(dict(k)["__name__"], tuple(x for x in k if x[0] != "__name__")): v for k, v in store.items()}


def fetched_samples(rec) -> dict[tuple[str, Labels], list]:
    out = {}
    for ep in rec.endpoints:
        for key, ts, vals in ep.iter_series():
            out[(key.name, key.labels)] = list(zip(ts.tolist(), vals.tolist()))
    return out


def test_raw_samples_come_back_exactly_in_one_request_per_name_under_the_limit() -> None:
    store = make_store()
    fake = FakePrometheus(store)
    rec, warnings = fetch(fake)
    assert fetched_samples(rec) == expected_samples(store)
    assert warnings == []
    raw = [r for r in fake.requests if b"ms%5D" in r.content and b"count_over_time" not in r.content]
    assert len(raw) == 3  # up, steps, decode gauge: one sub-window each
    assert rec.type_of("radiance:engine_steps_total").value == "counter"
    assert sorted(rec.instances()) == ["a:1", "b:2"]


def test_a_window_over_the_point_limit_is_split_and_still_complete() -> None:
    store = make_store()
    fake = FakePrometheus(store)
    rec, _ = fetch(fake, max_points_per_series=30, names={"radiance:engine_steps_total"})
    raw = [r for r in fake.requests if b"ms%5D" in r.content and b"count_over_time" not in r.content]
    assert len(raw) >= 2 * 200 // 30  # two names (the one asked for and up), >= 7 windows each
    got = fetched_samples(rec)
    want = {k: v for k, v in expected_samples(store).items() if k[0] in ("up", "radiance:engine_steps_total")}
    assert got == want


def test_only_the_names_asked_for_and_up_are_pulled() -> None:
    rec, _ = fetch(FakePrometheus(make_store()), names={"radiance:decode_tokens_per_second"})
    assert {n for ep in rec.endpoints for n in ep.names()} == {"up", "radiance:decode_tokens_per_second"}


def test_a_server_refusing_raw_samples_falls_back_to_query_range_and_says_so() -> None:
    store = make_store()
    rec, warnings = fetch(FakePrometheus(store, raw=False))
    assert any("fell back to query_range" in w for w in warnings)
    assert any("resampled by query_range" in w for w in warnings)
    ep = rec.endpoint("a:1")
    assert ep.scrape_interval_seconds() <= 15.0
    key = ep.select("radiance:decode_tokens_per_second")[0]
    served = {v for k, p in store.items() for _, v in p
              if dict(k)["__name__"] == key.name and dict(k)["instance"] == "a:1"}
    assert set(ep.samples(key)[1].tolist()) == served  # every scrape seen, none invented


def test_an_explicit_fallback_step_is_used() -> None:
    rec, warnings = fetch(FakePrometheus(make_store(), raw=False), step_seconds=5.0)
    assert rec.endpoint("a:1").scrape_interval_seconds() == 5.0
    assert any("at a 5s step" in w for w in warnings)


def test_forced_raw_mode_does_not_fall_back() -> None:
    with pytest.raises(UsageError, match="range vectors are not allowed"):
        fetch(FakePrometheus(make_store(), raw=False), mode=FetchMode.RAW)


def test_5xx_answers_are_retried_until_the_server_recovers() -> None:
    fake = FakePrometheus(make_store())
    failures = {"left": 2}

    def flaky(request: httpx.Request) -> httpx.Response:
        if failures["left"]:
            failures["left"] -= 1
            return httpx.Response(503, json={"status": "error", "errorType": "unavailable", "error": "busy"})
        return fake(request)

    rec, _ = fetch(flaky)
    assert fetched_samples(rec) == expected_samples(fake.store)


def test_5xx_that_never_recovers_is_exit_4_naming_the_url_and_the_attempts() -> None:
    calls = []

    def down(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(502, text="bad gateway")

    with pytest.raises(SourceUnreachableError, match=r"http://prom.test:9090/api/v1/series: HTTP 502") as info:
        fetch(down)
    assert "after 3 attempts" in str(info.value)
    assert info.value.exit_code == 4 and len(calls) == 3


def test_truncated_json_is_a_clear_data_error() -> None:
    def truncated(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b'{"status":"success","data":[{"__name__":"up","jo')

    with pytest.raises(DataError, match=r"not valid JSON \(48 bytes, truncated\?\)"):
        fetch(truncated)


def test_a_thanos_partial_response_warning_reaches_the_caller() -> None:
    fake = FakePrometheus(make_store())
    fake.extra_warnings = ["partial response: store 10.0.0.7:10901 is unavailable"]
    rec, warnings = fetch(fake)
    assert rec.endpoints
    assert any("store 10.0.0.7:10901 is unavailable" in w for w in warnings)
    assert len(warnings) == len(set(warnings))


def test_an_empty_selector_result_lists_the_jobs_the_server_has() -> None:
    def empty(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/label/job/values":
            return httpx.Response(200, json={"status": "success", "data": ["node", "vllm"]})
        return httpx.Response(200, json={"status": "success", "data": []})

    with pytest.raises(DataError, match=r"no series match \{job=\"radiance\"\}.*jobs on this server: node, vllm"):
        fetch(empty)


def test_a_wrong_base_url_is_a_404_hint() -> None:
    with pytest.raises(SourceUnreachableError, match="no Prometheus HTTP API here"):
        fetch(lambda r: httpx.Response(404, text="not found"))



def test_an_unreachable_server_is_exit_4_with_its_url() -> None:
    port = free_port()
    with pytest.raises(SourceUnreachableError, match=rf"cannot reach http://127.0.0.1:{port}/api/v1/series") as info:
        fetch_recording(f"http://127.0.0.1:{port}", start=T0, end=T0 + 60, retry=FAST)
    assert info.value.exit_code == 4


@pytest.fixture
def slow_server() -> Iterator[str]:
    class Slow(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            time.sleep(1.0)
            self.send_response(200)
            self.end_headers()

        do_POST = do_GET  # noqa: N815

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.timeout(60)  # the error says the 0.2 s timeout fired; a hang is the harness's to stop, not a timed assert
def test_a_server_slower_than_the_timeout_is_a_clear_error(slow_server: str) -> None:
    with pytest.raises(SourceUnreachableError, match=r"no answer within 0.2s .*\(after 1 attempt\)"):
        fetch_recording(slow_server, start=T0, end=T0 + 60, timeout=0.2,
                        retry=RetryPolicy(attempts=2, base_delay_seconds=0.01))


@pytest.mark.parametrize(
    ("selector", "match"),
    [
        pytest.param("rate(x[5m])", "want label matchers only", id="function"),
        pytest.param('up{job="a"}', "want label matchers only", id="metric-name"),
        pytest.param('{job="a"} offset 5m', "want label matchers only", id="offset"),
        pytest.param('{job="a"', "bad selector", id="unclosed"),
        pytest.param('{__name__="up"}', "not __name__", id="name-matcher"),
    ],
)
def test_a_bad_selector_is_a_usage_error_quoting_it(selector: str, match: str) -> None:
    with pytest.raises(UsageError, match=match) as info:
        selector_matchers(selector)
    assert repr(selector) in str(info.value)


def test_selector_values_are_re_escaped() -> None:
    assert selector_matchers('{job="ra\\"d",instance=~"a.*"}') == 'job="ra\\"d",instance=~"a.*"'


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param({"start": T0, "end": T0}, "must end after it starts", id="empty-window"),
        pytest.param({"max_points_per_series": 1}, "at least 2", id="limit"),
        pytest.param({"concurrency": 0}, "concurrency", id="concurrency"),
        pytest.param({"selector": ""}, "refusing to pull everything", id="everything"),
    ],
)
def test_bad_fetch_arguments_are_usage_errors(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        fetch(FakePrometheus(make_store()), **kwargs)


def test_instant_query_api_returns_the_api_json_with_warnings() -> None:
    fake = FakePrometheus(make_store())
    fake.extra_warnings = ["partial response"]
    out = instant_query_api("http://prom.test:9090", 'up{instance="a:1"}[31s]', T0 + 30,
                            transport=httpx.MockTransport(fake))
    assert out["status"] == "success" and out["warnings"] == ["partial response"]
    assert out["data"]["resultType"] == "matrix"
    assert json.loads(json.dumps(out)) == out
