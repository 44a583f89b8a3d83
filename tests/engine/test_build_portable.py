"""The engine extra's llama.cpp is built for a fixed x86-64 baseline, not for the build host's CPU.

A native build (GGML_NATIVE, llama.cpp's default) on a CPU that claims AVX-512 and AMX died with
SIGILL at start inside a VM that does not enable AMX tile state. scripts/build-engine builds with
GGML_NATIVE=OFF and AVX2/FMA/F16C; this test disassembles the installed CPU backend and fails on
any AVX-512 register (zmm) or AMX tile instruction, whatever this host's own CPU supports.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pdcensus.engine.locate import EngineMissingError, locate_server


def _cpu_backend() -> Path:
    try:
        server, _version, _backend = locate_server()
    except EngineMissingError as exc:
        pytest.skip(f"the engine extra is not installed: {exc}")
    libs = sorted(server.parent.glob("libggml-cpu*.so*"))
    if not libs:
        pytest.skip(f"no libggml-cpu beside {server} (a static build?)")
    return libs[0]


def test_the_cpu_backend_has_no_avx512_or_amx_instructions() -> None:
    if shutil.which("objdump") is None:
        pytest.skip("objdump is not installed (Debian package binutils, which g++ brings)")
    lib = _cpu_backend()
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True,
                          check=True).stdout
    assert "ymm" in text, f"{lib}: no AVX2 code at all: not the AVX2 baseline build"
    zmm = sum(1 for line in text.splitlines() if "%zmm" in line)
    amx = sum(1 for line in text.splitlines() if any(op in line for op in ("tileloadd", "tdpbssd", "tdpbf16ps", "ldtilecfg")))
    assert zmm == 0 and amx == 0, (f"{lib} uses {zmm} AVX-512 and {amx} AMX instructions: a native build; "
                                   "rebuild with scripts/build-engine")
