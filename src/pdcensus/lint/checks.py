"""The checks every reader feeds: flags, values, validator refusals, env lines, member lists, queries.

A reader turns its file into *invocations* (the engine's argv as one command, container or
unit passes it, each flag with its value and place) and into text that may hold queries or
prose. The checks are the runbook's rules against the pinned build:

* a flag the pinned source does not declare (``unknown-flag``): in engine context always; a
  bare mention in prose only when it is a near-miss of a real flag (same first word, difflib
  ratio >= 0.85: ``--prefill-interleaving``), so ``git merge --ff-only``, ``--no-verify``,
  ``--help`` or ``--mode`` in prose are never findings;
* a value ``config_parse`` refuses: an enum member the validator does not list
  (``unknown-enum-value``), a non-integer where it parses an integer (``non-integer-value``),
  a number outside a bound it checks (``value-out-of-bounds``), flags that break a cross-flag
  rule together (``cross-flag-rule``). All are errors: the build would refuse to boot.
  A cross-flag rule this command arms (``--prefill-span 4`` makes ``span > 1 && ...`` hinge
  on the rest) but cannot decide, because it leaves a flag of the rule unset and the help
  table gives no default, is ``cross-flag-unchecked`` (info);
* a ``RADIANCE_*`` variable is checked as the flag it maps to.

A flag passed only in some branch of the serve script is still checked; its finding says so.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection
from dataclasses import dataclass

from pdcensus.lint.source.cpp_rules import Expr, Refusal, describe, evaluate
from pdcensus.lint.source.flags import FLAG_RE, FlagSchema, SchemaKind, enum_lists, is_placeholder
from pdcensus.advice.catalogue import engines_with_flag
from pdcensus.advice.knobs import flag_for_env_var
from pdcensus.advice.model import Severity
from pdcensus.lint.model import Finding, Snippet
from pdcensus.lint.promql import query_hits

_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")
UNPINNED = FlagSchema({}, "no pinned source", SchemaKind.HELP_TEXT)  # lint without --source: vLLM data only


@dataclass(frozen=True)
class FlagUse:
    """One flag (and its value, if any) as an invocation passes it, with both places."""

    flag: str
    value: str | None
    flag_at: tuple[int, int]
    value_at: tuple[int, int] | None = None
    conditional: bool = False
    via: str = ""


def _conjuncts(expr: Expr) -> list[Expr]:
    if expr[0] == "&&":
        return _conjuncts(expr[1]) + _conjuncts(expr[2])  # type: ignore[arg-type]
    return [expr]


def _armed(condition: Expr, values: dict[str, float]) -> bool:
    """A conjunction whose decided parts are all true (``--prefill-span 4`` arms ``span > 1 && ...``)."""
    parts = [evaluate(part, values) for part in _conjuncts(condition)]
    return len(parts) > 1 and any(p is not None and p != 0 for p in parts) and not any(p == 0 for p in parts)


def checkable(value: str | None) -> bool:
    """A literal value (no expansion, no placeholder such as ``N`` or ``<n>``)."""
    return (bool(value) and value is not None and not any(c in value for c in "$`<>{}*")
            and value not in {"...", "…"} and not is_placeholder(value))


class Checker:
    """Collects the findings of one file against one schema."""

    def __init__(self, schema: FlagSchema, path: str, metric_names: Collection[str] | None = None) -> None:
        self.schema = schema
        self.path = path
        self.metric_names = metric_names
        self.pinned = schema is not UNPINNED
        self.findings: list[Finding] = []
        self._seen: set[tuple[str, int, int, str]] = set()

    def add(self, rule: str, severity: Severity, at: tuple[int, int], subject: str, message: str,
            conditional: bool = False) -> None:
        key = (rule, at[0], at[1], subject)
        if key in self._seen:
            return
        self._seen.add(key)
        self.findings.append(Finding(self.path, at[0], at[1], rule, severity, subject, message, conditional))

    def _refused(self, use: FlagUse, what: str) -> str:
        return f"{what}, from the {self.schema.flags[use.flag].choices_origin} of {self.schema.source}: " \
               "config_parse would refuse it at boot"

    def use(self, use: FlagUse, bare: bool = False) -> None:
        """One flag and its value; ``bare`` for a mention outside any command."""
        spec = self.schema.get(use.flag)
        if spec is None:
            close = self.schema.suggest(use.flag)
            if bare and not self._near_miss(use.flag):
                return
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            owners = engines_with_flag(use.flag)  # another engine's knob (pdcensus.advice.catalogue)
            hint += f"; it is a flag of {', '.join(owners)}, not of this build" if owners else ""
            self.add("unknown-flag", Severity.ERROR, use.flag_at, use.flag,
                     f"{use.flag}{use.via} is not a flag of the pinned build ({self.schema.source}){hint}",
                     use.conditional)
            return
        if not checkable(use.value):
            return
        value = str(use.value)
        at = use.value_at or use.flag_at
        refusal = spec.refusal(value)
        if refusal:
            self.add("unknown-enum-value", Severity.ERROR, at, f"{use.flag} {value}",
                     self._refused(use, refusal + use.via), use.conditional)
        elif spec.integer_expected(value):
            self.add("non-integer-value", Severity.ERROR, at, f"{use.flag} {value}",
                     f"{use.flag}{use.via} takes {spec.argument or 'an integer'}, got {value!r}: "
                     "the validator parses an integer and config_parse would refuse it at boot",
                     use.conditional)

    def _near_miss(self, flag: str) -> bool:
        """A misspelling of a real flag: same first word and a difflib ratio of 0.85 or more
        (``--prefill-interleaving``), unlike another program's ``--mode``, ``--out`` or ``--help``."""
        first = flag[2:].split("-")[0]
        return any(known[2:].split("-")[0] == first and difflib.SequenceMatcher(None, flag, known).ratio() >= 0.85
                   for known in self.schema.flags)

    def invocation(self, uses: list[FlagUse]) -> None:
        """The flags of one engine argv: each alone, then the validator's rules over all of them."""
        by_flag: dict[str, list[FlagUse]] = {}
        for use in uses:
            self.use(use)
            if use.flag in self.schema and use.value is not None and _NUMBER.fullmatch(use.value):
                by_flag.setdefault(use.flag, []).append(use)
        defaults: dict[str, float] = {}
        for flag, spec in self.schema.flags.items():
            if spec.default is not None and _NUMBER.fullmatch(spec.default):
                defaults[flag] = float(spec.default)
        for refusal in self.schema.refusals:
            flags = refusal.flags()
            anchor = next((f for f in flags if f in by_flag), None)
            if anchor is None:
                continue
            for use in by_flag[anchor]:  # each value a branch passes, with its nearest partners
                chosen = {anchor: use}
                for other in flags:
                    if other != anchor and other in by_flag:
                        chosen[other] = min(by_flag[other], key=lambda u: abs(u.flag_at[0] - use.flag_at[0]))
                self._refusal(refusal, flags, chosen, defaults)

    def _refusal(self, refusal: Refusal, flags: list[str], chosen: dict[str, FlagUse],
                 defaults: dict[str, float]) -> None:
        values = dict(defaults)
        values.update({f: float(str(u.value)) for f, u in chosen.items()})
        first = next(chosen[f] for f in flags if f in chosen)
        at = first.value_at or first.flag_at
        conditional = any(u.conditional for u in chosen.values())
        shown = ", ".join(f"{f} {chosen[f].value}" if f in chosen else f"{f} {values[f]:g} (default)"
                          for f in flags if f in values)
        quoted = f' ("{refusal.message}")' if refusal.message else ""
        where = f"({refusal.origin} of {self.schema.source}){quoted}"
        verdict = evaluate(refusal.condition, values)
        if verdict is not None and verdict != 0:
            rule = "cross-flag-rule" if len(flags) > 1 else "value-out-of-bounds"
            self.add(rule, Severity.ERROR, at, shown,
                     f"{shown}: the validator refuses {describe(refusal.condition)} {where}: "
                     "config_parse would refuse it at boot", conditional)
        elif verdict is None and len(flags) > 1 and _armed(refusal.condition, values):
            unset = [f for f in flags if f not in values]
            self.add("cross-flag-unchecked", Severity.INFO, at, shown,
                     f"{shown}: the validator refuses {describe(refusal.condition)} {where}; this command "
                     f"leaves {', '.join(unset)} unset and the source gives no default, so the rule cannot "
                     "be checked here", conditional)

    def env(self, name: str, value: str | None, name_at: tuple[int, int], value_at: tuple[int, int] | None,
            conditional: bool = False) -> FlagUse | None:
        """A ``RADIANCE_*`` variable as the flag it maps to (None for other variables)."""
        flag = flag_for_env_var(name)
        if flag is None or not self.pinned:
            return None
        if flag not in self.schema:
            self.add("unknown-env-flag", Severity.WARNING, name_at, name,
                     f"{name} maps to {flag}, which the pinned build does not declare ({self.schema.source})",
                     conditional)
            return None
        return FlagUse(flag, value, name_at, value_at, conditional, via=f" (from {name})")

    def prose(self, snippet: Snippet) -> None:
        """Bare flag mentions and member lists in prose (near-misses and unknown members only)."""
        for m in re.finditer(r"(?<![\w-])" + FLAG_RE.pattern, snippet.text):
            self.use(FlagUse(m.group(0), None, snippet.position(m.start())), bare=True)
        self.member_lists(snippet)

    def member_lists(self, snippet: Snippet) -> None:
        """A line naming a flag and spelling a member list: every member must be real."""
        offset = 0
        for line in snippet.text.split("\n"):
            plain = line.replace("`", " ")
            specs = [self.schema.get(m.group(0)) for m in FLAG_RE.finditer(plain)]
            for spec in [s for s in specs if s is not None and s.choices]:
                for members in enum_lists(plain):
                    real = [m for m in members if not is_placeholder(m)]
                    if not set(real) & set(spec.choices):
                        continue
                    for member in real:
                        if member not in spec.choices:
                            at = snippet.position(offset + max(0, plain.find(member)))
                            self.add("unknown-enum-value", Severity.ERROR, at, f"{spec.name} {member}",
                                     f"{spec.refusal(member)}, from the {spec.choices_origin} of "
                                     f"{self.schema.source}: config_parse would refuse it at boot")
            offset += len(line) + 1

    def queries(self, snippet: Snippet, step_forms: bool = True) -> None:
        """The PromQL traps and unknown metric names anywhere in ``snippet``."""
        for hit in query_hits(snippet.text, self.metric_names, step_forms):
            self.add(hit.rule, Severity.ERROR, snippet.position(hit.offset), hit.subject, hit.message)

    def sorted(self) -> list[Finding]:
        return sorted(self.findings, key=lambda f: (f.line, f.col, f.rule, f.subject))
