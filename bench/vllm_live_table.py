"""The live vLLM runs' table: each run's client truth beside today's census of its recording.

Reads the folders ``bench/vllm_live.py`` wrote (``truth.json``, ``window.json``, ``metrics.om``,
``cmdline``, ``server_args.json``) and censuses each recording offline over its window with its
argv, the same call as ``pdcensus census DIR/metrics.om --start .. --end .. --cmdline DIR/cmdline``,
so the table can be rebuilt after the census changes without rerunning vLLM::

    .venv/bin/python bench/vllm_live_table.py /tmp/vllm-live/*/

Columns: clients' depth (per-stream decode while a long prompt was pending / otherwise; and while it
acted, from when its prefill began as the decoders felt it, :func:`pdcensus.engine.truth.acting_truth`:
a prompt that waited for admission is pending while the decoders run at full pace), the decoders'
time lost to it (the same two ways; the census's depth and sharing loss are set against both), the
share of decoding time in gaps over 2 s, and in all gaps beyond 3x
the clients' clean gap (each gap's excess over it: every cause's slow time, stalls shorter than
2 s included), and the share of gaps under 1 ms (tokens the server wrote together: it lagged the engine, so
the clients' timing there is the server's), and the gaps over 1 s the clients saw beside the engine's own
(the inter-token histogram's, stamped by the engine core: clients' gaps the engine did not have are the
server's lag), and of the clients' ones those a host stall held (a probe process that only sleeps woke late
for at least half the gap, :mod:`pdcensus.engine.host_probe`; "-" for runs recorded before it); the census's
verdict and confidence, the depth it reports (the ``itl-depth`` evidence row: vLLM's inter-token histogram
over the spans that carried prefill) and its loss shares. Last line: calibration, the share of
verdicts at 0.7 or more whose headline is the run's cause (where the cause is none: that names
none, or finds only minor mechanisms, i.e. nothing to act on; a none run whose clients lost 5 % or
more to the prompts beside them is a sharing run).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from pdcensus.engine.streams import RequestRecord
from pdcensus.engine.truth import Truth, acting_truth

# the cause each run was built from (bench/vllm_live.py), the headline a right census gives
CAUSE = {"preemption": "preemption-stall", "blocks": "preemption-stall", "seqs": "preemption-stall", "none": "none",
         "holdout-preemption": "preemption-stall"}


MATERIAL_LOST = 0.05  # the census's material line: clients who lost this much to prompts felt sharing


def cause_of(name: str, preemptions: float, lost: float = math.nan) -> str:
    """The run's cause; a KV-cache run whose vLLM counted no preemption (the cache was large enough) has none, and
    a run built as none whose clients lost a material share to the prompts pending beside them (a host slow
    enough that 32-token prompts are chunk steps of their own: 0.48 on a 2-core AVX2 host) has sharing."""
    cause = next((v for k, v in CAUSE.items() if name.startswith(k)), "step-time-sharing")
    if cause == "none" and math.isfinite(lost) and lost >= MATERIAL_LOST:
        return "step-time-sharing"
    return "none" if cause == "preemption-stall" and preemptions == 0 else cause


def recensus(folder: Path) -> dict[str, Any]:
    """``pdcensus census`` on the run's recording over its window, with its argv, as JSON."""
    window = json.loads((folder / "window.json").read_text())
    argv = [sys.executable, "-m", "pdcensus", "census", str(folder / "metrics.om"), "--start", repr(window["start"]),
            "--end", repr(window["end"]), "--json"]
    if (folder / "cmdline").exists():
        argv += ["--cmdline", str(folder / "cmdline")]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 3):
        raise SystemExit(f"census of {folder} exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _f(x: Any, fmt: str = ".3f") -> str:
    return format(x, fmt) if isinstance(x, (int, float)) and math.isfinite(x) else "-"


READ_TOGETHER_SECONDS = 0.001  # two tokens of one stream this close reached the client in one read


def client_gaps(folder: Path, start: float, end: float) -> list[float]:
    """The decoders' inter-token gaps the clients saw, ending inside the window."""
    gaps = []
    for line in (folder / "requests.jsonl").read_text().splitlines():
        r = json.loads(line)
        t = r.get("token_times") or []
        if r.get("kind") == "decode" and len(t) > 1:
            gaps += [b - a for a, b in zip(t, t[1:]) if start < b <= end]
    return gaps


def read_together(gaps: list[float]) -> float:
    """Share of the clients' gaps under ``READ_TOGETHER_SECONDS``: tokens the server sent in one write (it lagged
    the engine). Where it is large the clients' per-token timing is the server's, not the engine's."""
    return sum(g < READ_TOGETHER_SECONDS for g in gaps) / len(gaps) if gaps else math.nan


def engine_gaps_over(folder: Path, start: float, end: float, bound: str = "1.0") -> float:
    """The engine's own inter-token gaps over ``bound`` seconds in the window: the increase of
    ``vllm:inter_token_latency_seconds`` (engine-core step timestamps) above that bucket, from the recording."""
    family = "vllm:inter_token_latency_seconds_bucket{"
    at: dict[str, list[tuple[float, float]]] = {bound: [], "+Inf": []}
    for line in (folder / "metrics.om").read_text().splitlines():
        if not line.startswith(family):
            continue
        le = line.split('le="', 1)[1].split('"', 1)[0]
        if le in at:
            value, stamp = line.rsplit(" ", 2)[-2:]
            at[le].append((float(stamp), float(value)))

    def over(t: float) -> float:
        seen = {le: [v for ts, v in rows if ts <= t] for le, rows in at.items()}
        return seen["+Inf"][-1] - seen[bound][-1] if seen["+Inf"] and seen[bound] else math.nan

    return over(end) - over(start)


def beyond_clean(gaps: list[float], clean_rate: float) -> float:
    """Share of the decoders' inter-token time beyond 3x their clean gap, from the client records alone: the
    mean gap outside prompt windows (1 / the per-stream rate there), else the median gap (a stream may
    deliver several tokens in one read, so the median alone can be a read's spacing, not a step's)."""
    if not gaps:
        return math.nan
    clean = 1.0 / clean_rate if math.isfinite(clean_rate) and clean_rate > 0 else statistics.median(gaps)
    return sum(max(0.0, g - 3 * clean) for g in gaps) / sum(gaps)


def _rate(truth: dict[str, Any]) -> float:
    rate = truth.get("outside", {}).get("per_stream_tokens_per_second")
    return float(rate) if isinstance(rate, (int, float)) else math.nan


def acting(folder: Path, start: float, end: float) -> Truth:
    """The clients' truth with each prompt's window from when its prefill began as the decoders felt it."""
    records = [RequestRecord(**json.loads(line)) for line in (folder / "requests.jsonl").read_text().splitlines()]
    return acting_truth(records, start, end)


def row(folder: Path) -> tuple[str, float, bool]:
    """The table's line, the confidence, whether the headline is the run's cause."""
    truth = json.loads((folder / "truth.json").read_text())
    c = recensus(folder)
    v, losses = c["verdict"], c["losses"]
    itl = next((e["value"] for e in v["evidence"] if e["rule"] == "itl-depth"), None)
    flags = " ".join(json.loads((folder / "server_args.json").read_text()))
    act = acting(folder, truth["start"], truth["end"])
    pending = truth.get("ratio")
    depth, felt = act.ratio, itl
    gaps = client_gaps(folder, truth["start"], truth["end"])
    off = " / ".join(f"{(felt / d - 1):+.0%}" if isinstance(felt, float) and isinstance(d, float) and d > 0
                     and math.isfinite(felt) and math.isfinite(d) else "-" for d in (pending, depth))
    lost_share = truth.get("decode_time_lost_share")
    cause = cause_of(folder.name, c["preemption"]["total"],
                     float(lost_share) if isinstance(lost_share, (int, float)) else math.nan)
    # where the cause is none, a verdict that finds only minor mechanisms (nothing to act on) is right too
    right = v["mechanism"] == cause or (cause == "none" and all(f["severity"] == "minor" for f in v["found"]))
    lost, sharing = act.decode_time_lost_share, losses["step_time_sharing"]
    loss_off = (" (" + " / ".join(f"{sharing / x - 1:+.0%}" for x in (lost_share, lost)) + ")"
                if all(isinstance(x, float) and math.isfinite(x) and x > 0 for x in (lost_share, lost))
                and isinstance(sharing, float) and math.isfinite(sharing) else "")
    line = (f"| {folder.name} | {flags} | {_f(pending)} / {_f(depth)} | {_f(lost_share)} / {_f(lost)} | "
            f"{_f(truth['stalls']['stalled_share'])} | {_f(beyond_clean(gaps, _rate(truth)))} | {_f(read_together(gaps))} | "
            f"{sum(g > 1.0 for g in gaps)} / {_f(engine_gaps_over(folder, truth['start'], truth['end']), '.0f')} / "
            f"{truth['host']['client_gaps_in_host_stalls'] if 'host' in truth else '-'} | "
            f"{v['mechanism']} {v['confidence']:.2f} | {_f(felt)} ({off}) | "
            f"{_f(sharing)}{loss_off} / {_f(losses['preemption_stall'])} / {_f(losses['eviction'])} |")
    return line, float(v["confidence"]), right


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    opts = parser.parse_args()
    print("| run | flags | clients: depth, pending / acting | clients: lost, pending / acting | clients: stalled | clients: beyond 3x clean gap | "
          "clients: read together | gaps over 1 s: clients / engine / in host stalls | census verdict, confidence | census depth (ITL; vs clients pending / acting) | "
          "census loss: sharing (vs clients' lost pending / acting) / preemption / eviction |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    sure = right = 0
    for folder in opts.folders:
        if not (folder / "truth.json").exists():
            print(f"skipped {folder}: no truth.json (an unfinished run)", file=sys.stderr)
            continue
        line, confidence, ok = row(folder)
        print(line)
        sure += confidence >= 0.7
        right += confidence >= 0.7 and ok
    print(f"\ncalibration: {right} of {sure} verdicts at 0.7 or more name the run's cause")
    return 0


if __name__ == "__main__":
    sys.exit(main())
