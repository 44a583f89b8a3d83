"""A bench script imported by a test: the test asserts what the bench measures, on the same code path.

``bench/`` is not a package (each file is a script run by its path), so a test that reuses a
bench's fleet builder or reference reader loads the file by path, once per session.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_bench(stem: str) -> ModuleType:
    """``bench/<stem>.py`` as a module (cached in ``sys.modules`` under ``bench_<stem>``)."""
    name = f"bench_{stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{stem}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
