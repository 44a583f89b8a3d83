"""Structure figures of a source tree (issue #24): files, files over 400 lines, functions over 80 lines, `Any`, import cycles.

Run: .venv/bin/python bench/structure_figures.py TREE (a checkout; cycles via tests/test_layers.import_graph of this one).
"""
import ast, re, sys
from pathlib import Path
root = Path(sys.argv[1])
src = root / "src"
files = sorted(src.rglob("*.py"))
long_files = [(str(p.relative_to(src)), n) for p in files if (n := len(p.read_text().splitlines())) > 400]
long_funcs = []
anys = 0
for p in files:
    t = p.read_text()
    anys += len(re.findall(r"\bAny\b", t))
    for node in ast.walk(ast.parse(t)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = node.end_lineno - node.lineno + 1
            if n > 80:
                long_funcs.append((node.name, n))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.test_layers import import_graph
g = import_graph(src)
# strongly connected components (Tarjan)
index, low, stack, on, sccs, i = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)
def strong(v):
    index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
    for w in g.get(v, ()):
        if w not in index:
            strong(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: sccs.append(sorted(comp))
for v in list(g):
    if v not in index: strong(v)
print(f"files {len(files)}; over 400 lines {len(long_files)} {long_files}")
print(f"functions over 80 lines {len(long_funcs)} {sorted(long_funcs, key=lambda x: -x[1])}")
print(f"'Any' {anys}; import cycles {len(sccs)} {sccs}")
