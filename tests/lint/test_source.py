"""The pinned source: a new C++ layout still read, refusals read with their lines, every place it lives."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from pdcensus.lint.source.cpp_rules import describe, evaluate
from pdcensus.lint.source.flags import parse_config_source
from pdcensus.lint.source.pinned import load_pinned, load_schema
from pdcensus.errors import UsageError
from pdcensus.lint.files import lint_paths
from pdcensus.sim.config_source import render_config_source

SOURCES = Path(__file__).parent.parent / "fixtures" / "config_sources"
XMACRO = SOURCES / "xmacro_switch.cpp"


def test_an_x_macro_help_table_and_members_in_tables_and_switch_labels_are_read() -> None:
    schema = load_schema(XMACRO)
    assert set(schema.flags) == {
        "--model", "--port", "--max-num-seqs", "--max-num-batched-tokens", "--prefill-interleave",
        "--busy-prefill-chunk", "--prefill-span", "--checkpoint-interval", "--checkpoint-policy",
        "--checkpoint-slots", "--kv-dtype"}
    policy, dtype = schema.flags["--checkpoint-policy"], schema.flags["--kv-dtype"]
    assert policy.choices == ("geometric-backoff", "tip-only", "keep-all")
    assert policy.choices_origin == "validator table line 44"  # the std::map the lookup uses
    assert dtype.choices == ("auto", "fp8", "bf16") and dtype.choices_origin == "validator table line 62"
    assert schema.flags["--prefill-interleave"].default == "0"
    assert schema.flags["--busy-prefill-chunk"].accepts_integer


def test_bounds_and_cross_flag_rules_are_read_from_the_validator_with_their_lines() -> None:
    schema = load_schema(XMACRO)
    rules = {r.line: describe(r.condition) for r in schema.refusals}
    assert rules == {
        76: "--prefill-interleave < 0 || --prefill-interleave > 16",
        79: "--max-num-batched-tokens < 64",  # kMinBatchTokens, a named constant
        82: "--prefill-span > 1 && --max-num-batched-tokens != --prefill-span * --checkpoint-interval",
    }


def test_a_helper_bound_becomes_a_refusal_at_each_call_that_passes_a_number() -> None:
    text = render_config_source()
    schema = parse_config_source(text)
    bounds = {r.flags()[0]: r for r in schema.refusals if len(r.flags()) == 1}
    lines = text.split("\n")
    batch = bounds["--max-num-batched-tokens"]
    assert describe(batch.condition) == "--max-num-batched-tokens < 64"
    assert '"--max-num-batched-tokens"' in lines[batch.line - 1] and "parse_int" in lines[batch.line - 1]
    assert evaluate(bounds["--prefill-interleave"].condition, {"--prefill-interleave": -1.0}) == 1.0
    assert evaluate(bounds["--prefill-interleave"].condition, {"--prefill-interleave": 0.0}) == 0.0
    assert evaluate(bounds["--busy-prefill-chunk"].condition, {}) is None  # "auto": nothing to compare


@pytest.mark.parametrize(
    ("arm", "rule"),
    [pytest.param("--prefill-interleave -1", "value-out-of-bounds", id="interleave-negative"),
     pytest.param("--max-num-batched-tokens 10", "value-out-of-bounds", id="budget-below-64"),
     pytest.param("--prefill-span 4 --max-num-batched-tokens 8192", "cross-flag-rule", id="span-needs-budget"),
     pytest.param("--prefill-interleave 2.5", "non-integer-value", id="non-integer"),
     pytest.param("--prefill-span 4 --max-num-batched-tokens 16384", None, id="span-with-budget"),
     pytest.param("--prefill-interleave 0", None, id="interleave-zero")],
)
def test_the_simulators_source_refuses_what_its_validator_refuses(tmp_path: Path, arm: str, rule: str | None) -> None:
    source = tmp_path / "config.cpp"
    source.write_text(render_config_source())
    script = tmp_path / "serve.sh"
    script.write_text(f"radiance serve --checkpoint-interval 4096 --max-model-len 131072 {arm}\n")
    report = lint_paths([str(script)], str(tmp_path))
    assert [f.rule for f in report.findings] == ([rule] if rule else [])
    assert all(f.severity.value == "error" for f in report.findings)


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.invalid", "-c", "user.name=t",
                           *args], capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "radiance"
    (root / "core").mkdir(parents=True)
    _git(root, "init", "-q")
    old = (SOURCES / "struct_rows.cpp").read_text().replace("keep-all", "keep-everything")
    (root / "core" / "config.cpp").write_text(old)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "1.8.3")
    _git(root, "tag", "v1.8.3")
    (root / "core" / "config.cpp").write_text((SOURCES / "struct_rows.cpp").read_text())
    _git(root, "commit", "-qam", "1.8.4")
    _git(root, "tag", "v1.8.4")
    return root


def test_a_git_ref_is_read_without_checkout_and_named_in_the_report(repo: Path, tmp_path: Path) -> None:
    runbook = tmp_path / "arm.md"
    runbook.write_text("```\nradiance serve --checkpoint-policy keep-everything\n```\n")
    old = lint_paths([str(runbook)], str(repo), ref="v1.8.3")
    new = lint_paths([str(runbook)], str(repo), ref="v1.8.4")
    assert old.findings == () and [f.rule for f in new.findings] == ["unknown-enum-value"]
    commit = _git(repo, "rev-parse", "v1.8.4")
    assert new.ref == "v1.8.4" and commit[:12] in new.source and "core/config.cpp at v1.8.4" in new.source
    assert (repo / "core" / "config.cpp").read_text() == (SOURCES / "struct_rows.cpp").read_text()


@pytest.mark.parametrize(
    ("ref", "match"),
    [pytest.param("v9.9.9", "does not name a commit", id="missing"),
     pytest.param("v1.8.4-dirty", "uncommitted changes", id="describe-dirty"),
     pytest.param("--output=/tmp/x", "is not a git ref", id="option-shaped")],
)
def test_a_missing_dirty_or_option_shaped_ref_is_refused(repo: Path, ref: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        load_pinned(str(repo), ref)


def test_a_work_tree_with_an_edited_source_is_not_the_pin(repo: Path) -> None:
    assert load_pinned(str(repo)).schema.flags["--checkpoint-policy"].choices[-1] == "keep-all"  # clean
    (repo / "core" / "config.cpp").write_text("// edited\n" + (SOURCES / "struct_rows.cpp").read_text())
    with pytest.raises(UsageError, match="uncommitted changes"):
        load_pinned(str(repo))


def test_a_source_tarball_is_read_without_extracting(tmp_path: Path) -> None:
    tarball = tmp_path / "radiance-1.8.5.tar.gz"
    data = XMACRO.read_bytes()
    with tarfile.open(tarball, "w:gz") as archive:
        info = tarfile.TarInfo("radiance-1.8.5/core/config.cpp")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    pinned = load_pinned(str(tarball))
    assert pinned.description == f"radiance-1.8.5/core/config.cpp in {tarball}"
    assert pinned.schema.flags["--kv-dtype"].choices == ("auto", "fp8", "bf16")
    assert not (tmp_path / "radiance-1.8.5").exists()


def test_a_directory_holding_core_config_cpp_is_a_source(tmp_path: Path) -> None:
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "config.cpp").write_bytes(XMACRO.read_bytes())
    assert load_pinned(str(tmp_path)).description.endswith("core/config.cpp")


STYLES = Path(__file__).parent.parent / "fixtures" / "config_styles"
BAD_ARM = "radiance serve --prefill-interleave 17 --checkpoint-policy keepall --max-num-batched-tokens 10\n"
GOOD_ARM = "radiance serve --prefill-interleave 2 --checkpoint-policy tip-only --max-num-batched-tokens 4096\n"


@pytest.mark.parametrize(
    ("name", "expected"),
    [pytest.param("gflags.cpp", {("value-out-of-bounds", "--prefill-interleave 17")}, id="gflags-validator"),
     pytest.param("absl.cpp", {("unknown-enum-value", "--checkpoint-policy keepall"),
                               ("value-out-of-bounds", "--max-num-batched-tokens 10")}, id="abseil"),
     pytest.param("cli11.cpp", {("value-out-of-bounds", "--prefill-interleave 17"),
                                ("unknown-enum-value", "--checkpoint-policy keepall")}, id="cli11-checks"),
     pytest.param("getopt.c", {("unknown-enum-value", "--checkpoint-policy keepall")}, id="getopt-long")],
)
def test_flag_library_declarations_yield_flags_members_and_bounds(tmp_path: Path, name: str,
                                                                  expected: set[tuple[str, str]]) -> None:
    """What each library's source states is checked; what it does not state is never guessed."""
    bad, good = tmp_path / "bad.sh", tmp_path / "good.sh"
    bad.write_text(BAD_ARM)
    good.write_text(GOOD_ARM)
    source = str(STYLES / name)
    assert {(f.rule, f.subject) for f in lint_paths([str(bad)], source).findings} == expected
    assert lint_paths([str(good)], source).findings == ()
    assert {"--prefill-interleave", "--checkpoint-policy", "--max-num-batched-tokens"} <= set(load_schema(source).flags)


def test_a_gflags_source_accepts_both_spellings_of_a_declared_name() -> None:
    schema = load_schema(STYLES / "gflags.cpp")
    assert "--prefill_interleave" in schema and "--prefill-interleave" in schema
    assert schema.flags["--prefill-interleave"].default == "0" and schema.flags["--enable-prefix-cache"].argument == ""


def test_members_compared_in_a_parser_function_and_a_flat_name_set_are_read(tmp_path: Path) -> None:
    """``if (s == "tip-only")`` chains in the function the setter calls; ``{"auto", "fp8"}`` sets;
    a parser that also converts numbers (``std::stol``) accepts integers beside its names."""
    schema = load_schema(STYLES / "compare_chain.cpp")
    assert schema.flags["--checkpoint-policy"].choices == ("geometric-backoff", "tip-only", "keep-all")
    assert schema.flags["--kv-dtype"].choices == ("auto", "fp8", "bf16")
    assert schema.flags["--mode"].choices == ()  # one compared name is no member list
    script = tmp_path / "s.sh"
    script.write_text("radiance serve --busy-prefill-chunk 512 --kv-dtype fp8 --checkpoint-policy keep-all\n"
                      "radiance serve --busy-prefill-chunk half --kv-dtype fp4 --mode debug\n")
    found = {(f.line, f.subject) for f in lint_paths([str(script)], str(STYLES / "compare_chain.cpp")).findings}
    assert found == {(2, "--busy-prefill-chunk half"), (2, "--kv-dtype fp4")}


def test_clap_style_help_text_gives_possible_values_and_defaults() -> None:
    schema = load_schema(STYLES / "clap_help.txt")
    assert schema.flags["--checkpoint-policy"].choices == ("geometric-backoff", "tip-only", "keep-all")
    assert schema.flags["--prefill-interleave"].default == "0" and schema.flags["--prefill-interleave"].accepts_integer


@pytest.mark.parametrize(
    ("arm", "refused"),
    [pytest.param("--prefill-interleave 17", True, id="above-range"),
     pytest.param("--prefill-interleave 16", False, id="range-edge"),
     pytest.param("--max-num-batched-tokens 63", True, id="below-at-least"),
     pytest.param("--checkpoint-slots 0", True, id="not-positive"),
     pytest.param("--checkpoint-slots 1", False, id="positive"),
     pytest.param("--speculative-tokens 9", True, id="above-at-most"),
     pytest.param("--speculative-tokens -1", True, id="negative"),
     pytest.param("--speculative-tokens 0", False, id="zero")],
)
def test_bounds_stated_only_in_error_strings_are_read_when_the_check_is_a_call(
        tmp_path: Path, arm: str, refused: bool) -> None:
    script = tmp_path / "s.sh"
    script.write_text(f"radiance serve {arm}\n")
    findings = lint_paths([str(script)], str(STYLES / "stated_bounds.cpp")).findings
    assert [f.rule for f in findings] == (["value-out-of-bounds"] if refused else [])
    assert all("error string at line" in f.message for f in findings)


def test_a_help_table_naming_flags_without_dashes_is_read_and_member_tables_are_not_flags() -> None:
    schema = load_schema(STYLES / "dashless_table.cpp")
    assert set(schema.flags) == {"--model", "--prefill-interleave", "--max-num-batched-tokens", "--checkpoint-policy"}
    assert schema.flags["--prefill-interleave"].accepts_integer
    assert schema.flags["--checkpoint-policy"].choices == ("geometric-backoff", "tip-only", "keep-all")
    assert not {"--tip-only", "--keep-all"} & set(load_schema(XMACRO).flags)  # {"tip-only", Policy::kTip} rows


def test_the_simulators_member_tables_beside_a_dashes_literal_are_not_read_as_flags() -> None:
    schema = parse_config_source(render_config_source())  # has "--" and {"tip-only", Policy::kTipOnly} rows
    assert not {"--geometric-backoff", "--tip-only", "--keep-all"} & set(schema.flags)


def test_min_and_max_fields_of_help_rows_are_bounds_when_the_validator_reads_them(tmp_path: Path) -> None:
    script = tmp_path / "s.sh"
    script.write_text("radiance serve --prefill-interleave 17 --max-num-seqs 2000 --prefill-span -1\n"
                      "radiance serve --prefill-interleave 16 --max-num-seqs 1 --max-num-batched-tokens 64\n")
    findings = lint_paths([str(script)], str(STYLES / "minmax_table.cpp")).findings
    assert {(f.line, f.subject) for f in findings} == {(1, "--prefill-interleave 17"), (1, "--max-num-seqs 2000")}
    assert all("help table line" in f.message for f in findings)


def test_a_usage_string_printed_by_the_parser_is_read_as_help_text_line_by_line(tmp_path: Path) -> None:
    schema = load_schema(STYLES / "usage_string.cpp")
    assert set(schema.flags) == {"--model", "--prefill-interleave", "--checkpoint-policy", "--max-num-batched-tokens"}
    assert schema.flags["--checkpoint-policy"].choices == ("geometric-backoff", "tip-only", "keep-all")
    assert schema.flags["--model"].choices == ()  # the list on another line of the string is not --model's
    script = tmp_path / "s.sh"
    script.write_text("radiance serve --checkpoint-policy keepall --max-num-batched-tokens 32 --prefill-interleave x\n")
    rules = {f.rule for f in lint_paths([str(script)], str(STYLES / "usage_string.cpp")).findings}
    assert rules == {"unknown-enum-value", "value-out-of-bounds", "non-integer-value"}
