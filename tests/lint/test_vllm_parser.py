"""Lint's verdict on vLLM argvs against vLLM's own parser, and the shipped data against a regeneration.

Needs a Python with vLLM 0.32.0 installed, found as the live experiment finds it
(``PDCENSUS_VLLM_PYTHON``, else ``.venv-vllm``, which ``make test`` installs; skipped otherwise):
the parser both serve commands build is built there (nothing is served) and asked, argv by argv,
whether it accepts it; lint must refuse exactly the argvs the parser refuses.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pdcensus.advice.model import Severity
from pdcensus.engine.vllm_server import VllmMissingError, locate_vllm_python
from pdcensus.lint.files import lint_paths

ROOT = Path(__file__).resolve().parents[2]


def _vllm_python() -> str:
    try:
        return str(locate_vllm_python(ROOT).python)
    except VllmMissingError:
        return ""


VLLM_PYTHON = _vllm_python()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not VLLM_PYTHON, reason="no Python with vLLM 0.32.0: scripts/install-vllm, "
                                 "or set PDCENSUS_VLLM_PYTHON")]

ARGVS = [
    "m", "m -tp 2", "m --tensor-parallel-size=2", "m --tensor_parallel_size 2", "m --max-num-batch-tokens 8192",
    "m --max-num-batched-tokens 16k", "m --max-num-batched-tokens 1.5K", "m --max-num-batched-tokens 1K",
    "m --no-enable-prefix-caching", "m --enable-prefix-caching=true", "m --enable-prefix-caching true",
    "m --no-enable-prefix-cach", "m --max-num-seq 8", "m --max-num 8", "m --port", "m --port --max-num-seqs 4",
    "m --port -1", "m --kv-cache-dtype fp9", "m --kv_cache_dtype=fp8", "m --max-model-len auto",
    "m --max-model-len 32k", "m --max-model-len -1", "m --gpu-memory-utilization high",
    "m --gpu-memory-utilization 0.9", "m -O3", "m -O 2", "m -O=1", "m --compilation-config.mode 3",
    "m --compilation_config.cudagraph_capture_sizes+ 1,2", "m --compilation-konfig.mode 3",
    "m --served-model-name a b", "m --max-num-seqs many", "m --tp 2", "m extra", "--model m --dtype half",
    "m --dtype halfish", "m --api-key", "m -asc 2", "m --enable_prefix_caching", "m --no-enable_prefix_caching",
]
_PROBE = """
import contextlib, io, json, sys
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
out = []
for argv in json.loads(sys.argv[1]):
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            parser.parse_args(argv)
        out.append(True)
    except (SystemExit, ValueError):
        out.append(False)
print("RESULT" + json.dumps(out))
"""


def _lint_refuses(tmp_path: Path, argv: str) -> bool:
    path = tmp_path / "s.sh"
    path.write_text(f"vllm serve {argv}\n", encoding="utf-8")
    return any(f.severity is Severity.ERROR for f in lint_paths([str(path)], None).findings)


def test_lint_refuses_exactly_what_vllms_parser_refuses(tmp_path: Path) -> None:
    split = [a.split() for a in ARGVS]
    run = subprocess.run([VLLM_PYTHON, "-c", _PROBE, json.dumps(split)], capture_output=True, text=True,
                         timeout=240, check=True)
    accepted = json.loads(run.stdout.rsplit("RESULT", 1)[1])
    assert not all(accepted) and any(accepted)  # the probe tells them apart
    wrong = [a for a, ok in zip(ARGVS, accepted) if _lint_refuses(tmp_path, a) == ok]
    assert wrong == []


def test_the_shipped_data_is_what_the_generator_reads_from_the_installed_parser(tmp_path: Path) -> None:
    out = tmp_path / "flags.json"
    subprocess.run([VLLM_PYTHON, str(ROOT / "scripts" / "gen_vllm_flags.py"), str(out)], capture_output=True,
                   timeout=240, check=True)
    fresh = json.loads(out.read_text(encoding="utf-8"))
    shipped = json.loads((ROOT / "src" / "pdcensus" / "data" / f"vllm-{fresh['version']}-flags.json")
                         .read_text(encoding="utf-8"))
    assert fresh == shipped
