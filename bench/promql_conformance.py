"""PromQL conformance: run Prometheus's own test scripts against pdcensus's evaluator.

Every ``eval`` case of every ``*.test`` file in DIR is evaluated and judged ``passed``
(same series, values equal within promqltest's 1e-6 relative tolerance), ``failed``, or
``unsupported`` (a construct or native histogram data outside our subset, refused by
name). The semantics (2 = Prometheus 2.x rules, 3 = 3.x) follow the directory name
(``v2.*`` -> 2) unless ``--semantics`` is given. Usage::

    .venv/bin/python bench/promql_conformance.py ../shared/realdata/promql-tests/v3.9
    .venv/bin/python bench/promql_conformance.py ../shared/realdata/promql-tests/v2.42 -v --per-file
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from pdcensus.series.promql.conformance import Verdict, run_directory, semantics_for, tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, help="directory of Prometheus *.test scripts")
    parser.add_argument("--semantics", type=int, choices=(2, 3), default=None,
                        help="2 or 3 (default: from the directory name)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every failed case")
    parser.add_argument("--per-file", action="store_true", help="print the counts of each file")
    parser.add_argument("--unsupported", action="store_true", help="print why cases were unsupported")
    args = parser.parse_args(argv)
    if not args.directory.is_dir():
        print(f"error: {args.directory} is not a directory", file=sys.stderr)
        return 2
    semantics = args.semantics if args.semantics is not None else semantics_for(args.directory)
    started = time.perf_counter()
    results = run_directory(args.directory, semantics)
    elapsed = time.perf_counter() - started
    if args.per_file:
        by_file = defaultdict(list)
        for result in results:
            by_file[Path(result.path).name].append(result)
        for name, cases in sorted(by_file.items()):
            counts = tally(cases)
            print(f"{name}: {counts[Verdict.PASSED]} passed, {counts[Verdict.FAILED]} failed, "
                  f"{counts[Verdict.UNSUPPORTED]} unsupported")
    if args.verbose:
        for result in results:
            if result.verdict is Verdict.FAILED:
                print(f"FAILED {result.path}:{result.line}: {result.expr} -- {result.message}")
    if args.unsupported:
        reasons = Counter(r.message.split(";")[0] for r in results if r.verdict is Verdict.UNSUPPORTED)
        for reason, count in reasons.most_common():
            print(f"{count:4d} {reason}")
    counts = tally(results)
    print(f"conformance: {counts[Verdict.PASSED]} passed, {counts[Verdict.FAILED]} failed, "
          f"{counts[Verdict.UNSUPPORTED]} unsupported (semantics {semantics}, {elapsed:.2f} s)")
    return 1 if counts[Verdict.FAILED] else 0


if __name__ == "__main__":
    raise SystemExit(main())
