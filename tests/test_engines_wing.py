"""The engines wing holds every engine fact: no code outside it chooses by an engine's name.

``pdcensus.engines`` lists each engine once (its registry), and each record's profiles and knob
catalogue resolve. Outside the wing, no comparison reads an engine's name (``profile.engine ==
"tgi"``, ``engine in {"vllm"}``, ``x != "radiance"``): such code asks the engine's record. The scan
reads the source's syntax tree, so a comment or a docstring that names an engine is no finding.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from pdcensus.advice.catalogue import engine_catalogue, engine_of_argv, engine_of_profile
from pdcensus.engines import ENGINES, NAMES, SIMULATED, find, record
from pdcensus.errors import UsageError
from pdcensus.series.profiles import PROFILES

SRC = Path(__file__).resolve().parents[1] / "src" / "pdcensus"
WING = SRC / "engines"
# the issue's own search: a comparison that names the engine (``engine ==``, ``profile.engine !=``)
_TEXT = re.compile(r"\bengine\s*(==|!=)|\bengine\s+(not\s+)?in\s")


def _names_in(node: ast.expr) -> list[str]:
    """Engine names a comparison operand spells: a string, or a tuple / list / set of strings."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str) and i.value in NAMES]


def engine_name_comparisons(path: Path) -> list[str]:
    """``path:line`` of each comparison against an engine's name, and each ``engine ==`` in the code."""
    text = path.read_text()
    where = path.relative_to(SRC.parent) if SRC in path.parents else path.name
    found = []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Compare) and any(
                isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            if any(_names_in(operand) for operand in [node.left, *node.comparators]) or \
                    _TEXT.search(ast.unparse(node)):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_comparison_against_an_engine_name_outside_the_wing() -> None:
    found = [hit for path in sorted(SRC.rglob("*.py")) if WING not in path.parents
             for hit in engine_name_comparisons(path)]
    assert found == []


def test_the_scan_sees_each_form_of_comparison(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('def f(p, e, x):\n    """engine == "tgi" in prose is no finding."""\n'
                      '    a = p.engine == "llamacpp"\n    b = e in {"tgi", "x"}\n    c = "radiance" != x\n'
                      '    d = p.engine in KNOWN\n    return a, b, c, d, x == "other"\n')
    lines = [hit.split(":")[1] for hit in engine_name_comparisons(sample)]
    assert lines == ["3", "4", "5", "6"]


def test_the_registry_lists_each_engine_once_and_one_simulated() -> None:
    assert len(NAMES) == len(set(NAMES)) == 5
    assert set(NAMES) == {"radiance", "vllm", "sglang", "tgi", "llamacpp"}
    assert [r.name for r in ENGINES if r.simulated] == [SIMULATED.name] == ["radiance"]
    assert all(find(n) is record(n) for n in NAMES)
    with pytest.raises(UsageError, match="unknown engine 'nope'"):
        record("nope")


@pytest.mark.parametrize("rules", ENGINES, ids=lambda r: r.name)
def test_each_record_resolves_its_profiles_and_catalogue(rules) -> None:  # type: ignore[no-untyped-def]
    assert rules.profiles, "an engine exports at least one profile"
    for profile in rules.profiles:
        assert PROFILES[profile.name] is profile and profile.engine == rules.name
    assert {spec.profile for spec in rules.ledger_specs} == set(rules.profile_names)
    assert set(rules.rate_terms) <= set(rules.profile_names)
    assert rules.catalogue.engine == rules.name
    assert engine_catalogue(rules.name) is rules.catalogue
    assert rules.catalogue.knobs and all(k.engine == rules.name for k in rules.catalogue.knobs)
    assert all(engine_of_profile(name) == rules.name for name in rules.profile_names)
    if rules.argv_needle:
        assert engine_of_argv([rules.argv_needle, "serve"]) == rules.name
    assert rules.sim_profile in NAMES


def test_every_profile_belongs_to_one_record() -> None:
    owners = {p: [r.name for r in ENGINES if p in r.profile_names] for p in PROFILES}
    assert owners == {p: [PROFILES[p].engine] for p in PROFILES}


def test_the_wing_imports_no_higher_layer() -> None:
    """The wing stands under the series: it imports only itself and the exception tree."""
    for path in WING.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pdcensus"):
                assert node.module.startswith(("pdcensus.engines", "pdcensus.errors")), f"{path.name}: {node.module}"
            if isinstance(node, ast.ImportFrom) and node.module in ("importlib",):
                raise AssertionError(f"{path.name} imports importlib: the registry names its modules")


def test_each_profile_is_detected_from_its_own_names() -> None:
    """The records' detectors, asked in their order, give each profile back from its sample names."""
    from pdcensus.series.profiles import detect_profile

    for name, profile in PROFILES.items():
        found = detect_profile(profile.sample_names())
        assert found is not None and found.profile.name == name
    assert detect_profile({"up", "process_start_time_seconds"}) is None


def test_the_release_in_force_is_the_last_listed_and_every_reader_takes_it() -> None:
    """vLLM 0.32 is one module and one registry line: lint, the advice and the what-if read it from there."""
    from pdcensus.engines import RELEASES, newest_release, release
    from pdcensus.lint.vllm import VLLM_DATA, load_vllm_flags
    from pdcensus.whatif.vllm_knobs import REFUSED

    vllm = newest_release("vllm")
    assert [r for r in RELEASES if r.engine == "vllm"][-1] is vllm and vllm.version == "0.32.0"
    assert all(r.engine in NAMES for r in RELEASES)
    assert VLLM_DATA == vllm.flags_file and load_vllm_flags().version == vllm.version
    assert REFUSED is vllm.twin_refused
    assert release("sglang") is None
    with pytest.raises(UsageError, match="no cited release"):
        newest_release("sglang")
    default = vllm.deployed_value("--max-num-batched-tokens", {}, None)
    assert default is not None and default.is_default and int(default.value) == vllm.assumed_budget


_NEW_RELEASE = '''"""A later vLLM release for the wing's test: the step budget's default differs, one flag more is refused."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pdcensus.engines.vllm_0_32 as before
from pdcensus.engines.record import DeployedValue


def deployed_value(flag: str, deployed: Mapping[str, str], labels: Mapping[str, str] | None = None,
                   ) -> DeployedValue | None:
    if flag == "--max-num-batched-tokens" and flag not in deployed:
        return DeployedValue(flag, "3072", "default", "vLLM 9.99 default")
    return before.deployed_value(flag, deployed, labels)


RELEASE = replace(before.RELEASE, version="9.99.0", deployed_value=deployed_value, assumed_budget=3072,
                  twin_refused={**before.RELEASE.twin_refused, "--made-up-flag": "new in 9.99"})
'''

_READERS = '''
import json
from pdcensus.engines import newest_release, release
from pdcensus.lint.vllm import VLLM_DATA
from pdcensus.whatif.vllm_knobs import REFUSED
r = newest_release("vllm")
d = release("vllm").deployed_value("--max-num-batched-tokens", {}, None)
print(json.dumps({"version": r.version, "lint": VLLM_DATA == r.flags_file, "whatif": sorted(REFUSED),
                  "advice_default": d.value}))
'''


def test_a_new_release_is_one_module_and_one_registry_entry(tmp_path: Path) -> None:
    """In a copy of the source, a new vLLM release is its module plus its import and entry in the registry:
    lint, the what-if and the advice then read it, with no other file touched."""
    import json
    import shutil
    import subprocess
    import sys

    src = tmp_path / "src"
    shutil.copytree(SRC, src / "pdcensus", ignore=shutil.ignore_patterns("__pycache__"))
    (src / "pdcensus" / "engines" / "vllm_9_99.py").write_text(_NEW_RELEASE)
    registry = src / "pdcensus" / "engines" / "registry.py"
    text = registry.read_text()
    text = text.replace("import pdcensus.engines.vllm_0_32 as vllm_0_32\n",
                        "import pdcensus.engines.vllm_0_32 as vllm_0_32\nimport pdcensus.engines.vllm_9_99 as vllm_9_99\n")
    text = text.replace("    vllm_0_32.RELEASE,\n", "    vllm_0_32.RELEASE,\n    vllm_9_99.RELEASE,\n")
    registry.write_text(text)
    changed = sorted(str(p.relative_to(src)) for p in (src / "pdcensus").rglob("*.py")
                     if not (SRC / p.relative_to(src / "pdcensus")).exists()
                     or (SRC / p.relative_to(src / "pdcensus")).read_text() != p.read_text())
    assert changed == ["pdcensus/engines/registry.py", "pdcensus/engines/vllm_9_99.py"]
    out = subprocess.run([sys.executable, "-c", _READERS], env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=120, check=True).stdout
    got = json.loads(out)
    assert got["version"] == "9.99.0" and got["lint"] is True
    assert "--made-up-flag" in got["whatif"]
    assert got["advice_default"] == "3072"
