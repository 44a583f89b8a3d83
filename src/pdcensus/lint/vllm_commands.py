"""Which shell commands are vLLM's server, and the ones lint skips on purpose, said as such.

The shell reader (:mod:`pdcensus.lint.shell_read`) hands these functions a command whose
program is ``vllm``, ``python -m MODULE``, a known serving engine, or a variable:

* ``vllm serve ...`` and ``python -m vllm.entrypoints.openai.api_server ...`` (also ``python -m
  vllm.entrypoints.cli.main serve``) are checked against the pinned vLLM flags data
  (:mod:`pdcensus.lint.vllm_argv`); both build the same parser (vLLM 0.32.0
  ``vllm/entrypoints/cli/serve.py`` ``subparser_init`` and
  ``vllm/entrypoints/launchers/api_server/entry.py`` ``main`` call ``make_arg_parser``);
* another ``vllm`` subcommand (``vllm bench``, ``vllm chat``), vLLM's demo server
  ``vllm.entrypoints.api_server`` (a different parser), and other engines (SGLang, TGI,
  llama.cpp's server, TensorRT-LLM, ...) are info findings ``command-not-checked``: a skipped
  command is said, never a silent ``0 finding(s)``;
* ``$ENGINE serve ...`` is resolved from the file's assignments (``ENGINE=vllm``);
* a word of a vLLM command holding a variable assigned nowhere in the file, or a command
  substitution, is said too: the flags it may hold are not checked.
"""

from __future__ import annotations

from collections.abc import Mapping

from typing import Protocol

from pdcensus.advice.model import Severity
from pdcensus.engines.vllm import CLI as VLLM_CLI
from pdcensus.lint.checks import Checker, FlagUse
from pdcensus.lint.shell import Arg
from pdcensus.lint.vllm import load_vllm_flags
from pdcensus.lint.vllm_argv import VllmArgv


class ShellReader(Protocol):
    """What these functions (and :mod:`pdcensus.lint.containers`) use of
    :class:`pdcensus.lint.shell_read.ShellReader` (a protocol: that module imports this one)."""

    checker: Checker

    @property
    def assignments(self) -> Mapping[str, object]: ...
    def command(self, args: list[Arg], env: list[FlagUse] | None = None) -> None: ...
    def image_argv(self, argv: list[Arg], env: list[FlagUse], image: str | None = None) -> None: ...
    def engine_argv(self, argv: list[Arg], env: list[FlagUse]) -> None: ...
    def assign(self, arg: Arg, env: list[FlagUse] | None) -> None: ...
    def known(self, argv: list[Arg]) -> bool: ...
    def flush_env(self, env: list[FlagUse]) -> None: ...
    def other(self, args: list[Arg]) -> None: ...
    def add_vllm(self, argv: list[Arg], form: str) -> None: ...
    def not_checked(self, at: Arg, why: str) -> None: ...
    def expand(self, arg: Arg) -> list[list[Arg]] | None: ...
    def flatten(self, argv: list[Arg]) -> list[Arg]: ...
    def references(self, arg: Arg) -> list[str]: ...

OTHER_ENGINES = frozenset({  # serving engines whose flags lint has no data for: said, not checked
    "text-generation-launcher", "llama-server", "trtllm-serve", "tritonserver", "lmdeploy", "sglang",
    "mistralrs-server", "aphrodite", "tabbyapi", "ollama", "lorax-launcher",
})
OTHER_ENGINE_MODULES = frozenset({"sglang.launch_server", "lmdeploy", "aphrodite.endpoints.openai.api_server",
                                  "llama_cpp.server", "tensorrt_llm.serve"})
API_SERVER = "vllm.entrypoints.openai.api_server"
VLLM_SUBCOMMANDS = frozenset({  # vLLM 0.32.0 vllm/entrypoints/cli/*.py, each CLISubcommand's name
    "chat", "complete", "bench", "collect-env", "run-batch", "launch", "render", "snapshot",
    "download-kernels", "preload",
})


def vllm_cli(reader: ShellReader, program: Arg, rest: list[Arg], env: list[FlagUse]) -> None:
    """``vllm serve ...`` is checked; another subcommand (``vllm bench``, ``vllm chat``) is said."""
    reader.flush_env(env)
    if rest and rest[0].value == "serve":
        reader.add_vllm(rest[1:], "vllm serve")
    elif rest and rest[0].value in VLLM_SUBCOMMANDS:
        reader.not_checked(program, f"`vllm {rest[0].value}` is not the server (only `vllm serve` is)")
        reader.other([program, *rest])
    else:
        reader.other([program, *rest])


def python_module(reader: ShellReader, module: str, program: Arg, rest: list[Arg], env: list[FlagUse]) -> None:
    """``python -m MODULE ...`` for a module other than radiance's."""
    reader.flush_env(env)
    if module == API_SERVER:
        reader.add_vllm(rest, f"python -m {API_SERVER}")
    elif module in {"vllm.entrypoints.cli.main", VLLM_CLI} and rest and rest[0].value == "serve":
        reader.add_vllm(rest[1:], f"python -m {module} serve")
    elif module.startswith("vllm.") or module in OTHER_ENGINE_MODULES:
        what = ("vLLM's demo server (another parser)" if module == "vllm.entrypoints.api_server" else
                "an engine whose flags lint does not know" if module in OTHER_ENGINE_MODULES else
                "not vLLM's server")
        reader.not_checked(program, f"python -m {module} is {what}")
        reader.other([program, *rest])
    else:
        reader.other([program, *rest])


def via_variable(reader: ShellReader, program: Arg, rest: list[Arg], env: list[FlagUse]) -> bool:
    """``$ENGINE serve ...`` with ``ENGINE=vllm`` (or a ``python -m vllm...`` value) assigned in the file."""
    alternatives = reader.expand(program)
    if not alternatives:
        return False
    hit = False
    for alt in alternatives:
        first = alt[0].value.rsplit("/", 1)[-1] if alt else ""
        if first == VLLM_CLI or (first.startswith("python") and any(a.value.startswith(VLLM_CLI) for a in alt[1:])):
            reader.command([*alt, *rest], list(env))
            hit = True
    return hit


def check_vllm(reader: ShellReader, argv: list[Arg], form: str) -> None:
    """Variables expanded (each assigned value in turn); a word holding one assigned nowhere is said."""
    for arg in argv:
        names = reader.references(arg)
        missing = [n for n in names if n not in reader.assignments]
        if arg.literal is None and (missing or "$(" in arg.raw or "`" in arg.raw):
            what = f"${missing[0]}" if missing else arg.raw
            reader.checker.add("command-not-checked", Severity.INFO, arg.at(), arg.raw,
                               f"{what} in this {form} command is not assigned in this file (or is computed "
                               "at run time): the flags it may hold are not checked", arg.conditional)
    VllmArgv(reader.checker, load_vllm_flags(), form).check(reader.flatten(argv))
