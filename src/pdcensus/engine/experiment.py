"""The live experiment: llama.cpp's server under a known load, a real Prometheus, the census, the truth.

One call, :func:`run_experiment`, does what a user would do by hand and keeps every file:

1. start ``llama-server`` with the model on 127.0.0.1 (its flags from ``server_args``);
2. start Debian's ``prometheus`` on 127.0.0.1 scraping its ``/metrics`` every ``scrape_interval``
   under ``job="llamacpp"``, and wait for the first good scrape;
3. size the long prompts with the server's tokenizer, then run the load (:mod:`.streams`):
   decoding streams all the time, long prompts in the scheduled phases;
4. wait two more scrapes, run the census through the Prometheus HTTP API, over the window from
   the moment every decoding stream had its first token to the load's end (the same call as
   ``pdcensus census --prometheus URL --selector '{job="llamacpp"}'``) and measure the client
   truth (:mod:`.truth`) over the same window; where Prometheus stored no scrape at all for
   over 5 intervals of the window (:func:`scrape_gap_discards`), the load runs once more first;
5. stop Prometheus and the server, each by its own pid.

Files in ``out``: ``server_args.json`` and ``cmdline`` (the server's argv, NUL-separated as in
``/proc/PID/cmdline``, read from there while it ran), ``plan.json``, ``requests.jsonl`` (client
records with per-token times), ``truth.json`` (with ``host``: a host-stall probe's stalls over the
window, :mod:`.host_probe`; its lines in ``host_stalls.jsonl``), ``metrics.om`` (the window as Prometheus stored
it), ``census.json``, ``report.md``, ``llama-server.log`` and ``prometheus/``.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from pdcensus.census.model import CensusReport
from pdcensus.engine.host_probe import HOST_STALLS, HostProbe, decode_gaps, host_stalls, read_stalls
from pdcensus.engine.llama_server import LlamaServer
from pdcensus.engine.locate import Engine, locate_engine
from pdcensus.engine.streams import LoadPlan, RequestRecord, records_to_jsonl, run_load, sized_prompts
from pdcensus.engine.truth import Truth, measure_truth
from pdcensus.errors import SourceUnreachableError
from pdcensus.series.durations import parse_api_duration_seconds
from pdcensus.sources.prometheus_local import LocalPrometheus

LOAD_ATTEMPTS = 2  # a load whose window Prometheus did not store runs once more
SCRAPE_GAP_LIMIT_SCRAPES = 5
JOB = "llamacpp"
SELECTOR = '{job="llamacpp"}'
# The configuration the issue describes a new user trying: 4 slots, 32k context, the defaults'
# -b 2048 / -ub 512, two threads, metrics on.
DEFAULT_SERVER_ARGS = ("-np", "4", "-c", "32768", "-b", "2048", "-ub", "512", "-t", "2")
FIRST_SCRAPE_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class ExperimentResult:
    """What one run measured and where its files are."""

    out: Path
    server_argv: tuple[str, ...]
    prometheus_url: str
    start: float
    end: float
    truth: Truth
    report: CensusReport


def _wait_first_scrape(prometheus: str, timeout_seconds: float = FIRST_SCRAPE_TIMEOUT_SECONDS) -> None:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        answer = httpx.get(f"{prometheus}/api/v1/query", params={"query": f'up{{job="{JOB}"}}'}, timeout=5).json()
        result = answer.get("data", {}).get("result", [])
        if result and result[0]["value"][1] == "1":
            return
        time.sleep(0.5)
    raise SourceUnreachableError(f"prometheus at {prometheus} never scraped llama-server")


def _proc_cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _write_census(out: Path, reports: Sequence[CensusReport], prometheus: str, start: float, end: float) -> None:
    from pdcensus.census.model import reports_to_dict
    from pdcensus.report.markdown import write_markdown
    from pdcensus.series.profiles import census_sample_names
    from pdcensus.sources.openmetrics_writer import write_openmetrics
    from pdcensus.sources.prometheus import fetch_recording

    (out / "census.json").write_text(json.dumps(reports_to_dict(list(reports)), indent=2, allow_nan=True) + "\n")
    write_markdown(list(reports), out / "report.md")
    recording, _ = fetch_recording(prometheus, selector=SELECTOR, start=start, end=end, names=census_sample_names())
    write_openmetrics(recording, out / "metrics.om")


def run_experiment(out: Path, plan: LoadPlan, *, server_args: Sequence[str] = DEFAULT_SERVER_ARGS,
                   scrape_interval: str = "1s", engine: Engine | None = None,
                   on_running: Callable[[LlamaServer], None] | None = None) -> ExperimentResult:
    """Run the load against a fresh server and census it through a fresh Prometheus (see module doc).

    ``on_running`` is called with the live server after the load (e.g. to read its argv with
    ``pdcensus verify-arm --pid``) before it is stopped.
    """
    from pdcensus.api import census_prometheus

    out.mkdir(parents=True, exist_ok=True)
    engine = engine or locate_engine()
    (out / "plan.json").write_text(json.dumps(plan.to_dict(), indent=2) + "\n")
    (out / "server_args.json").write_text(json.dumps(list(server_args)) + "\n")
    prompt_count = max(1, int(sum(b - a for a, b in plan.phases) / 2) + 2)
    with LlamaServer(engine, server_args, out / "llama-server.log") as server:
        (out / "cmdline").write_bytes(_proc_cmdline(server.pid) or "\0".join(server.argv).encode())
        prompts = asyncio.run(sized_prompts(server.url, prompt_count, plan.prompt_tokens, plan.seed))
        target = server.url.removeprefix("http://")
        with LocalPrometheus.scraping([target], out / "prometheus", job=JOB, scrape_interval=scrape_interval) as prom:
            _wait_first_scrape(prom.url)
            interval = parse_api_duration_seconds(scrape_interval.strip())
            with HostProbe(out / HOST_STALLS):  # did the host, not the engine, hold the clients up
                for attempt in range(1, LOAD_ATTEMPTS + 1):
                    if attempt > 1:  # fresh prompts: the server's prompt cache holds the discarded attempt's
                        prompts = asyncio.run(sized_prompts(server.url, prompt_count, plan.prompt_tokens,
                                                            retry_seed(plan.seed, attempt)))
                    t0, records = asyncio.run(run_load(server.url, plan, prompts))
                    start, end = window_start(records, t0), t0 + plan.duration_seconds
                    time.sleep(max(0.0, end + 2.5 * interval - time.time()))
                    if not scrape_gap_discards(out, prom, JOB, attempt, start, end, interval):
                        break
            (out / "requests.jsonl").write_text(records_to_jsonl(records))
            truth = measure_truth(records, start, end)
            host = host_stalls(read_stalls(out / HOST_STALLS), decode_gaps(records), start, end)
            (out / "truth.json").write_text(json.dumps({**truth.to_dict(), "host": host.to_dict()}, indent=2,
                                                       allow_nan=True) + "\n")
            reports = census_prometheus(prom.url, selector=SELECTOR, start=start, end=end)
            _write_census(out, reports, prom.url, start, end)
            if on_running is not None:
                on_running(server)
        argv = tuple(server.argv)
    return ExperimentResult(out, argv, prom.url, start, end, truth, reports[0])


def retry_seed(seed: int, attempt: int) -> int:
    """The load's seed on a retried attempt: new prompt ids, so that none hits the prefix or prompt cache the
    discarded attempt filled (a retried vLLM holdout-sharing run with the same ids served its 1,500-token
    prompts from the cache: TTFT p50 0.25 s against 2.47 s on a fresh server, and another clients' depth)."""
    return seed if attempt <= 1 else seed + 1_000_003 * (attempt - 1)


def scrape_gap_discards(out: Path, prom: LocalPrometheus, job: str, attempt: int, start: float, end: float,
                        interval: float) -> bool:
    """Whether the load's window is to be run again: Prometheus stored no scrape of ``job`` (not even
    ``up``) for over ``SCRAPE_GAP_LIMIT_SCRAPES`` intervals of it, and an attempt is left. The
    recording could not show what the clients felt; the discarded window is kept in
    ``discarded-attempt-N.json``. (A loaded CI machine once stored nothing for 63 s of a 75 s phase.)"""
    gap = prom.longest_scrape_gap(job, start, end)
    if gap <= max(SCRAPE_GAP_LIMIT_SCRAPES * interval, 5.0) or attempt >= LOAD_ATTEMPTS:
        return False
    note = {"attempt": attempt, "start": start, "end": end, "longest_scrape_gap_seconds": gap}
    (out / f"discarded-attempt-{attempt}.json").write_text(json.dumps(note) + "\n")
    print(f"{job} live: prometheus stored no scrape for {gap:.0f} s of the window; running the load again", flush=True)
    return True


def window_start(records: Sequence[RequestRecord], t0: float) -> float:
    """When every decoding stream had its first token: the census and the truth start there."""
    firsts: dict[int, float] = {}
    for r in records:
        if r.kind == "decode" and r.token_times:
            firsts[r.stream] = min(firsts.get(r.stream, math.inf), r.token_times[0])
    return max(firsts.values()) if firsts else t0

