"""The vLLM live experiment: vLLM under a known load, a real Prometheus, the census, the client truth.

:class:`VllmLive` holds one vLLM server (:mod:`.vllm_server`) and one Debian ``prometheus`` scraping
its ``/metrics`` every ``scrape_interval`` under ``job="vllm"`` on loopback; :meth:`VllmLive.run`
drives one load (:mod:`.vllm_load`) and can be called again on the same server (the live test runs
two scenarios on one start-up). Each run:

1. drives the load, then waits two more scrapes; where Prometheus stored no scrape at all (not
   even ``up``) for more than 5 intervals of the window, the load runs once more and the
   discarded attempt is kept as ``discarded-attempt-1.json`` (the retry sends fresh prompt ids,
   :func:`pdcensus.engine.experiment.retry_seed`: the prefix cache holds the first attempt's);
2. measures the client truth (:mod:`.truth`, :mod:`.stalls`) over the window from the moment every
   decoding stream had its first token (with no prompt phases: any stream) to the load's end;
3. runs the census through the Prometheus HTTP API over that window (the same call as
   ``pdcensus census --prometheus URL --selector '{job="vllm"}' --start .. --end ..``);
4. writes every file to its folder: ``plan.json``, ``server_args.json``, ``cmdline`` (vLLM's argv,
   NUL-separated, from ``/proc/PID/cmdline``), ``requests.jsonl`` (per-token client times),
   ``truth.json`` (with ``host``: a host-stall probe's stalls over the window and how many of the
   clients' gaps over 1 s they hold, :mod:`.host_probe`; its lines in ``host_stalls.jsonl``),
   ``census.json``, ``report.md``, ``window.json`` (the window, and the
   ``pdcensus census metrics.om --start .. --end ..`` line that reruns the census offline, to the
   same answer), ``metrics.om`` (every series Prometheus stored for the job over the window) and ``vllm.log`` (the server's log so far).

Both processes are stopped by their own pids (vLLM by its process group) when the block ends.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType

import httpx

from pdcensus.census.model import CensusReport
from pdcensus.engine.experiment import LOAD_ATTEMPTS, _proc_cmdline, retry_seed, scrape_gap_discards, window_start
from pdcensus.engine.host_probe import HOST_STALLS, HostProbe, decode_gaps, host_stalls, read_stalls
from pdcensus.engine.stalls import Stalls, measure_stalls
from pdcensus.engine.streams import RequestRecord, records_to_jsonl
from pdcensus.engine.truth import Truth, acting_truth, measure_truth
from pdcensus.engine.vllm_load import VllmPlan, run_vllm_load
from pdcensus.engine.vllm_server import VllmPython, VllmServer, locate_vllm_python
from pdcensus.errors import SourceUnreachableError
from pdcensus.series.durations import parse_api_duration_seconds
from pdcensus.sources.prometheus_local import LocalPrometheus

JOB = "vllm"
SELECTOR = '{job="vllm"}'
FIRST_SCRAPE_TIMEOUT_SECONDS = 90.0


@dataclass(frozen=True)
class VllmRun:
    """What one load on the server measured and where its files are."""

    out: Path
    plan: VllmPlan
    server_argv: tuple[str, ...]
    prometheus_url: str
    start: float
    end: float
    truth: Truth
    stalls: Stalls
    report: CensusReport


def _wait_first_scrape(prometheus: str) -> None:
    deadline = time.monotonic() + FIRST_SCRAPE_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        try:
            answer = httpx.get(f"{prometheus}/api/v1/query", params={"query": f'up{{job="{JOB}"}}'}, timeout=5).json()
        except (httpx.HTTPError, ValueError):
            answer = {}
        result = answer.get("data", {}).get("result", [])
        if result and result[0]["value"][1] == "1":
            return
        time.sleep(0.5)
    raise SourceUnreachableError(f"prometheus at {prometheus} never scraped vllm")


class VllmLive:
    """vLLM plus a Prometheus scraping it (a context manager); :meth:`run` is one scenario's load."""

    def __init__(self, out: Path, server_args: Sequence[str], *, python: VllmPython | None = None,
                 scrape_interval: str = "1s") -> None:
        self.out = out
        self.server_args = tuple(server_args)
        self.python = python or locate_vllm_python()
        self.scrape_interval = scrape_interval
        self.server = VllmServer(self.python, self.server_args, out)
        self.prometheus: LocalPrometheus | None = None

    def __enter__(self) -> VllmLive:
        self.out.mkdir(parents=True, exist_ok=True)
        self.server.start()
        try:
            target = self.server.url.removeprefix("http://")
            self.prometheus = LocalPrometheus.scraping([target], self.out / "prometheus", job=JOB,
                                                       scrape_interval=self.scrape_interval).start()
            _wait_first_scrape(self.prometheus.url)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self.prometheus is not None:
            self.prometheus.stop()
        self.server.stop()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _cores(self) -> dict[str, object]:
        cores = self.server.engine_cores
        return {"engine_cores": sorted(cores) if cores is not None else "all",
                "engine_threads_pinned": self.server.pinned_threads}

    def _drive(self, plan: VllmPlan, interval: float) -> tuple[float, list[RequestRecord], float, float]:
        """One load; returns ``(t0, records, start, end)`` once Prometheus has had time to scrape its end."""
        t0, records = asyncio.run(run_vllm_load(self.server.url, plan))
        self.server.alive_or_raise()
        # with prompt phases, from when every decoder streams (the llama.cpp experiment's window); without,
        # the streams queue for a cache too small for all of them: from the first token any stream got
        firsts = [r.token_times[0] for r in records if r.kind == "decode" and r.token_times]
        start = window_start(records, t0) if plan.phases or not firsts else min(firsts)
        end = t0 + plan.duration_seconds
        time.sleep(max(0.0, end + 2.5 * interval - time.time()))
        return t0, records, start, end

    def run(self, out: Path, plan: VllmPlan) -> VllmRun:
        """Drive ``plan``, measure the truth, census it through Prometheus, write the files to ``out``."""
        from pdcensus.api import census_prometheus

        assert self.prometheus is not None, "VllmLive.run outside its with-block"
        out.mkdir(parents=True, exist_ok=True)
        (out / "plan.json").write_text(json.dumps(plan.to_dict(), indent=2) + "\n")
        (out / "server_args.json").write_text(json.dumps(list(self.server_args)) + "\n")
        (out / "cmdline").write_bytes(_proc_cmdline(self.server.pid) or "\0".join(self.server.argv).encode())
        interval = parse_api_duration_seconds(self.scrape_interval.strip())
        with HostProbe(out / HOST_STALLS):  # did the host, not the engine, hold the clients up (host_probe)
            for attempt in range(1, LOAD_ATTEMPTS + 1):
                t0, records, start, end = self._drive(replace(plan, seed=retry_seed(plan.seed, attempt)), interval)
                if not scrape_gap_discards(out, self.prometheus, JOB, attempt, start, end, interval):
                    break
        (out / "requests.jsonl").write_text(records_to_jsonl(records))
        truth, stalls = measure_truth(records, start, end), measure_stalls(records, start, end)
        acting = acting_truth(records, start, end)  # each prompt's window from when its prefill began
        host = host_stalls(read_stalls(out / HOST_STALLS), decode_gaps(records), start, end)
        (out / "truth.json").write_text(json.dumps({**truth.to_dict(), "stalls": stalls.to_dict(),
                                                    "acting": acting.to_dict(),
                                                    "host": {**host.to_dict(), **self._cores()}},
                                                   indent=2, allow_nan=True) + "\n")
        offline = ["pdcensus", "census", str(out / "metrics.om"), "--start", repr(start), "--end", repr(end)]
        (out / "window.json").write_text(json.dumps({"t0": t0, "start": start, "end": end, "attempt": attempt,
                                                     "seed": retry_seed(plan.seed, attempt),
                                                     "offline_census": offline}) + "\n")
        url = self.prometheus.url
        _write_recording(out, url, start, end)
        reports = census_prometheus(url, selector=SELECTOR, start=start, end=end)
        _write_census(out, reports)
        if self.server.log_path.parent != out:
            shutil.copyfile(self.server.log_path, out / "vllm.log")
        return VllmRun(out, plan, tuple(self.server.argv), url, start, end, truth, stalls, reports[0])


def _write_recording(out: Path, prometheus: str, start: float, end: float) -> None:
    """Every series of the job over the window (a little before it: counters need a first sample)."""
    from pdcensus.sources.openmetrics_writer import write_openmetrics
    from pdcensus.sources.prometheus import fetch_recording

    recording, _ = fetch_recording(prometheus, selector=SELECTOR, start=start - 5.0, end=end, names=None)
    write_openmetrics(recording, out / "metrics.om")


def _write_census(out: Path, reports: Sequence[CensusReport]) -> None:
    from pdcensus.census.model import reports_to_dict
    from pdcensus.report.markdown import write_markdown

    (out / "census.json").write_text(json.dumps(reports_to_dict(list(reports)), indent=2, allow_nan=True) + "\n")
    write_markdown(list(reports), out / "report.md")
