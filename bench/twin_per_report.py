"""Time census --twin's check of three recommendations on one recording (BENCHMARKS.md, "One calibration per report").

Run: PYTHONPATH=src .venv/bin/python bench/twin_per_report.py DIR (a `pdcensus sim` output folder).
"""
import time, sys
from dataclasses import replace
from pdcensus import api
from pdcensus.whatif import advice_check
d = sys.argv[1]
report = api.census_all(d)[0]
rec = next(r for r in report.advice if not r.minor and r.knob.startswith("--"))
recs = tuple(replace(rec, value=str(int(rec.value) + i)) for i in range(3))
rec_ = api._recording(d + "/metrics.om")
t = time.perf_counter()
out = advice_check.check_report(rec_, replace(report, advice=recs), seeds=2)
print(f"{time.perf_counter() - t:.1f} s for 3 recommendations;", [r.twin.trust for r in out.advice])
