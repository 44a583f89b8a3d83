"""Runbook lint: flags, enum members, metric names and PromQL traps, checked against the pin.

A runbook (Markdown or shell) is checked for what would make its arm undeployable or its
census wrong: a flag the pinned build does not declare, an enum value its validator would
refuse at boot (``config_parse``), a metric name the build does not export (given a scrape
or recording), and the runbook's own PromQL traps (latency asked under ``radiance:``,
``rate()`` over the instant preempted depth, the diluted 2-minute mean step, a query step
over 30 s).

Markdown is split by hand into fenced code, inline code spans and prose (only code-fence
and backtick syntax matters here, and every finding needs its 1-based line, which a full
Markdown parser does not keep for inline spans). Shell words are split with a small regex
rather than :mod:`shlex` so that every word keeps its offset (and so its line).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from pdcensus.advice.flags import FLAG_RE, FlagSchema, enum_lists, is_placeholder, load_schema
from pdcensus.advice.knobs import flag_for_env_var
from pdcensus.advice.model import LintFinding, Severity
from pdcensus.errors import UsageError

MAX_QUERY_STEP_SECONDS = 30.0

_NON_ENGINE = {
    "curl", "wget", "podman", "docker", "kubectl", "tr", "grep", "egrep", "fgrep", "sed", "awk",
    "promtool", "prometheus", "pdcensus", "jq", "ssh", "scp", "systemctl", "journalctl", "git",
    "pip", "pip3", "ls", "cat", "sort", "head", "tail", "xargs", "find", "echo", "printf", "cd",
    "mkdir", "rm", "cp", "mv", "tee", "less", "watch", "sleep", "nvidia-smi", "helm", "make",
    "pidof", "pgrep", "ps", "top", "htop", "uniq", "wc", "cut", "date", "export", "unset", "read",
}
_PREFIXES = {"sudo", "env", "exec", "nohup", "time", "command", "nice", "stdbuf", "then", "do",
             "else", "if", "while", "until", "!", "{"}
_WORD = re.compile(r"""(?:'[^']*'|"(?:\\.|[^"\\])*"|\$\([^)]*\)|[^\s'"|;&()<>])+|\|\||&&|[|;&()]""")
_ENV_LINE = re.compile(r"(?<![\w$])(RADIANCE_[A-Z0-9_]+)=(\"[^\"]*\"|'[^']*'|[^\s`'\"]*)")
_METRIC = re.compile(r"(?<![\w:])((?:radiance|vllm|sglang):[A-Za-z_][A-Za-z0-9_:]*)")
_LATENCY_WORDS = re.compile(
    r"time_to_first_token|ttft|inter_token|time_per_output|e2e|latency|decode_time|"
    r"num_requests_running|num_requests_waiting|num_preemptions"
)
_RATE_OVER_DEPTH = re.compile(
    r"\b(rate|irate|increase|delta|idelta|deriv|resets)\s*\(\s*(radiance:num_requests_preempted)\b"
)
_DILUTED = re.compile(
    r"((?:radiance:)?engine_step_seconds_total(?:\{[^}]*\})?(?:\[[^\]]*\])?\)*\s*/\s*"
    r"(?:[a-z_]+\s*(?:by\s*\([^)]*\)\s*)?\(\s*)*(?:radiance:)?engine_steps_total\b)"
)
_DURATION = r"(\d+(?:\.\d+)?(?:ms|[smhdwy])?(?:\d+(?:ms|[smhdwy]))*)"
_STEP_FORMS = (
    re.compile(r"[?&]step=" + _DURATION + r"\b"),
    re.compile(r"--step[= ]+" + _DURATION + r"\b"),
    re.compile(r"[\"']?step[\"']?\s*:\s*[\"']?" + _DURATION + r"\b"),
    re.compile(r"\[[^\]\[:]+:" + _DURATION + r"\]"),
)
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0}


class SegmentKind(str, Enum):
    CODE = "code"
    INLINE = "inline"
    PROSE = "prose"


@dataclass(frozen=True)
class Segment:
    kind: SegmentKind
    line: int
    text: str


@dataclass(frozen=True)
class LintReport:
    runbook: str
    source: str
    findings: tuple[LintFinding, ...]
    metrics_checked: bool

    @property
    def errors(self) -> list[LintFinding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]

    def to_dict(self) -> dict[str, object]:
        return {"runbook": self.runbook, "source": self.source,
                "metrics_checked": self.metrics_checked,
                "findings": [f.to_dict() for f in self.findings]}


def duration_seconds(text: str) -> float:
    """A Prometheus duration (``2m``, ``1m30s``, ``120``) in seconds."""
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    return sum(float(n) * _UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|[smhdwy])", text))


def segments(text: str, markdown: bool) -> Iterator[Segment]:
    """Code lines, inline code spans and prose lines, each with its 1-based line."""
    fence: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        if not markdown:
            stripped = raw.lstrip()
            kind = SegmentKind.PROSE if stripped.startswith("#") else SegmentKind.CODE
            yield Segment(kind, number, raw)
            continue
        opener = re.match(r"^ {0,3}(`{3,}|~{3,})", raw)
        if fence is not None:
            if opener and opener.group(1)[0] == fence[0] and len(opener.group(1)) >= len(fence):
                fence = None
            else:
                yield Segment(SegmentKind.CODE, number, raw)
            continue
        if opener:
            fence = opener.group(1)
            continue
        prose = raw
        for m in re.finditer(r"(`+)(.+?)\1", raw):
            yield Segment(SegmentKind.INLINE, number, m.group(2).strip())
            prose = prose.replace(m.group(0), " " * len(m.group(0)), 1)
        yield Segment(SegmentKind.PROSE, number, prose)


def _logical_commands(segs: list[Segment]) -> Iterator[tuple[list[int], str]]:
    """Join backslash continuations of code lines; yields (line per char, text)."""
    buf, lines = "", []
    for seg in segs:
        text = seg.text.rstrip()
        cont = text.endswith("\\")
        piece = (text[:-1] if cont else text) + " "
        buf += piece
        lines.extend([seg.line] * len(piece))
        if not cont:
            yield lines, buf
            buf, lines = "", []
    if buf:
        yield lines, buf


def _simple_commands(text: str) -> Iterator[list[re.Match[str]]]:
    words: list[re.Match[str]] = []
    for m in _WORD.finditer(text):
        if m.group(0) in {"|", "||", "&&", ";", "&", "(", ")"}:
            if words:
                yield words
            words = []
        else:
            words.append(m)
    if words:
        yield words


def _engine_context(words: list[re.Match[str]]) -> bool:
    """False when the command's program is a known non-engine tool (curl, grep, podman ...)."""
    i = 0
    while i < len(words):
        w = words[i].group(0)
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*\+?=", w) or w in _PREFIXES:
            i += 1
        elif w == "timeout" and i + 1 < len(words):
            i += 2
        elif i > 0 and words[i - 1].group(0) == "sudo" and w.startswith("-"):
            i += 2 if w in {"-u", "-g"} else 1
        else:
            break
    if i >= len(words):
        return True
    program = words[i].group(0).strip("'\"").rsplit("/", 1)[-1]
    if program.startswith("python"):
        rest = [m.group(0) for m in words[i + 1:]]
        module = rest[rest.index("-m") + 1] if "-m" in rest[:-1] else ""
        return "radiance" in module
    return program not in _NON_ENGINE


def _unquote(word: str) -> str:
    return word[1:-1] if len(word) >= 2 and word[0] == word[-1] and word[0] in "'\"" else word


def _value_is_checkable(value: str) -> bool:
    return bool(value) and not any(c in value for c in "$<>{}*") and value != "..." and not is_placeholder(value)


class _Linter:
    def __init__(self, schema: FlagSchema, metric_names: Collection[str] | None) -> None:
        self.schema = schema
        self.metric_names = set(metric_names) if metric_names is not None else None
        self.findings: list[LintFinding] = []
        self._seen: set[tuple[str, int, str]] = set()

    def add(self, rule: str, severity: Severity, line: int, subject: str, message: str) -> None:
        if (rule, line, subject) not in self._seen:
            self._seen.add((rule, line, subject))
            self.findings.append(LintFinding(rule, severity, line, subject, message))

    def flag(self, name: str, value: str | None, line: int, via: str = "") -> None:
        spec = self.schema.get(name)
        if spec is None:
            close = self.schema.suggest(name)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            self.add("unknown-flag", Severity.ERROR, line, name,
                     f"{name}{via} is not a flag of the pinned build ({self.schema.source}){hint}")
            return
        if value is None or not _value_is_checkable(value):
            return
        refusal = spec.refusal(value)
        if refusal:
            self.add("unknown-enum-value", Severity.ERROR, line, f"{name} {value}",
                     f"{refusal}, from the {spec.choices_origin} of {self.schema.source}: "
                     "config_parse would refuse it at boot")
        elif spec.integer_expected(value):
            self.add("non-integer-value", Severity.WARNING, line, f"{name} {value}",
                     f"{name} takes {spec.argument or 'an integer'}, got {value!r}")

    def code(self, lines: list[int], text: str) -> None:
        for words in _simple_commands(text):
            if not _engine_context(words):
                continue
            for k, m in enumerate(words):
                word = _unquote(m.group(0))
                fm = re.fullmatch(r"(--[a-z0-9][a-z0-9-]*[a-z0-9])(?:=(.*))?", word)
                if not fm:
                    continue
                value = _unquote(fm.group(2)) if fm.group(2) is not None else None
                spec = self.schema.get(fm.group(1))
                if value is None and spec is not None and spec.takes_value and k + 1 < len(words):
                    nxt = _unquote(words[k + 1].group(0))
                    value = None if nxt.startswith("-") else nxt
                self.flag(fm.group(1), value, lines[min(m.start(), len(lines) - 1)])

    def prose(self, line: int, text: str) -> None:
        for m in re.finditer(r"(?<![\w-])" + FLAG_RE.pattern, text):
            self.flag(m.group(0), None, line)

    def env_lines(self, line: int, text: str) -> None:
        for m in _ENV_LINE.finditer(text):
            flag = flag_for_env_var(m.group(1))
            if flag is None:
                continue
            if flag not in self.schema:
                self.add("unknown-env-flag", Severity.WARNING, line, m.group(1),
                         f"{m.group(1)} maps to {flag}, which the pinned build does not declare "
                         f"({self.schema.source})")
            elif m.group(2):
                self.flag(flag, _unquote(m.group(2)), line, via=f" (from {m.group(1)})")

    def member_lists(self, line: int, text: str) -> None:
        """A line naming a flag and spelling a member list: every member must be real."""
        plain = text.replace("`", "")
        flags = [self.schema.get(m.group(0)) for m in FLAG_RE.finditer(plain)]
        for spec in [s for s in flags if s is not None and s.choices]:
            for members in enum_lists(plain):
                real = [m for m in members if not is_placeholder(m)]
                if not set(real) & set(spec.choices):
                    continue
                for member in real:
                    if member not in spec.choices:
                        self.add("unknown-enum-value", Severity.ERROR, line, f"{spec.name} {member}",
                                 f"{spec.refusal(member)}, from the {spec.choices_origin} of "
                                 f"{self.schema.source}: config_parse would refuse it at boot")

    def metrics_and_traps(self, line: int, text: str) -> None:
        for m in _METRIC.finditer(text):
            name = m.group(1).rstrip(":")
            if name.startswith("radiance:") and _LATENCY_WORDS.search(name):
                self.add("latency-under-radiance", Severity.ERROR, line, name,
                         f"{name}: latency, running/waiting and preemptions exist only under the "
                         f"vLLM prefix (vllm:{name.split(':', 1)[1]}); a radiance:-only query finds "
                         "no latency and reads as 'the endpoint never stalls anyone'")
            elif self.metric_names is not None and not self._exported(name):
                self.add("metric-not-exported", Severity.ERROR, line, name,
                         f"{name} is not in the build's metric set (from --metrics)")
        for m in _RATE_OVER_DEPTH.finditer(text):
            self.add("rate-over-instant-depth", Severity.ERROR, line, m.group(0) + "...",
                     f"{m.group(1)}() over {m.group(2)}, the INSTANT depth of preempted sequences "
                     "(a gauge, not a counter); count preemptions with "
                     "increase(vllm:num_preemptions_total[...])")
        for m in _DILUTED.finditer(text):
            self.add("diluted-mean-step", Severity.ERROR, line, m.group(1),
                     "engine_step_seconds_total / engine_steps_total is a mean over all steps: if ~5 % "
                     "of steps carry a third of the step time it cannot move; use the phase ratio "
                     "(step_seconds - step_seconds_decode) / (steps - steps_decode) for the chunk "
                     "step and step_seconds_decode / steps_decode for the decode-only step")
        for form in _STEP_FORMS:
            for m in form.finditer(text):
                seconds = duration_seconds(m.group(1))
                if seconds > MAX_QUERY_STEP_SECONDS:
                    self.add("query-step-over-30s", Severity.ERROR, line, m.group(0),
                             f"query step {m.group(1)} = {seconds:g} s > {MAX_QUERY_STEP_SECONDS:g} s: "
                             "a 15 s scrape against a 120 s step samples one in eight; use a step "
                             "of 30 s or less (and no longer than the scrape interval)")

    def _exported(self, name: str) -> bool:
        assert self.metric_names is not None
        if name in self.metric_names:
            return True
        base = re.sub(r"_(bucket|count|sum|total|created)$", "", name)
        return any(base + s in self.metric_names for s in ("", "_total", "_bucket", "_count", "_sum"))


def lint_text(text: str, schema: FlagSchema, metric_names: Collection[str] | None = None,
              markdown: bool = True) -> list[LintFinding]:
    """Findings for one runbook's text, ordered by line."""
    linter = _Linter(schema, metric_names)
    segs = list(segments(text, markdown))
    code = [s for s in segs if s.kind is SegmentKind.CODE]
    for lines, command in _logical_commands(code):
        linter.code(lines, command)
    for seg in segs:
        if seg.kind is SegmentKind.INLINE:
            linter.code([seg.line] * max(1, len(seg.text)), seg.text)
        elif seg.kind is SegmentKind.PROSE:
            linter.prose(seg.line, seg.text)
    for number, raw in enumerate(text.splitlines(), start=1):
        linter.env_lines(number, raw)
        linter.member_lists(number, raw)
        linter.metrics_and_traps(number, raw)
    return sorted(linter.findings, key=lambda f: (f.line, f.rule, f.subject))


def metric_names_of(path: str) -> set[str]:
    """Every sample name (and declared family) in a scrape or recording."""
    from pdcensus.sources.load import load_source

    recording = load_source(path)
    names: set[str] = set(recording.families)
    for endpoint in recording.endpoints:
        names |= endpoint.names()
    return names


def lint_file(runbook: str, source: str, metrics: str | None = None) -> LintReport:
    """Lint a runbook file against a pinned source (and a scrape/recording when given)."""
    schema = load_schema(source)
    try:
        text = Path(runbook).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"cannot read runbook {runbook!r}: {exc.strerror or exc}") from None
    markdown = Path(runbook).suffix.lower() in {".md", ".markdown", ".mdx", ".txt", ""} and not text.startswith("#!")
    names = metric_names_of(metrics) if metrics else None
    findings = lint_text(text, schema, names, markdown=markdown)
    return LintReport(runbook, schema.source, tuple(findings), names is not None)
