"""verify-arm's gate on simulator pairs: false alarms on seed noise, and what it says of real arms.

Noise: the same scenario and flags at two seeds (another day of the same load), compared as an arm
would be (every bucket's TTFT p50/p90/p99 and ITL p50/p99, no prediction, ``--tolerance`` 0.25):
any ``unpredicted-cost`` there is a false alarm. Arms: the step-time-sharing load at N = 0 against
``--prefill-interleave N`` (another seed), the preemption stall against ``--max-num-seqs 32``, the
eviction tail against ``--prefill-span 1`` with its one-interval budget; the outcome and the
comparisons that decided it. With ``--whatif``, each arm is judged a second time on the calibrated
twin's prediction (``pdcensus whatif BEFORE --set FLAG=VALUE --json``, 2 seeds, as
``verify-arm --whatif FILE`` reads it): the outcome, and how many of the first judgement's
unpredicted costs whatif predicted. Usage::

    python bench/verify_gate.py [--duration 7200] [--whatif]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from pdcensus.advice.evidence import read_argv
from pdcensus.sim.output import write_sim_dir
from pdcensus.sim.run import simulate
from pdcensus.sources.load import load_source
from pdcensus.verify import gate
from pdcensus.verify.arm import bucket_pair, read_window, verify_arm
from pdcensus.verify.arm_args import ARM_EXIT_CODES
from pdcensus.verify.model import ArmVerdict, CompareStatus
from pdcensus.whatif.run import what_if

NOISE = ("step-time-sharing", "healthy", "eviction-tail", "preemption-stall", "self-made-prefill", "protected")
ARMS = (
    ("step-time-sharing", {}, "--prefill-interleave", "1"),
    ("step-time-sharing", {}, "--prefill-interleave", "2"),
    ("step-time-sharing", {}, "--prefill-interleave", "3"),
    ("preemption-stall", {}, "--max-num-seqs", "32"),
    ("eviction-tail", {"--max-num-batched-tokens": "4096"}, "--prefill-span", "1"),
)


def noise_rows(duration: float) -> list[str]:
    rows = ["| scenario | seeds | comparisons decided | undecided | false alarms (cost or off) |",
            "|---|---|---|---|---|"]
    for name in NOISE:
        for a, b in ((1, 2), (2, 1)):
            before = read_window(simulate(name, duration_seconds=duration, seed=a).recording)
            after = read_window(simulate(name, duration_seconds=duration, seed=b).recording)
            pair = bucket_pair(before.signals, after.signals)
            cs = gate.compare_arm(before.signals, after.signals, pair.before_index, pair.after_index,
                                  tuple(r.bucket for r in pair.before.rows), None, float("nan"))
            undecided = sum(c.status is CompareStatus.UNDECIDED for c in cs)
            alarms = [gate.describe(c) for c in cs if c.status in (CompareStatus.COST, CompareStatus.OFF)]
            rows.append(f"| {name} | {a} -> {b} | {len(cs) - undecided} | {undecided} | "
                        f"{len(alarms)}{': ' + '; '.join(alarms) if alarms else ''} |")
    return rows


def _costs(v: ArmVerdict) -> set[tuple[str, str]]:
    return {(c.bucket, c.quantity) for c in v.comparisons if c.status is CompareStatus.COST}


def _with_whatif(before: Path, after: Path, flag: str, value: str, plain: ArmVerdict, root: Path) -> str:
    """The arm judged on whatif's prediction: the outcome, and the first judgement's costs it predicted."""
    result = what_if(load_source(before), [f"{flag}={value}"], seeds=2)
    path = root / f"{before.name}-whatif-{flag.strip('-')}-{value}.json"
    path.write_text(json.dumps(result.to_dict(), allow_nan=False, default=str))
    if result.refused:
        return f"whatif refused ({result.refused[:80]}): as without it"
    v = verify_arm(load_source(before), load_source(after), flag, value, read_argv(after), whatif=str(path))
    was = _costs(plain)
    told = sum(1 for c in v.comparisons if (c.bucket, c.quantity) in was and c.status is not CompareStatus.COST)
    off = [gate.describe(c) for c in v.comparisons if c.status in (CompareStatus.COST, CompareStatus.OFF)]
    return (f"{v.outcome.value} (exit {ARM_EXIT_CODES[v.outcome]}); whatif predicted {told} of {len(was)} cost(s)"
            + (f"; still off: {'; '.join(off)}" if off else ""))


def arm_rows(duration: float, root: Path, whatif: bool = False) -> list[str]:
    rows = ["| before | arm | outcome | exit | what decided it |" + (" with --whatif |" if whatif else ""),
            "|---|---|---|---|---|" + ("---|" if whatif else "")]
    for name, extra, flag, value in ARMS:
        before = write_sim_dir(simulate(name, duration_seconds=duration, seed=1), root / f"{name}-before")
        after = write_sim_dir(simulate(name, duration_seconds=duration, seed=2, overrides={**extra, flag: value}),
                              root / f"{name}-{flag.strip('-')}-{value}")
        v = verify_arm(load_source(before), load_source(after), flag, value, read_argv(after))
        decided = [gate.describe(c) for c in v.comparisons
                   if c.status in (CompareStatus.COST, CompareStatus.OFF) or (c.predicted and c.bucket == "busy")]
        rows.append(f"| {name} | {flag} {value} | {v.outcome.value} | {ARM_EXIT_CODES[v.outcome]} | "
                    f"{'; '.join(decided) if decided else v.reason} |"
                    + (f" {_with_whatif(before, after, flag, value, v, root)} |" if whatif else ""))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=7200.0)
    parser.add_argument("--whatif", action="store_true", help="judge each arm again on whatif's prediction")
    parser.add_argument("--arms-only", action="store_true", help="skip the noise pairs")
    args = parser.parse_args()
    t0 = time.perf_counter()
    if not args.arms_only:
        print("\n".join(noise_rows(args.duration)))
        print()
    with tempfile.TemporaryDirectory() as tmp:
        print("\n".join(arm_rows(args.duration, Path(tmp), args.whatif)))
    print(f"\n({time.perf_counter() - t0:.0f} s wall)")


if __name__ == "__main__":
    main()
