"""Kubernetes manifests, Helm-rendered YAML, compose files and rules files, with line marks.

YAML is read with PyYAML's composer (``yaml.compose_all``): every node keeps its
``start_mark``, so a finding on ``args: ["serve", "--checkpoint-policy", "geometric"]`` points
at the item's own line and column, in any document of a multi-document file (``helm
template`` output, ``kubectl get -o yaml`` lists). Nothing is constructed into Python
objects, so no tag runs code. What is read:

* every container (``containers``/``initContainers``/``ephemeralContainers`` items anywhere:
  Deployment, StatefulSet, Pod, Job, CronJob, operators' CRDs): ``command`` + ``args`` is the
  argv (no ``command``: ``args`` go to the image's entrypoint, taken as the engine when they
  start with a flag or ``serve``; ``sh -c`` scripts are read as shell), ``env`` name/value
  pairs are the flags their ``RADIANCE_*`` names map to, all one invocation;
* compose ``services``: ``entrypoint``/``command`` as a string (split as compose splits it)
  or a list, ``environment`` as a map or a ``KEY=VALUE`` list;
* anywhere else: a ``RADIANCE_*`` key (ConfigMap data, Helm values), and any ``expr`` or
  ``query`` string (alerting and recording rules, PrometheusRule objects) for the PromQL
  traps, with the runbook's queries' rules;
* and any other list or string that passes a flag the pinned build declares: Helm values'
  ``extraArgs``, a kustomize patch's ``value``, an Ansible ``command:``, a CI ``run: |`` step.

Grafana dashboards (JSON) keep a panel target's PromQL in ``"expr"``, a templating variable's
in ``"query"``, and a forced minimum step in ``"interval"`` (``"2m"``: no step under two
minutes, the one-in-eight trap). :mod:`json` keeps no positions, so the file is validated with
it, then each such string is found in the raw text with a JSON-string pattern and decoded
with a map from each decoded character to its raw offset, so a trap after an escaped quote
(``{job=\\"x\\"}``) still lands on its own column.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from pdcensus.lint.source.flags import FLAG_RE
from pdcensus.advice.model import Severity
from pdcensus.lint.checks import Checker, FlagUse
from pdcensus.lint.model import Snippet
from pdcensus.lint.promql import MAX_QUERY_STEP_SECONDS, duration_seconds
from pdcensus.lint.shell import Word, tokenize
from pdcensus.lint.shell import Arg
from pdcensus.lint.shell_read import ShellReader
from pdcensus.lint.yaml_limits import Deadline, YamlLimit, check_graph

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when the wheel has it: same nodes and marks
_HELM = re.compile(r"\{\{-?\s*(?:\.|\$|include\b|toYaml\b|template\b|if\b|range\b|with\b|end\b|tpl\b|default\b)")
_CONTAINER_KEYS = {"containers", "initContainers", "ephemeralContainers"}


def _scalar_snippet(node: ScalarNode, whole: Snippet) -> Snippet:
    """The scalar's value, each character placed at its file line and column.

    A one-line plain or quoted scalar is its mark plus an offset. A block, folded, multi-line or
    escaped scalar is aligned to the raw text between its marks: each non-blank character of
    the value is the next equal character there, so folding, indentation and escapes move no
    finding off its line."""
    line, col = node.start_mark.line + 1, node.start_mark.column + 1
    quoted = 1 if node.style in {'"', "'"} else 0
    if node.style not in {"|", ">"} and "\n" not in node.value and not (quoted and "\\" in node.value):
        raw = whole.text[node.start_mark.index + quoted:node.start_mark.index + quoted + len(node.value)]
        if raw == node.value:
            return Snippet.at(whole.path, node.value, line, col + quoted)
    start, end = node.start_mark.index, node.end_mark.index
    places, j = [], start
    for char in node.value:
        if not char.isspace():
            while j < end and whole.text[j] != char:
                j += 1
        places.append(whole.position(min(j, max(start, end - 1))))
        if not char.isspace():
            j += 1
    return Snippet(whole.path, node.value, tuple(places[:1]) or ((line, col),), tuple(places))


def _get(node: MappingNode, key: str) -> Node | None:
    for k, v in node.value:
        if isinstance(k, ScalarNode) and k.value == key and isinstance(v, Node):
            return v
    return None


class DeployReader:
    """Reads the YAML documents of one file into the shell reader's invocations and the checks."""

    def __init__(self, checker: Checker, shell: ShellReader, path: str, text: str) -> None:
        self.checker = checker
        self.shell = shell
        self.path = path
        self.whole = Snippet.whole(path, text)
        self.done: set[int] = set()
        self.deadline = Deadline()

    def arg(self, node: ScalarNode) -> Arg:
        snippet = _scalar_snippet(node, self.whole)
        return Arg(node.value, snippet, 0, literal=node.value)

    def argv(self, node: Node | None, split: bool = False) -> list[Arg]:
        """A list of scalars, or (``split``) one string split into words as compose does."""
        if isinstance(node, SequenceNode):
            return [self.arg(item) for item in node.value if isinstance(item, ScalarNode)]
        if isinstance(node, ScalarNode) and node.value:
            if not split:
                return [self.arg(node)]
            snippet = _scalar_snippet(node, self.whole)
            return [Arg(w.raw, snippet, w.start) for w in tokenize(snippet.text) if isinstance(w, Word)]
        return []

    def env_pair(self, name: ScalarNode, value: Node | None, into: list[FlagUse]) -> None:
        if not name.value.startswith("RADIANCE_"):
            return
        at = (name.start_mark.line + 1, name.start_mark.column + 1)
        if isinstance(value, ScalarNode):
            snippet = _scalar_snippet(value, self.whole)
            default = re.fullmatch(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-([^}$]*)\}", value.value)  # compose's ${X:-v}
            use = self.checker.env(name.value, default.group(1) if default else value.value, at,
                                   snippet.position(default.start(1) if default else 0), conditional=bool(default))
        else:
            use = self.checker.env(name.value, None, at, None)
        if use is not None:
            into.append(use)

    def read(self, text: str) -> None:
        template = _HELM.search(text)
        if template is not None:  # read what parses, and say the template's values are not
            self.checker.add("unreadable-yaml", Severity.INFO, self.whole.position(template.start()), self.path,
                             "a Helm template, not rendered YAML: its {{ ... }} values are not checked; "
                             "lint the output of `helm template`")
        try:
            documents = list(yaml.compose_all(text, Loader=_LOADER))
        except (yaml.YAMLError, RecursionError) as exc:
            if template is None:
                mark = getattr(exc, "problem_mark", None)
                at = self.whole.position(mark.index) if mark is not None else (1, 1)
                first = str(exc).splitlines()[0] if str(exc) else "nested too deep"
                self.checker.add("unreadable-yaml", Severity.WARNING, at, self.path,
                                 f"not readable as YAML ({first}); not checked")
            return
        try:  # an alias bomb composes cheaply as a graph; walking it as a tree is what never ends
            for doc in documents:
                if doc is not None:
                    check_graph(doc)
            for doc in documents:
                if doc is not None:
                    self.document(doc)
        except YamlLimit as exc:
            self.checker.add("yaml-limit", Severity.ERROR, (1, 1), self.path,
                             f"not checked: {exc}")

    def document(self, doc: Node) -> None:
        if isinstance(doc, MappingNode):
            services = _get(doc, "services")
            if isinstance(services, MappingNode):
                for _, service in services.value:
                    if isinstance(service, MappingNode):
                        self.compose_service(service)
        for node in _walk(doc, tick=self.deadline.tick):
            if isinstance(node, MappingNode):
                for key, value in node.value:
                    if isinstance(key, ScalarNode) and key.value in _CONTAINER_KEYS \
                            and isinstance(value, SequenceNode):
                        for container in value.value:
                            if isinstance(container, MappingNode) and id(container) not in self.done:
                                self.container(container)
        self.leftovers(doc)

    def container(self, node: MappingNode) -> None:
        self.done.add(id(node))
        env: list[FlagUse] = []
        values: dict[str, str] = {}
        env_node = _get(node, "env")
        if isinstance(env_node, SequenceNode):
            self.done.add(id(env_node))
            for item in env_node.value:
                name = _get(item, "name") if isinstance(item, MappingNode) else None
                value = _get(item, "value") if isinstance(item, MappingNode) else None
                if isinstance(name, ScalarNode):
                    self.env_pair(name, value, env)
                    if isinstance(value, ScalarNode):
                        values[name.value] = value.value
        # Kubernetes expands $(NAME) in command and args from the container's env (not $$(NAME))
        command, args = ([_expand_k8s(a, values) for a in self.argv(_get(node, key))] for key in ("command", "args"))
        image = _get(node, "image")
        if command:
            self.shell.command(command + args, env)
        else:
            self.shell.image_argv(args, env, image.value if isinstance(image, ScalarNode) else "")

    def compose_service(self, node: MappingNode) -> None:
        self.done.add(id(node))
        env: list[FlagUse] = []
        environment = _get(node, "environment")
        if isinstance(environment, MappingNode):
            self.done.add(id(environment))
            for key, value in environment.value:
                if isinstance(key, ScalarNode):
                    self.env_pair(key, value, env)
        elif isinstance(environment, SequenceNode):
            self.done.add(id(environment))
            for item in environment.value:
                if isinstance(item, ScalarNode) and "=" in item.value:
                    snippet = _scalar_snippet(item, self.whole)
                    name, _, value = item.value.partition("=")
                    use = self.checker.env(name, value, snippet.position(0), snippet.position(len(name) + 1))
                    if use is not None:
                        env.append(use)
        entrypoint = self.argv(_get(node, "entrypoint"), split=True)
        command = self.argv(_get(node, "command"), split=True)
        image = _get(node, "image")
        if entrypoint:
            self.shell.command(entrypoint + command, env)
        else:
            self.shell.image_argv(command, env, image.value if isinstance(image, ScalarNode) else "")

    def leftovers(self, doc: Node) -> None:
        """Outside containers and services: ``RADIANCE_*`` keys, ``expr``/``query`` strings, and
        argv held elsewhere (Helm values ``extraArgs``, a kustomize patch ``value``, an Ansible
        ``command``, a CI ``run: |`` script) when it passes a flag the pinned build declares."""
        queries: set[int] = set()
        for node in _walk(doc, skip=self.done, tick=self.deadline.tick):
            if not isinstance(node, MappingNode):
                continue
            name = _get(node, "name")
            if isinstance(name, ScalarNode) and name.value.startswith("RADIANCE_"):  # an env list item
                pair: list[FlagUse] = []
                self.env_pair(name, _get(node, "value"), pair)
                self.checker.invocation(pair)
                queries.add(id(_get(node, "value")))
            for key, value in node.value:
                if not isinstance(key, ScalarNode):
                    continue
                if key.value.startswith("RADIANCE_"):
                    uses: list[FlagUse] = []
                    self.env_pair(key, value, uses)
                    self.checker.invocation(uses)
                    queries.add(id(value))
                elif key.value in {"expr", "query"} and isinstance(value, ScalarNode):
                    self.checker.queries(_scalar_snippet(value, self.whole), step_forms=False)
                    queries.add(id(value))
        for node in _walk(doc, skip=self.done | queries, tick=self.deadline.tick):
            if isinstance(node, SequenceNode) and any(isinstance(i, ScalarNode) and self._declared(i.value)
                                                      for i in node.value):
                self.done.update(id(i) for i in node.value)
                self.shell.image_argv(self.argv(node), [])
            elif isinstance(node, ScalarNode) and id(node) not in self.done and self._declared(node.value):
                if any(c.isspace() for c in node.value.strip()):
                    self.shell.read(_scalar_snippet(node, self.whole))
                else:
                    self.shell.image_argv([self.arg(node)], [])

    def _declared(self, text: str) -> bool:
        return any(m.group(0) in self.checker.schema for m in FLAG_RE.finditer(text))


def _expand_k8s(arg: Arg, values: dict[str, str]) -> Arg:
    """An argv element with its ``$(NAME)`` references replaced as the kubelet replaces them."""
    if arg.literal is None or "$(" not in arg.literal:
        return arg
    text = re.sub(r"(?<!\$)\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: values.get(m.group(1), m.group(0)), arg.literal)
    return Arg(arg.raw, arg.snippet, arg.start, arg.conditional, literal=text)


def _walk(node: Node, skip: set[int] | None = None, tick: Callable[[], None] | None = None) -> Iterator[Node]:
    """Every node as a tree, depth first (aliases expanded: :func:`check_graph` bounds how many)."""
    stack = [node]
    while stack:
        node = stack.pop()
        if skip is not None and id(node) in skip:
            continue
        if tick is not None:
            tick()
        yield node
        if isinstance(node, MappingNode):
            stack.extend(n for pair in reversed(node.value) for n in reversed(pair))
        elif isinstance(node, SequenceNode):
            stack.extend(reversed(node.value))


_KEYED_STRING = re.compile(r'"(expr|query|interval)"\s*:\s*"((?:\\.|[^"\\])*)"')
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def decode_with_offsets(body: str) -> tuple[str, list[int]]:
    """A JSON string body decoded, and the raw offset of each decoded character."""
    out: list[str] = []
    offsets: list[int] = []
    i = 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt == "u" and i + 6 <= len(body):
                out.append(chr(int(body[i + 2:i + 6], 16)))
                offsets.append(i)
                i += 6
                continue
            out.append(_SIMPLE_ESCAPES.get(nxt, nxt))
            offsets.append(i)
            i += 2
            continue
        out.append(body[i])
        offsets.append(i)
        i += 1
    return "".join(out), offsets


def read_json(text: str, path: str, checker: Checker) -> None:
    """The PromQL of every ``expr``/``query`` string and each target's forced minimum step."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        checker.add("unreadable-json", Severity.WARNING, (exc.lineno, exc.colno), path,
                    f"not readable as JSON ({exc.msg}); not checked")
        return
    whole = Snippet.whole(path, text)
    for m in _KEYED_STRING.finditer(text):
        decoded, offsets = decode_with_offsets(m.group(2))
        base = m.start(2)
        if m.group(1) == "interval":
            try:  # Grafana's own forms ($__interval, >10s, 1.5m) are not Prometheus durations: not checked
                seconds = duration_seconds(decoded)
            except ValueError:
                seconds = 0.0
            if seconds > MAX_QUERY_STEP_SECONDS:
                checker.add("query-step-over-30s", Severity.ERROR, whole.position(base), f"interval {decoded}",
                            f"the target's minimum step (interval) {decoded} = {seconds:g} s > "
                            f"{MAX_QUERY_STEP_SECONDS:g} s: a 15 s scrape against a 120 s step samples one "
                            "in eight; use 30 s or less (and no longer than the scrape interval)")
            continue
        places = tuple(whole.position(base + o) for o in offsets)
        checker.queries(Snippet(path, decoded, places[:1] or (whole.position(base),), places), step_forms=False)
