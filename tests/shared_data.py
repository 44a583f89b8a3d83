"""Where the tests find the data the project shares rather than copies: ``../shared`` beside the repository.

Real metric dumps and Prometheus's own PromQL test scripts live once, in ``../shared/realdata``
(CI checks the repository out with ``shared/`` at the same relative path). The project's own
fixtures (``tests/fixtures/``) are the ones it wrote itself.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_REALDATA = REPO_ROOT.parent / "shared" / "realdata"
REAL_METRICS = SHARED_REALDATA / "metrics"  # real /metrics dumps of vLLM and SGLang builds (SOURCES.md)
PROMQL_TESTS = SHARED_REALDATA / "promql-tests"  # Prometheus's promql/promqltest/testdata, per version

if not REAL_METRICS.is_dir() or not PROMQL_TESTS.is_dir():
    raise RuntimeError(f"the shared test data is missing: expected {SHARED_REALDATA} beside the repository")
