"""Random samples deleted from whole recordings: does the census keep its headline? (RELIABILITY.md, "Gaps in series")

For each recording: the untouched census's mechanism, confidence and that mechanism's loss share
with its 90 % interval; then, per draw, every sample of every series (``up`` included; the first
and last scrape kept) deleted independently with probability ``--share`` (``numpy`` generator
seeded 0..draws-1), and the census again. A draw is kept when the mechanism is the untouched one
and its loss lies inside the untouched interval (``none`` and ``inconclusive`` have no loss: the
mechanism alone)::

    .venv/bin/python bench/gap_matrix.py --share 0.05 --draws 8 out-sts/metrics.om out-evict/metrics.om ...

Prints one line per draw and a summary line per recording (kept / draws with a mechanism, and any
other mechanism named at 0.7 or more).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from pdcensus import api
from pdcensus.census.model import CensusReport
from pdcensus.series.model import Endpoint, Recording
from pdcensus.sources.load import load_source


def without(recording: Recording, seed: int, share: float) -> Recording:
    ep = recording.endpoint()
    present = ep.present.copy()
    present[1:-1] &= np.random.default_rng(seed).random(present[1:-1].shape) >= share
    return Recording(recording.families, [Endpoint(job=ep.job, instance=ep.instance, timestamps=ep.timestamps,
                                                   keys=list(ep.keys), values=ep.values, present=present)],
                     recording.source)


def headline(report: CensusReport) -> tuple[str, float, float, tuple[float, float]]:
    v, losses = report.verdict, report.losses
    key = v.mechanism.value.replace("-", "_")
    if losses is None or not hasattr(losses, key):
        return v.mechanism.value, v.confidence, math.nan, (math.nan, math.nan)
    return v.mechanism.value, v.confidence, float(getattr(losses, key)), tuple(getattr(losses, key + "_interval"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recordings", nargs="+", type=Path)
    parser.add_argument("--share", type=float, default=0.05, help="probability each sample is deleted")
    parser.add_argument("--draws", type=int, default=8)
    opts = parser.parse_args()
    for path in opts.recordings:
        rec = load_source(path)
        mech, conf, loss, (low, high) = headline(api.census(rec, evidence=None))
        print(f"{path}: untouched {mech} {conf:.2f}, loss {loss:.3f} ({low:.3f}-{high:.3f})")
        kept = confident_other = 0
        for seed in range(opts.draws):
            m, c, got, _ = headline(api.census(without(rec, seed, opts.share), evidence=None))
            inside = m == mech and (math.isnan(loss) or low <= got <= high)  # none, inconclusive: no loss to hold
            kept += inside
            confident_other += m != mech and c >= 0.7
            print(f"  draw {seed}: {m} {c:.2f}, loss {got:.3f}{'' if inside else '  <- moved'}")
        print(f"  kept {kept} of {opts.draws}; another mechanism at 0.7 or more: {confident_other}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
