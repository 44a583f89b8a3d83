"""The import graph read from the source: no circle, and no arrow from a lower layer to a higher one.

Every ``import`` of a ``pdcensus`` module counts, wherever it stands (at the top, inside a
function, under ``if TYPE_CHECKING``): a circle hidden behind a function-local or type-only
import is still two modules that cannot change alone.

The layers, lowest first (a module may import its own layer and the layers below it):

* ``errors``, ``extras``, ``mechanism``: the exception tree, the optional-extra check, and the
  mechanisms' vocabulary the census and the simulator's truth share;
* ``engines``: the engines wing, one record per engine (profiles named, counting rules, knob
  catalogue, flag spellings), read by every layer above and by the simulator;
* ``series.model``: the recording data model every reader fills;
* ``sources``: readers and writers of recordings, servers and side channels;
* ``series``: PromQL, engine profiles, resampling, on top of the model;
* ``queries``: query generation (PromQL export, recording rules, the Grafana dashboard) from
  the profiles' sample names, apart from the report's rendering; the fleet and the commands use it;
* ``census``, then ``advice``, then ``verify`` (verify-arm: a caller of the census and the advice,
  whose verdict the report renders), then ``lint`` (it reads the advice's pinned schema), then ``report``;
* ``api``, ``fleet``, ``engine`` (a real engine driven end to end), ``whatif`` (the simulator
  calibrated to a recording): the library's entry points;
* ``commands`` (``commands.base`` first), then ``cli`` and ``__main__``.

The simulator (``sim``) stands beside: it may import ``series`` and below, and only the
command line and ``whatif`` import it. ``whatif`` must: it calibrates the simulator to a
recording and runs it with and without a knob, which is the simulator driven as a library,
not a command (the census and the advice below it still never see the simulator).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
LAYERS: list[tuple[str, ...]] = [
    ("pdcensus", "pdcensus.errors", "pdcensus.extras", "pdcensus.mechanism"),
    ("pdcensus.engines",),
    ("pdcensus.series.model",),
    ("pdcensus.sources",),
    ("pdcensus.series",),
    ("pdcensus.queries",),
    ("pdcensus.census",),
    ("pdcensus.advice",),
    ("pdcensus.verify",),
    ("pdcensus.lint",),
    ("pdcensus.report",),
    ("pdcensus.api", "pdcensus.fleet", "pdcensus.engine", "pdcensus.whatif"),
    ("pdcensus.commands.base",),
    ("pdcensus.commands",),
    ("pdcensus.cli", "pdcensus.__main__"),
]
SIM = "pdcensus.sim"
SIM_MAY_IMPORT_UP_TO = LAYERS.index(("pdcensus.series",))
SIM_IMPORTED_FROM = LAYERS.index(("pdcensus.commands",))
SIM_IMPORTERS_BELOW_COMMANDS = ("pdcensus.whatif",)  # the calibrated twin (see the docstring)


def _module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """module -> the pdcensus modules it imports.

    ``from package import name`` counts the package (its ``__init__``) and, where ``name`` is a
    submodule, the submodule too: inside a package whose ``__init__`` re-exports its submodules,
    ``from package import sibling`` is a circle through the ``__init__`` (``promql.__init__`` ->
    ``evaluator`` -> ``from promql import functions`` was one); ``import package.sibling as
    sibling`` is not.
    """
    files = {_module_name(p, src): p for p in src.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]) if node.level \
                    else node.module or ""
                found.add(base)  # ``from package import sub`` reads the package's namespace: its __init__ runs first
                found.update(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in files)
        graph[name] = {m.rstrip(".") for m in found if m.rstrip(".") in files and m != name}
    return graph


def rank(module: str) -> int | None:
    """The index of the most specific layer ``module`` belongs to; None for the simulator."""
    if module == SIM or module.startswith(SIM + "."):
        return None
    best, best_len = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            inside = module == prefix or (prefix != "pdcensus" and module.startswith(prefix + "."))
            if inside and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    assert best >= 0, f"{module} is in no layer: add it to LAYERS"
    return best


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_import_graph_has_no_circle() -> None:
    assert circles(import_graph()) == []


def test_no_module_imports_a_higher_layer_and_only_the_command_line_imports_the_simulator() -> None:
    wrong = []
    for module, imported in import_graph().items():
        mine = rank(module)
        for other in imported:
            theirs = rank(other)
            if mine is None:  # the simulator
                if theirs is not None and theirs > SIM_MAY_IMPORT_UP_TO:
                    wrong.append(f"{module} -> {other}")
            elif theirs is None:
                allowed = any(module == p or module.startswith(p + ".") for p in SIM_IMPORTERS_BELOW_COMMANDS)
                if mine < SIM_IMPORTED_FROM and not allowed:
                    wrong.append(f"{module} -> {other}")
            elif theirs > mine:
                wrong.append(f"{module} -> {other}")
    assert wrong == []


def test_the_checker_sees_a_circle_and_an_upward_arrow() -> None:
    graph = {"pdcensus.census.a": {"pdcensus.census.b"}, "pdcensus.census.b": {"pdcensus.census.a"},
             "pdcensus.sources.c": set()}
    assert circles(graph) == [["pdcensus.census.a", "pdcensus.census.b"]]
    assert rank("pdcensus.sources.fpm") < rank("pdcensus.series.promql.engine") < rank("pdcensus.census.run")  # type: ignore[operator]
    assert rank("pdcensus.series.model") < rank("pdcensus.sources.load")  # type: ignore[operator]
    assert rank("pdcensus.engines.vllm") < rank("pdcensus.series.profiles")  # type: ignore[operator]
    assert rank("pdcensus.sim.engine") is None
    with pytest.raises(AssertionError, match="in no layer"):
        rank("pdcensus.newpackage.module")


def test_the_checker_sees_a_circle_through_a_package_init(tmp_path: Path) -> None:
    """The shape ``series/promql`` had: the ``__init__`` re-exports a module that imports a sibling through it."""
    package = tmp_path / "pdcensus" / "promql"
    package.mkdir(parents=True)
    (tmp_path / "pdcensus" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("from pdcensus.promql.evaluator import query\n")
    (package / "evaluator.py").write_text("from pdcensus.promql import functions\n\ndef query() -> None: ...\n")
    (package / "functions.py").write_text("")
    assert circles(import_graph(tmp_path)) == [["pdcensus.promql", "pdcensus.promql.evaluator"]]
    (package / "evaluator.py").write_text("import pdcensus.promql.functions as functions\n\ndef query() -> None: ...\n")
    assert circles(import_graph(tmp_path)) == []
