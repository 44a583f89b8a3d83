"""The census on real vLLM recordings (1 s polls, vLLM 0.15 / 0.19 under benchmark load), beside
what the clients felt.

For each ``*.om.gz`` under ``../shared/realdata/vllm-inferencex`` it prints the census verdict,
confidence, the prefill basis (``pdcensus.census.prefill_progress``), the guards
(``pdcensus.census.guards``) and the fired traps; where the harness's client records exist
(``*.client_requests.csv.gz``) it derives the client-side truth from those records alone,
apart from the census (:func:`client_truth`). Usage::

    python bench/vllm_realdata.py [--root ../shared/realdata/vllm-inferencex] [--markdown]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pdcensus.census.buckets import assign_buckets
from pdcensus.census.client_felt import ClientFelt, client_felt
from pdcensus.census.guards import Guards, shape_guards
from pdcensus.census.model import CensusReport
from pdcensus.census.run import census_recording, read_shape
from pdcensus.series.profiles import Signal
from pdcensus.sources.client_records import ClientRequest, load_client_records
from pdcensus.sources.load import load_source

ROOT = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata" / "vllm-inferencex"


@dataclass(frozen=True)
class ClientTruth:
    """What the client records alone say about decode while other sessions prefill."""

    requests: int
    sessions: int
    ttft_p50: float
    tpot_p50: float
    overlap_share: float  # share of decode time with another session's prefill window open
    decode_ratio: float  # per-stream decode rate with others prefilling all the time / never (weighted fit)
    decode_ratio_terciles: float  # rate of the top-tercile overlap requests / bottom tercile


def _open_share(starts: np.ndarray, ends: np.ndarray, a: float, b: float) -> float:
    """Share of [a, b] covered by the union of the intervals [starts, ends]."""
    if b <= a:
        return float("nan")
    m = (ends > a) & (starts < b)
    if not m.any():
        return 0.0
    s, e = np.clip(starts[m], a, b), np.clip(ends[m], a, b)
    order = np.argsort(s)
    covered, cur_s, cur_e = 0.0, s[order[0]], e[order[0]]
    for i in order[1:]:
        if s[i] > cur_e:
            covered += cur_e - cur_s
            cur_s, cur_e = s[i], e[i]
        else:
            cur_e = max(cur_e, e[i])
    covered += cur_e - cur_s
    return covered / (b - a)


def client_truth(reqs: list[ClientRequest]) -> ClientTruth:
    """Prefill windows (start to first token: queueing included, the records cannot split it) and
    per-request decode rates (1 / TPOT); overlap of each decode window with other sessions' prefill.
    """
    start = np.array([r.start for r in reqs])
    first = np.array([r.first_token for r in reqs])
    end = np.array([r.end for r in reqs])
    sess = np.array([r.session for r in reqs])
    tpot = np.array([r.tpot for r in reqs])
    outs = np.array([r.output_tokens for r in reqs], dtype=float)
    f = np.full(len(reqs), np.nan)
    for i in range(len(reqs)):
        if outs[i] > 1 and np.isfinite(tpot[i]) and tpot[i] > 0:
            other = sess != sess[i]
            f[i] = _open_share(start[other], first[other], first[i], end[i])
    ok = np.isfinite(f) & np.isfinite(tpot) & (tpot > 0)
    rate, w = 1.0 / tpot[ok], outs[ok] * tpot[ok]  # weight: decode seconds
    x = f[ok]
    ratio = terc = float("nan")
    if ok.sum() > 10 and np.ptp(x) > 0:
        slope, icpt = np.polyfit(x, rate, 1, w=np.sqrt(w))
        ratio = float((icpt + slope) / icpt) if icpt > 0 else float("nan")
        lo, hi = np.quantile(x, [1 / 3, 2 / 3])
        a, b = x <= lo, x >= hi
        if a.any() and b.any() and hi > lo:
            terc = float(np.average(rate[b], weights=w[b]) / np.average(rate[a], weights=w[a]))
    dec = np.where(ok, (end - first), 0.0)
    share = float(np.nansum(np.where(ok, f * dec, 0.0)) / dec.sum()) if dec.sum() > 0 else float("nan")
    return ClientTruth(len(reqs), len(set(sess)), float(np.nanmedian(first - start)), float(np.nanmedian(tpot)),
                       share, ratio, terc)


def run_one(path: Path) -> tuple[CensusReport, Guards, ClientTruth | None, ClientFelt | None, float]:
    t0 = time.perf_counter()
    rec = load_source(path)
    report = census_recording(rec)[0]
    s = read_shape(rec.endpoints[0], rec.families, str(path)).signals
    assert s.prefill_tokens_per_second is not None
    busy = assign_buckets(s.prefill_tokens_per_second).busy
    guards = shape_guards(s, busy)
    records = path.with_name(path.name.replace(".om.gz", ".client_requests.csv.gz"))
    truth = felt = None
    if records.exists():
        reqs = load_client_records(records)
        truth = client_truth(reqs)
        prompt = s.increase(Signal.PROMPT_TOKENS)
        felt = client_felt(reqs, s.times, prompt, busy) if prompt is not None else None
    return report, guards, truth, felt, time.perf_counter() - t0


def _fmt(x: float, spec: str = ".2f") -> str:
    return format(x, spec) if np.isfinite(x) else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=ROOT)
    args = ap.parse_args()
    paths = sorted(args.root.glob("*/*.om.gz"))
    if not paths:
        sys.exit(f"error: no *.om.gz under {args.root}")
    print("| run | verdict | conf | prefill basis | hidden prefill | computed share | sessions guard | max lag s "
          "| ramping | contrast>1 cause | traps fired | client: overlap | client: decode ratio (fit / terciles) "
          "| client TTFT p50 s | client TPOT p50 ms | felt: TPOT idle / busy bucket (n busy, n idle) |")
    print("|---" * 16 + "|")
    for path in paths:
        rep, g, truth, felt, secs = run_one(path)
        rec = load_source(path)
        p = read_shape(rec.endpoints[0], rec.families, str(path)).signals.prefill_progress
        traps = ", ".join(t.name for t in rep.traps if t.fired) or "-"
        c = g.contrast
        cause = c.cause.name if c is not None and c.cause.name != "NOT_ABOVE_ONE" else "-"
        if c is not None and cause != "-":
            cause += f" ({c.contrast:.2f}; gen x{c.generation_ratio:.2f}, batch x{c.batch_ratio:.2f})"
        basis = "-" if p is None else p.basis.name + (" (speed lower bound)" if p.speed_is_lower_bound else "")
        cells = [path.parent.name.split("-")[0] + "/" + path.name.removesuffix(".om.gz"), rep.verdict.mechanism.value,
                 f"{rep.verdict.confidence:.2f}", basis, _fmt(p.hidden_share) if p else "-",
                 _fmt(p.computed_share) + (f" ({p.computed_source.name})" if p else ""),
                 g.session.contrast.value, _fmt(g.window.max_tail_lag_seconds, ".0f"),
                 "yes" if g.window.still_ramping else "no", cause, traps]
        if truth is None:
            cells += ["-", "-", "-", "-"]
        else:
            cells += [_fmt(truth.overlap_share), f"{_fmt(truth.decode_ratio)} / {_fmt(truth.decode_ratio_terciles)}",
                      _fmt(truth.ttft_p50), _fmt(1e3 * truth.tpot_p50, ".1f")]
        cells.append("-" if felt is None else f"{_fmt(felt.tpot_ratio)} ({felt.decoded_busy.requests}, "
                     f"{felt.decoded_idle.requests})")
        print("| " + " | ".join(cells) + " |", flush=True)
        print(f"  ({secs:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
