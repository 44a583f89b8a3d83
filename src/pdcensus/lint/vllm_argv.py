"""One vLLM argv walked the way vLLM's parser walks it, each refusal a finding at its word.

The reading rules (FlexibleArgumentParser's rewriting, then argparse's) are stated in
:mod:`pdcensus.lint.vllm`; this module applies them word by word to the argv a reader found
(``vllm serve MODEL ...``, ``python -m vllm.entrypoints.openai.api_server ...``, a container's
``args`` for a vLLM image), variables already expanded by the shell reader.
"""

from __future__ import annotations

from pdcensus.lint.checks import Checker
from pdcensus.lint.shell import Arg
from pdcensus.lint.vllm import SEVERITY, VllmFlag, VllmFlags, is_option_like, normalise

_REFUSES = "vLLM refuses it at start-up"  # argparse's error(): usage and exit 2 before any model loads


class VllmArgv:
    """Checks one argv against the pinned flags data; ``form`` is how the command was spelled."""

    def __init__(self, checker: Checker, flags: VllmFlags, form: str) -> None:
        self.checker = checker
        self.flags = flags
        self.form = form

    def add(self, rule: str, arg: Arg, subject: str, message: str, offset: int = 0) -> None:
        self.checker.add(rule, SEVERITY[rule], arg.at(offset), subject,
                         f"{message} [{self.flags.label}, `{self.form}`]", arg.conditional)

    def check(self, argv: list[Arg]) -> None:
        positionals = 0
        i = 0
        while i < len(argv):
            arg = argv[i]
            word = arg.value
            i += 1
            if _unresolved(arg) and not (word.startswith("-") and not any(c in word.partition("=")[0] for c in "$`")):
                continue  # the shell reader says which words it could not resolve
            if word == "--" or word.startswith("--help="):  # --help=KEYWORD: parse_args searches the help
                return
            if word.startswith("-O") and not word.startswith("--"):  # -O3, -O=3, -O 3 (parse_args)
                if word == "-O":
                    if i < len(argv) and argv[i].value in {"0", "1", "2", "3"}:
                        i += 1
                    else:
                        self.add("missing-value", arg, word, "-O takes an optimization level (-O3, -O=3 or -O 3 "
                                 f"with 0-3); {_REFUSES}")
                continue
            if is_option_like(word):
                i = self._option(argv, i, arg)
                continue
            positionals += 1
            if positionals > 1 and not placeholder(word):  # not `...`, `<model>`, `N`
                self.add("unexpected-value", arg, word,
                         f"{word!r} is a second positional argument: the parser takes one (the model) and "
                         f"refuses the rest as unrecognized arguments; {_REFUSES}")

    def _option(self, argv: list[Arg], i: int, arg: Arg) -> int:
        """Reads the option at ``argv[i - 1]`` and its value(s); returns the index after them."""
        word = normalise(arg.value)
        key, eq, inline = word.partition("=")
        if key.startswith("--") and "." in key:  # --compilation-config.level 3: a field of a JSON flag
            base = key.split(".", 1)[0].rstrip("+")
            if base not in self.flags.by_option:
                self._unknown(arg, base)
            return i if eq else i + 1
        found = self.flags.by_option.get(key)
        negated = False
        if found is None:
            matches = self.flags.prefixed(key)
            if len(matches) > 1:
                self.add("ambiguous-flag", arg, key, f"{key} abbreviates {', '.join(matches[:6])}"
                         f"{' ...' if len(matches) > 6 else ''}: argparse refuses an ambiguous option; {_REFUSES}")
                return i
            if not matches:  # argparse puts it and the bare words after it in "unrecognized arguments"
                self._unknown(arg, key)
                while not eq and i < len(argv) and not is_option_like(argv[i].value):
                    i += 1
                return i
            found = self.flags.by_option[matches[0]]
            self.add("abbreviated-flag", arg, key, f"{key} is accepted only as an abbreviation of {matches[0]} "
                     "(argparse allow_abbrev): a later vLLM flag with the same prefix makes it ambiguous; spell "
                     f"{matches[0]}")
            key = matches[0]
        flag, negated = found
        if negated or not flag.takes_value:
            if eq:
                self.add("unexpected-value", arg, word, f"{key} takes no value, got {inline!r} (argparse: ignored "
                         f"explicit argument); {_REFUSES}")
            return i
        values: list[tuple[Arg, str, int]] = []
        if eq:
            values.append((arg, inline, len(arg.raw) - len(inline) if arg.raw.endswith(inline) else 0))
        elif flag.nargs in {"+", "*"}:
            while i < len(argv) and (_unresolved(argv[i]) or not is_option_like(argv[i].value)):
                values.append((argv[i], argv[i].value, 0))
                i += 1
        elif i < len(argv) and (_unresolved(argv[i]) or not is_option_like(argv[i].value)):
            values.append((argv[i], argv[i].value, 0))
            i += 1
        if not values and flag.nargs not in {"?", "*"}:
            self.add("missing-value", arg, key, f"{key} takes a value and none follows (argparse: expected "
                     f"{'at least one argument' if flag.nargs == '+' else 'one argument'}); {_REFUSES}")
        for where, value, offset in values:
            self._value(flag, key, where, value, offset)
        return i

    def _value(self, flag: VllmFlag, key: str, where: Arg, value: str, offset: int) -> None:
        if _unresolved(where) or placeholder(value):  # `$PORT`, `<port>`, `N`: a placeholder
            return
        refusal = flag.refusal(value)
        if refusal is None:
            return
        rule = "unknown-enum-value" if flag.choices is not None else "non-integer-value"
        self.add(rule, where, f"{key} {value}", f"{key} {value}: {refusal}; {_REFUSES}", offset)

    def _unknown(self, arg: Arg, key: str) -> None:
        close = self.flags.suggest(key)
        hint = f"; did you mean {close[0]}?" if close else ""
        self.add("unknown-flag", arg, key, f"{key} is not a flag of {self.flags.label} (vLLM refuses "
                 f"unrecognized arguments at start-up){hint}")


def _unresolved(arg: Arg) -> bool:
    """A word still holding an expansion the shell reader could not resolve (``$ARGS``, ``$(...)``)."""
    return arg.literal is None and any(c in arg.raw for c in "$`") and any(c in arg.value for c in "$`")


def placeholder(word: str) -> bool:
    """A stand-in a runbook writes for a value: ``...``, ``<port>``, ``MODEL``, ``N``, ``$PORT``."""
    bare = word.replace("_", "").replace("-", "")
    return (word in {"...", "…"} or (word.startswith("<") and word.endswith(">"))
            or (bare.isalpha() and bare.isupper()) or any(c in word for c in "$`"))
