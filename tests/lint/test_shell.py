"""Shell read as the shell reads it: words with offsets, then which commands are the engine's."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdcensus.lint.source.pinned import load_schema
from pdcensus.lint.files import lint_text
from pdcensus.lint.model import FileKind
from pdcensus.lint.shell import Heredoc, Op, Word, tokenize, unquote

SOURCE = Path(__file__).parent.parent / "fixtures" / "config_sources" / "xmacro_switch.cpp"


def _findings(script: str) -> set[tuple[str, int, str]]:
    schema = load_schema(SOURCE)
    return {(f.rule, f.line, f.subject) for f in lint_text(script, "s.sh", FileKind.SHELL, schema)}


@pytest.mark.parametrize(
    ("raw", "value"),
    [pytest.param("'a b'", "a b", id="single-quotes"), pytest.param('"a\\"b"', 'a"b', id="escaped-quote"),
     pytest.param("a\\ b", "a b", id="escaped-space"), pytest.param('"$X"-y', "$X-y", id="expansion-kept"),
     pytest.param("''", "", id="empty")],
)
def test_words_are_unquoted_as_posix_shell_does(raw: str, value: str) -> None:
    assert unquote(raw) == value


def test_words_keep_their_offsets_through_expansions_arrays_and_redirections() -> None:
    text = 'A=(x "y z") && exec r "${B:+--f 1}" $(c "d)") 2>&1 >/tmp/o\n'
    tokens = tokenize(text)
    words = [(t.raw, t.start) for t in tokens if isinstance(t, Word)]
    assert words == [('A=(x "y z")', 0), ("exec", 15), ("r", 20), ('"${B:+--f 1}"', 22), ('$(c "d)")', 36),
                     ("/tmp/o", 52)]
    assert [t.text for t in tokens if isinstance(t, Op)] == ["&&", "redir", "\n"]


def test_a_heredoc_body_is_one_token_and_not_commands() -> None:
    tokens = tokenize("cat > env <<'EOF'\nRADIANCE_X=1\nradiance serve --y\nEOF\necho done\n")
    bodies = [t.text for t in tokens if isinstance(t, Heredoc)]
    assert bodies == ["RADIANCE_X=1\nradiance serve --y\nEOF\n"]
    assert [t.raw for t in tokens if isinstance(t, Word)] == ["cat", "env", "echo", "done"]


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        pytest.param("git merge --ff-only origin/main\ngit commit --no-verify -m x\n", set(), id="git-flags"),
        pytest.param("curl --silent --max-time 5 http://h/stats\n", set(), id="curl-flags"),
        pytest.param("OPTS='--max-time 5 --checkpoint-policy x'\ncurl $OPTS http://h\n", set(), id="var-for-curl"),
        pytest.param("nice -n 5 stdbuf -oL radiance serve --kv-dtype fp4\n",
                     {("unknown-enum-value", 1, "--kv-dtype fp4")}, id="nice-stdbuf"),
        pytest.param("env -u HOME RADIANCE_KV_DTYPE=fp4 radiance serve\n",
                     {("unknown-enum-value", 1, "--kv-dtype fp4")}, id="env-prefix"),
        pytest.param("bash -c 'exec radiance serve --prefill-interleave 99'\n",
                     {("value-out-of-bounds", 1, "--prefill-interleave 99")}, id="bash-c"),
        pytest.param('P="${P:-keepall}"\nradiance serve --checkpoint-policy "$P"\n',
                     {("unknown-enum-value", 1, "--checkpoint-policy keepall")}, id="default-value"),
        pytest.param("radiance serve --checkpoint-policy ${P:-tip-only}\n", set(), id="inline-default-ok"),
        pytest.param("FRAGMENT='--prefill-interleave 2 --checkpoint-policy tiponly'\n",
                     {("unknown-enum-value", 1, "--checkpoint-policy tiponly")}, id="unexpanded-fragment"),
        pytest.param("cat > /etc/radiance.env <<EOF\nRADIANCE_CHECKPOINT_POLICY=tip_only\nEOF\n",
                     {("unknown-enum-value", 2, "--checkpoint-policy tip_only")}, id="heredoc-env-file"),
        pytest.param('"$ENGINE" serve --prefill-interleav 2\n',
                     {("unknown-flag", 1, "--prefill-interleav")}, id="engine-in-variable"),
        pytest.param("./start.sh --prefill-interleave 2 --checkpoint-polcy tip-only\n",
                     {("unknown-flag", 1, "--checkpoint-polcy")}, id="wrapper-with-a-known-flag"),
        pytest.param("radiance serve --prefill-interleave=-1\n",
                     {("value-out-of-bounds", 1, "--prefill-interleave -1")}, id="equals-negative"),
        pytest.param("radiance serve --prefill-interleave -2\n",
                     {("value-out-of-bounds", 1, "--prefill-interleave -2")}, id="negative-value"),
        pytest.param("python3 -m radiance.serve --kv-dtype fp4\n",
                     {("unknown-enum-value", 1, "--kv-dtype fp4")}, id="python-module"),
        pytest.param("while read -r l; do echo \"$l\"; done < f\nradiance serve \\\n  --kv-dtype\\\n  fp4\n",
                     {("unknown-enum-value", 4, "--kv-dtype fp4")}, id="continuations"),
    ],
)
def test_engine_commands_are_found_behind_wrappers_and_other_programs_are_left_alone(
        script: str, expected: set[tuple[str, int, str]]) -> None:
    assert _findings(script) == expected


def test_every_value_a_variable_may_hold_is_checked_where_it_is_assigned() -> None:
    script = ("if [ -n \"$A\" ]; then P=tip-only; else P=geometric; fi\n"
              "radiance serve --checkpoint-policy \"$P\"\n")
    assert _findings(script) == {("unknown-enum-value", 1, "--checkpoint-policy geometric")}


def test_case_arms_are_conditional_and_each_is_checked() -> None:
    schema = load_schema(SOURCE)
    script = ("case \"$MODE\" in\n  a|b) X=(--kv-dtype fp8) ;;\n  (c) X=(--kv-dtype fp5) ;;\nesac\n"
              "radiance serve \"${X[@]}\"\n")
    found = lint_text(script, "s.sh", FileKind.SHELL, schema)
    assert [(f.line, f.subject, f.conditional) for f in found] == [(3, "--kv-dtype fp5", True)]


def test_a_flag_of_another_engine_is_named_as_that_engines() -> None:
    schema = load_schema(SOURCE)
    findings = lint_text("radiance serve --chunked-prefill-size 2048\n", "s.sh", FileKind.SHELL, schema)
    unknown = [f for f in findings if f.rule == "unknown-flag"]
    assert len(unknown) == 1 and "it is a flag of SGLang, not of this build" in unknown[0].message
