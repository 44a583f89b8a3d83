"""vLLM command lines checked against vLLM's own parser, as pinned flags data that ships with pdcensus.

``vllm serve MODEL ...`` and ``python -m vllm.entrypoints.openai.api_server ...`` are what vLLM
users deploy, and vLLM refuses an unknown flag at start-up (``unrecognized arguments``). The flags
are not remembered here: ``scripts/gen_vllm_flags.py`` read them out of the parser both commands
build (vLLM 0.32.0: ``vllm/entrypoints/launchers/cli_args.py`` ``make_arg_parser`` on a
``FlexibleArgumentParser``) into ``pdcensus/data/vllm-<version>-flags.json``; the finding names
that version.

An argv is read the way that parser reads it (vLLM 0.32.0 ``vllm/utils/argparse_utils.py``):

* ``FlexibleArgumentParser.parse_args`` (lines 336-370) rewrites, in each word starting with
  ``--``, the part between ``--`` and the first ``.`` (before any ``=``) with underscores as dashes
  (``--max_num_seqs`` is ``--max-num-seqs``); turns ``-O3``/``-O=3`` and ``-O 3`` into
  ``--optimization-level``; and (lines 409-441) reads a dotted ``--x.key value`` / ``--x.key+ v``
  as a field of the JSON flag ``--x``, taking the next word as its value;
* then argparse (``ArgumentParser`` with ``allow_abbrev`` left True): ``--flag=value`` and
  ``--flag value``; a unique prefix of a long option is accepted (warned here: it breaks when a
  later vLLM adds a flag with the same prefix), an ambiguous one refused; a flag that takes a value
  and has none refused (``expected one argument``); ``=value`` on a flag that takes none refused
  (``ignored explicit argument``); ``-1`` is a value, not an option; a value checked against
  ``choices`` and against its type (``int``, ``float``, ``human_readable_int`` with 1k/1K);
* ``model_tag`` is the one positional: a second bare word (``--enable-prefix-caching true``) is
  ``unrecognized arguments``.

A word lint cannot resolve (``$ARGS`` assigned nowhere in the file) is said, not guessed.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from pdcensus.engines import newest_release
from pdcensus.engines.vllm import RECORD as VLLM
from pdcensus.advice.model import Severity

VLLM_DATA = newest_release(VLLM.name).flags_file  # the release in force (pdcensus.engines)
_NEGATIVE = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's _negative_number_matcher
_DASHES = re.compile(r"(?<=--)[^.]*")  # FlexibleArgumentParser: between the first -- and the first .
_HUMAN = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")


@dataclass(frozen=True)
class VllmFlag:
    """One option of vLLM's serve parser as the generated data lists it."""

    name: str
    aliases: tuple[str, ...]
    negations: tuple[str, ...]
    takes_value: bool
    nargs: int | str | None
    choices: tuple[str, ...] | None
    value: str | None  # int, float, human-int, human-int-or-auto, text
    none_ok: bool

    def refusal(self, value: str) -> str | None:
        """Why the parser refuses ``value`` for this flag (None: it accepts it, or it is not checked)."""
        if self.none_ok and value in {"", "None"}:
            return None
        if self.choices is not None and value not in self.choices:
            return f"{value!r} is not one of its choices ({', '.join(self.choices)})"
        if self.value == "int" and not _int_ok(value):
            return f"it takes an integer (int()), got {value!r}"
        if self.value == "float" and not _float_ok(value):
            return f"it takes a number (float()), got {value!r}"
        if self.value == "human-int-or-auto" and (value.strip() == "-1" or value.strip().lower() == "auto"):
            return None
        if self.value in {"human-int", "human-int-or-auto"} and not _human_ok(value):
            return f"it takes an integer or 25.6k/1K-style size (human_readable_int), got {value!r}"
        return None


def _int_ok(value: str) -> bool:
    try:
        int(value)
    except ValueError:
        return False
    return True


def _float_ok(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _human_ok(value: str) -> bool:
    """vLLM's ``human_readable_int``: ``25.6k`` (decimal suffix), ``1K`` (binary, no decimals), or int()."""
    m = _HUMAN.fullmatch(value.strip())
    if m:
        return m.group(2).islower() or "." not in m.group(1)
    return _int_ok(value.strip())


@dataclass(frozen=True)
class VllmFlags:
    """Every option string of the pinned vLLM serve parser, with the flag it belongs to."""

    distribution: str
    version: str
    allow_abbrev: bool
    flags: tuple[VllmFlag, ...]

    @property
    def label(self) -> str:
        return f"vLLM {self.version}"

    @functools.cached_property
    def by_option(self) -> dict[str, tuple[VllmFlag, bool]]:
        """option string -> (flag, is a ``--no-X`` negation)."""
        out: dict[str, tuple[VllmFlag, bool]] = {}
        for flag in self.flags:
            for option in (flag.name, *flag.aliases):
                out[option] = (flag, False)
            for option in flag.negations:
                out[option] = (flag, True)
        return out

    def prefixed(self, option: str) -> list[str]:
        """Long options ``option`` abbreviates (argparse ``_get_option_tuples`` with allow_abbrev)."""
        if not self.allow_abbrev or not option.startswith("--"):
            return []
        return sorted(o for o in self.by_option if o.startswith("--") and o.startswith(option))

    def suggest(self, option: str) -> list[str]:
        return difflib.get_close_matches(option, list(self.by_option), n=3, cutoff=0.6)


def _flag_of(row: dict[str, Any]) -> VllmFlag:
    choices = row.get("choices")
    return VllmFlag(str(row["name"]), tuple(row.get("aliases", ())), tuple(row.get("negations", ())),
                    bool(row["takes_value"]), row.get("nargs"), tuple(choices) if choices is not None else None,
                    row.get("value"), bool(row.get("none_ok")))


@functools.cache
def load_vllm_flags(name: str = VLLM_DATA) -> VllmFlags:
    """The pinned flags data shipped in ``pdcensus/data`` (generated by scripts/gen_vllm_flags.py)."""
    text = resources.files("pdcensus").joinpath("data", name).read_text(encoding="utf-8")
    data = json.loads(text)
    return VllmFlags(str(data["distribution"]), str(data["version"]), bool(data.get("allow_abbrev", True)),
                     tuple(_flag_of(row) for row in data["flags"]))


def normalise(word: str) -> str:
    """A ``--`` word as FlexibleArgumentParser rewrites it: underscores to dashes in the name part."""
    if not word.startswith("--"):
        return word
    key, eq, value = word.partition("=")
    return _DASHES.sub(lambda m: m.group(0).replace("_", "-"), key, count=1) + eq + value


def is_option_like(word: str) -> bool:
    """argparse reads a word starting with ``-`` as an option, unless it is a negative number
    (this parser declares no option that looks like one) or holds a space."""
    return word.startswith("-") and word != "-" and not _NEGATIVE.match(word) and " " not in word


SEVERITY = {"unknown-flag": Severity.ERROR, "ambiguous-flag": Severity.ERROR, "missing-value": Severity.ERROR,
            "unexpected-value": Severity.ERROR, "unknown-enum-value": Severity.ERROR,
            "non-integer-value": Severity.ERROR, "abbreviated-flag": Severity.WARNING,
            "command-not-checked": Severity.INFO}
