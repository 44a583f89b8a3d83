"""Time is checked (issue #25, item 4): damaged timestamps and lying series, end to end.

One simulated step-time-sharing recording (4 h, 15 s scrapes) is censused untouched, then
with its timestamps or series damaged the way real stores damage them:

- a 10 h clock jump in the middle, and a 2 h store outage: the window splits at the break
  and the census keeps the mechanism, with the untouched share inside the damaged run's
  bootstrap interval (before: 0.048 with a 13x wider interval for the jump);
- every interval scaled by 1e6 (a 173-day "scrape"): refused with a named reason, exit 3,
  never a confident ``none`` (before: ``none`` at 0.6);
- timestamps around 1e15, and one family in milliseconds: refused, exit 3, naming the
  sample names and saying nothing was converted or dropped;
- a stuck gauge, a non-monotonic histogram, a one-scrape counter dip: each a named trap.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

DEADLINE_SECONDS = 120  # a hang guard, not a performance target


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True,
                          timeout=DEADLINE_SECONDS, check=False)


def _census(path: Path) -> tuple[int, dict[str, Any] | None, str]:
    done = _cli("census", str(path), "--json")
    return done.returncode, (json.loads(done.stdout) if done.returncode == 0 else None), done.stderr


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("time-checked") / "sim"
    done = _cli("sim", "step-time-sharing", "--out", str(out), "--duration", "4h")
    assert done.returncode == 0, done.stderr
    return out / "metrics.om"


@pytest.fixture(scope="module")
def untouched(recording: Path) -> dict[str, Any]:
    rc, report, err = _census(recording)
    assert rc == 0 and report is not None, err
    return report


Line = tuple[str, str, float]  # (family, sample text before the timestamp, timestamp)


def _rewrite(src: Path, dst: Path, edit: Callable[[str, str, float, float], str | None]) -> Path:
    """Each sample line through ``edit(family, head, t, first_t)`` (None drops the line)."""
    lines = src.read_text().splitlines()
    first = min(float(x.rsplit(" ", 1)[1]) for x in lines if x and not x.startswith("#"))
    family, out = "", []
    for line in lines:
        if line.startswith("# TYPE"):
            family = line.split()[2]
        if not line or line.startswith("#"):
            out.append(line)
            continue
        head, t = line.rsplit(" ", 1)
        new = edit(family, head, float(t), first)
        if new is not None:
            out.append(new)
    dst.write_text("\n".join(out) + "\n")
    return dst


HOUR = 3600.0


def _jump(family: str, head: str, t: float, t0: float) -> str:
    return f"{head} {t + 10 * HOUR if t >= t0 + 2 * HOUR else t:.3f}"


def _outage(family: str, head: str, t: float, t0: float) -> str | None:
    return None if t0 + HOUR <= t < t0 + 3 * HOUR else f"{head} {t:.3f}"


def _spread(family: str, head: str, t: float, t0: float) -> str:
    return f"{head} {t0 + (t - t0) * 1e6:.3f}"


def _e15(family: str, head: str, t: float, t0: float) -> str:
    return f"{head} {t * 1e6:.3f}"


def _ms_family(family: str, head: str, t: float, t0: float) -> str:
    return f"{head} {int(t * 1000)}" if family == "radiance:prefill_tokens_per_second" else f"{head} {t:.3f}"


def _value(head: str) -> tuple[str, float]:
    name, value = head.rsplit(" ", 1)
    return name, float(value)


def _stuck(family: str, head: str, t: float, t0: float) -> str:
    name, _ = _value(head)
    return f"{name} 32.0 {t:.3f}" if family == "vllm:num_requests_running" else f"{head} {t:.3f}"


def _non_monotonic(family: str, head: str, t: float, t0: float) -> str:
    name, v = _value(head)
    if family == "vllm:inter_token_latency_seconds" and 'le="+Inf"' in name:
        return f"{name} {0.5 * v} {t:.3f}"
    return f"{head} {t:.3f}"


def _dip(family: str, head: str, t: float, t0: float) -> str:
    name, v = _value(head)
    if family == "vllm:generation_tokens" and t == t0 + 2 * HOUR:
        return f"{name} {0.5 * v} {t:.3f}"
    return f"{head} {t:.3f}"


def _share(report: dict[str, Any]) -> tuple[float, list[float]]:
    losses = report["losses"]
    return float(losses["step_time_sharing"]), [float(x) for x in losses["step_time_sharing_interval"]]


@pytest.mark.parametrize("edit", [_jump, _outage], ids=["10h-clock-jump", "2h-outage"])
def test_a_break_splits_the_window_and_keeps_the_share(recording: Path, untouched: dict[str, Any],
                                                        tmp_path: Path, edit: Callable[..., str | None]) -> None:
    rc, report, err = _census(_rewrite(recording, tmp_path / "broken.om", edit))
    assert rc == 0 and report is not None, err
    assert report["verdict"]["mechanism"] == untouched["verdict"]["mechanism"] == "step-time-sharing"
    starts = [seg["starts_because"] for seg in report["shape"]["segments"]]
    assert "clock-break" in starts
    reason = next(seg["reason"] for seg in report["shape"]["segments"] if seg["starts_because"] == "clock-break")
    assert "no interval across it is weighed" in reason
    base, _ = _share(untouched)
    point, (lo, hi) = _share(report)
    assert lo <= base <= hi, (base, point, lo, hi)
    assert abs(point - base) < 0.25 * base


def test_a_173_day_scrape_interval_is_refused_by_name(recording: Path, tmp_path: Path) -> None:
    rc, report, err = _census(_rewrite(recording, tmp_path / "spread.om", _spread))
    assert rc == 3 and report is None
    assert "scrape-interval-unreadable" in err and "173.6 d" in err


@pytest.mark.parametrize(("edit", "names"), [(_e15, "every sample"),
                                              (_ms_family, "1 of 24 sample names: radiance:prefill_tokens_per_second")],
                         ids=["timestamps-1e15", "one-family-in-ms"])
def test_timestamps_in_the_wrong_unit_are_refused_naming_the_family(recording: Path, tmp_path: Path,
                                                                   edit: Callable[..., str], names: str) -> None:
    rc, report, err = _census(_rewrite(recording, tmp_path / "units.om", edit))
    assert rc == 3 and report is None
    assert names in err and "Refused, not converted or dropped" in err
    assert re.search(r"units\.om:\d+: timestamp", err)


@pytest.mark.parametrize(("edit", "trap", "named"), [
    (_stuck, "stuck-gauge", "vllm:num_requests_running = 32"),
    (_non_monotonic, "non-monotonic-histogram", "vllm:inter_token_latency_seconds_bucket"),
    (_dip, "counter-dip", "vllm:generation_tokens_total 1x"),
], ids=["stuck-gauge", "non-monotonic-histogram", "counter-dip"])
def test_a_lying_series_is_a_named_trap(recording: Path, untouched: dict[str, Any], tmp_path: Path,
                                       edit: Callable[..., str], trap: str, named: str) -> None:
    assert not next(t for t in untouched["traps"] if t["name"] == trap)["fired"]
    rc, report, err = _census(_rewrite(recording, tmp_path / "lying.om", edit))
    assert rc == 0 and report is not None, err
    fired = next(t for t in report["traps"] if t["name"] == trap)
    assert fired["fired"] and named in fired["text"], fired
