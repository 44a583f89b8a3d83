"""The pinned-source schema parser on differently formatted config sources and --help text."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdcensus.lint.source.cpp_text import TokenKind, tokenize
from pdcensus.lint.source.flags import enum_lists, parse_config_source
from pdcensus.lint.source.pinned import load_schema, parse_help_text
from pdcensus.errors import DataError, UsageError

FIXTURES = Path(__file__).parent.parent / "fixtures" / "config_sources"
SOURCES = sorted(p.name for p in FIXTURES.iterdir())
KNOBS = {"--prefill-interleave", "--busy-prefill-chunk", "--prefill-span", "--checkpoint-policy",
         "--checkpoint-interval", "--checkpoint-slots", "--max-num-batched-tokens", "--max-num-seqs"}
POLICIES = ("geometric-backoff", "tip-only", "keep-all")


@pytest.mark.parametrize("name", SOURCES)
def test_every_knob_is_read_from_each_layout(name: str) -> None:
    schema = load_schema(FIXTURES / name)
    assert KNOBS <= set(schema.flags), KNOBS - set(schema.flags)


@pytest.mark.parametrize("name", SOURCES)
def test_checkpoint_policy_members_come_from_the_source_in_order(name: str) -> None:
    spec = load_schema(FIXTURES / name).flags["--checkpoint-policy"]
    assert spec.choices == POLICIES
    assert not spec.accepts_integer


@pytest.mark.parametrize("name", [n for n in SOURCES if n.endswith(".cpp")])
def test_policy_members_are_enumerated_from_the_validator_not_the_help_table(name: str) -> None:
    spec = load_schema(FIXTURES / name).flags["--checkpoint-policy"]
    assert spec.choices_origin.startswith(("validator line ", "validator table line "))
    line = int(spec.choices_origin.rsplit(" ", 1)[1])
    text = (FIXTURES / name).read_text().splitlines()
    window = "\n".join(text[line - 1:line + 2])
    assert "tip-only" in window


@pytest.mark.parametrize("name", SOURCES)
def test_auto_or_n_arguments_accept_auto_and_integers_only(name: str) -> None:
    spec = load_schema(FIXTURES / name).flags["--busy-prefill-chunk"]
    assert spec.refusal("auto") is None
    assert spec.refusal("512") is None
    refusal = spec.refusal("fast")
    assert refusal is not None and "'fast'" in refusal and "auto" in refusal


def test_commented_out_rows_are_not_flags() -> None:
    assert "--ghost-flag" not in load_schema(FIXTURES / "struct_rows.cpp").flags
    assert "--commented-out" not in load_schema(FIXTURES / "map_table.cpp").flags


def test_adjacent_literals_join_into_one_help_string() -> None:
    spec = load_schema(FIXTURES / "struct_rows.cpp").flags["--prefill-interleave"]
    assert spec.help == "decode-only steps held after each chunk step taken beside decoders (default: 0)"
    assert spec.default == "0"
    assert spec.argument == "N"


def test_a_prose_message_is_not_taken_for_a_row() -> None:
    schema = load_schema(FIXTURES / "struct_rows.cpp")
    assert "only with" not in schema.flags["--prefill-span"].help


def test_a_second_enum_in_the_same_validator_goes_to_its_own_flag() -> None:
    spec = load_schema(FIXTURES / "struct_rows.cpp").flags["--kv-dtype"]
    assert spec.choices == ("auto", "fp8", "bf16")


def test_macro_rows_declared_by_identifier_become_kebab_flags() -> None:
    schema = load_schema(FIXTURES / "macro_calls.cpp")
    assert schema.flags["--prefill-interleave"].help == "decode-only steps held after each chunk step"
    assert schema.flags["--max-num-batched-tokens"].argument == "TOKENS"


def test_designated_initialisers_are_read_by_field_name_in_any_order() -> None:
    spec = load_schema(FIXTURES / "designated.cpp").flags["--prefill-interleave"]
    assert (spec.argument, spec.help) == ("N", "decode-only steps held after each chunk step")
    raw = load_schema(FIXTURES / "designated.cpp").flags["--busy-prefill-chunk"]
    assert raw.help == 'chunk size while decoders run; "auto" reserves rows'


def test_help_text_continuation_lines_join_the_flags_help() -> None:
    schema = load_schema(FIXTURES / "radiance_help.txt")
    assert schema.flags["--prefill-interleave"].help.endswith("beside decoders (default: 0)")
    assert schema.flags["--prefill-interleave"].default == "0"
    assert schema.flags["--max-num-batched-tokens"].argument == "TOKENS"


def test_the_simulators_own_config_source_parses_to_its_flag_table() -> None:
    config = pytest.importorskip("pdcensus.sim.config")
    source_mod = pytest.importorskip("pdcensus.sim.config_source")
    text = source_mod.render_config_source()
    schema = parse_config_source(text, "sim config.cpp")
    for spec in config.FLAGS:
        assert spec.flag in schema.flags
        if spec.members:
            assert schema.flags[spec.flag].choices == spec.members
        if spec.kind is config.FlagKind.AUTO_OR_INT:  # a shared helper validates these: found via its callers
            parsed = schema.flags[spec.flag]
            assert (parsed.choices, parsed.accepts_integer) == (("auto",), True)
            assert parsed.choices_origin.startswith("validator")


@pytest.mark.parametrize(
    ("text", "members"),
    [
        pytest.param("expected one of: a-b, c, d", ("a-b", "c", "d"), id="expected-one-of"),
        pytest.param("x | y | z", ("x", "y", "z"), id="pipes"),
        pytest.param("must be one of {a,b,c}", ("a", "b", "c"), id="braces"),
        pytest.param("valid values are auto, fp8 and bf16", ("auto", "fp8", "bf16"), id="and"),
        pytest.param("bad policy 'q' (expected keep-all, tip-only or geometric-backoff)",
                     ("keep-all", "tip-only", "geometric-backoff"), id="or"),
        pytest.param("choices: [`p`, `q`]", ("p", "q"), id="backticked"),
        pytest.param("expected N, got 'x'", None, id="got-is-not-a-member"),
        pytest.param("expected an integer", None, id="no-list"),
    ],
)
def test_enum_lists_read_the_phrasings_validators_use(text: str, members: tuple[str, ...] | None) -> None:
    found = enum_lists(text)
    assert found == ([] if members is None else [members])


def test_tokenizer_keeps_urls_in_strings_and_reads_raw_strings_and_escapes() -> None:
    tokens = tokenize('auto a = "http://x/*y*/"; // c\nauto b = R"d(q"uote)d" "\\t\\x41";')
    strings = [t for t in tokens if t.kind is TokenKind.STRING]
    assert [s.text for s in strings] == ["http://x/*y*/", 'q"uote\tA']
    assert [s.line for s in strings] == [1, 2]


@pytest.mark.parametrize(
    ("content", "error", "match"),
    [
        pytest.param("int main() { return 0; }\n", DataError, "no flag found", id="cpp-without-flags"),
        pytest.param("", DataError, "no flag found", id="empty"),
    ],
)
def test_a_source_without_flags_is_refused_with_the_file_named(tmp_path: Path, content: str,
                                                               error: type[Exception], match: str) -> None:
    path = tmp_path / "config.cpp"
    path.write_text(content)
    with pytest.raises(error, match=match) as info:
        load_schema(path)
    assert str(path) in str(info.value)


def test_a_missing_source_or_a_directory_without_one_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read pinned source"):
        load_schema(tmp_path / "nope.cpp")
    with pytest.raises(UsageError, match="config.cpp"):
        load_schema(tmp_path)


def test_help_text_without_flags_is_refused() -> None:
    with pytest.raises(DataError, match="no flag found"):
        parse_help_text("usage: radiance serve\n", "help.txt")
