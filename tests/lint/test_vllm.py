"""vLLM command lines in every file kind lint reads, checked without --source against the pinned flags data."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdcensus.lint.files import lint_paths
from pdcensus.lint.model import Finding
from pdcensus.lint.vllm import load_vllm_flags, normalise

TYPO = "--max-num-batch-tokens"
RIGHT = "--max-num-batched-tokens"


def lint(tmp_path: Path, name: str, text: str) -> list[Finding]:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return list(lint_paths([str(path)], None).findings)


def where(findings: list[Finding], rule: str) -> list[tuple[int, int, str]]:
    return [(f.line, f.col, f.subject) for f in findings if f.rule == rule]


# Each file kind, both command forms: the typo found at its own line and column, nothing else.
KINDS = {
    "deploy.yaml": ('apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n'
                    '        - name: vllm\n          image: vllm/vllm-openai:v0.32.0\n'
                    '          command: ["vllm", "serve"]\n          args: ["m", "-tp", "2",\n'
                    '                 "--max-num-batch-tokens", "8192"]\n', (11, 19)),
    "k8s-api-server.yaml": ('kind: Pod\nspec:\n  containers:\n  - image: vllm/vllm-openai\n'
                            '    command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]\n'
                            '    args:\n    - --model=m\n    - --max-num-batch-tokens=8192\n', (8, 7)),
    "k8s-image-args.yaml": ('kind: Pod\nspec:\n  containers:\n  - image: vllm/vllm-openai:latest\n'
                            '    args: ["--model", "m", "--max-num-batch-tokens", "1"]\n', (5, 29)),
    "compose-string.yaml": ('services:\n  llm:\n    image: vllm/vllm-openai:v0.32.0\n'
                            '    command: --model m --max-num-batch-tokens 8192\n', (4, 24)),
    "compose-list.yaml": ('services:\n  llm:\n    image: ghcr.io/acme/server\n'
                          '    command: ["vllm", "serve", "m",\n              "--max-num-batch-tokens", "1"]\n', (5, 16)),
    "Dockerfile": ('FROM python:3.11\nRUN pip install vllm\n'
                   'ENTRYPOINT ["python3", "-m", "vllm.entrypoints.openai.api_server"]\n'
                   'CMD ["--model", "m", "--max-num-batch-tokens", "8192"]\n', (4, 23)),
    "Dockerfile.shell": ('FROM vllm/vllm-openai\nENTRYPOINT []\nCMD vllm serve m \\\n'
                         '    --max-num-batch-tokens 8192\n', (4, 5)),
    "Dockerfile.from-vllm": ('FROM --platform=linux/amd64 vllm/vllm-openai:v0.32.0 AS serve\n'
                             'CMD ["m", "--max-num-batch-tokens", "8192"]\n', (2, 12)),
    "vllm.service": ('[Service]\nExecStart=/usr/bin/python3 -m vllm.entrypoints.openai.api_server \\\n'
                     '    --model m --max-num-batch-tokens 8192\n', (3, 15)),
    "serve.sh": ('#!/bin/sh\nexec vllm serve m \\\n  --port 8000 \\\n  --max-num-batch-tokens 8192\n', (4, 3)),
    "runbook.md": ('# Serve\n\n```bash\npython -m vllm.entrypoints.openai.api_server --model m \\\n'
                   '    --max-num-batch-tokens 8192\n```\n\nThen `vllm serve m --max-num-batch-tokens 4`.\n',
                   (5, 5)),
}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_the_typo_is_an_error_with_the_nearest_spelling_in_every_file_kind(tmp_path: Path, name: str) -> None:
    text, (line, col) = KINDS[name]
    findings = lint(tmp_path, name, text)
    unknown = [f for f in findings if f.rule == "unknown-flag"]
    assert (line, col, TYPO) in where(findings, "unknown-flag"), [f.text() for f in findings]
    assert all(f.severity.value == "error" and f"did you mean {RIGHT}?" in f.message for f in unknown)
    assert all("vLLM 0.32.0" in f.message for f in unknown)
    assert {f.rule for f in findings} == {"unknown-flag"}, [f.text() for f in findings]


def test_a_runbook_checks_inline_code_too(tmp_path: Path) -> None:
    text, _ = KINDS["runbook.md"]
    assert [line for line, _, _ in where(lint(tmp_path, "r.md", text), "unknown-flag")] == [5, 8]


def test_aliases_negations_equals_and_underscores_are_the_flags_they_spell(tmp_path: Path) -> None:
    ok = ("vllm serve m -tp 2 --tensor-parallel-size=2 -asc 1 --max_num_seqs 64 --max-num-batched-tokens=16k "
          "--no-enable-prefix-caching --enable-prefix-caching --enable_chunked_prefill "
          "--kv-cache-dtype=fp8 --max-model-len auto --gpu-memory-utilization 0.9 -O3 "
          "--compilation-config.mode 3 --compilation_config.cudagraph_capture_sizes+ 1,2 "
          "--served-model-name a b --port -1\n")
    assert lint(tmp_path, "ok.sh", ok) == []


@pytest.mark.parametrize(("argv", "rule", "subject"), [
    ("--kv-cache-dtype fp9", "unknown-enum-value", "--kv-cache-dtype fp9"),
    ("--kv_cache_dtype=fp9", "unknown-enum-value", "--kv-cache-dtype fp9"),
    ("--max-num-seqs many", "non-integer-value", "--max-num-seqs many"),
    ("--max-num-batched-tokens 1.5K", "non-integer-value", "--max-num-batched-tokens 1.5K"),
    ("--gpu-memory-utilization high", "non-integer-value", "--gpu-memory-utilization high"),
    ("--port", "missing-value", "--port"),
    ("--port --max-num-seqs 4", "missing-value", "--port"),
    ("--enable-prefix-caching=true", "unexpected-value", "--enable-prefix-caching=true"),
    ("--no-enable-prefix-caching=1", "unexpected-value", "--no-enable-prefix-caching=1"),
    ("--enable-prefix-caching true", "unexpected-value", "true"),
    ("--max-num", "ambiguous-flag", "--max-num"),
    ("--max-num-seq 8", "abbreviated-flag", "--max-num-seq"),
    ("--no-enable-prefix-cach", "abbreviated-flag", "--no-enable-prefix-cach"),
    ("--tp 2", "unknown-flag", "--tp"),
    ("--compilation-konfig.mode 3", "unknown-flag", "--compilation-konfig"),
])
def test_what_the_parser_refuses(tmp_path: Path, argv: str, rule: str, subject: str) -> None:
    findings = lint(tmp_path, "s.sh", f"vllm serve m {argv}\n")
    assert [(f.rule, f.subject) for f in findings] == [(rule, subject)], [f.text() for f in findings]


def test_a_flag_in_a_variable_is_checked_and_an_unresolved_one_is_said(tmp_path: Path) -> None:
    script = ('ARGS="--max-num-batch-tokens 8192"\nENGINE=vllm\n$ENGINE serve m $ARGS\n'
              'vllm serve m $EXTRA --max-num-seqs 4\nvllm serve m $(cat flags.txt)\n')
    findings = lint(tmp_path, "s.sh", script)
    assert where(findings, "unknown-flag") == [(1, 7, TYPO)]
    said = where(findings, "command-not-checked")
    assert [(line, subject) for line, _, subject in said] == [(4, "$EXTRA"), (5, "$(cat flags.txt)")]
    assert all(f.severity.value == "info" for f in findings if f.rule == "command-not-checked")


@pytest.mark.parametrize(("command", "why"), [
    ("python -m sglang.launch_server --model-path m", "an engine whose flags lint does not know"),
    ("text-generation-launcher --model-id m --max-batch-prefill-tokens 4", "an engine whose flags"),
    ("vllm bench serve --model m", "is not the server"),
    ("python -m vllm.entrypoints.api_server --model m", "demo server"),
    ("radiance serve --prefill-interleave 2", "no --source was given"),
])
def test_a_command_skipped_on_purpose_is_said(tmp_path: Path, command: str, why: str) -> None:
    findings = lint(tmp_path, "s.sh", command + "\n")
    assert [f.rule for f in findings] == ["command-not-checked"]
    assert why in findings[0].message and findings[0].severity.value == "info"


def test_a_branch_that_passes_the_typo_says_so(tmp_path: Path) -> None:
    script = 'if [ -n "$BIG" ]; then\n  vllm serve m --max-num-batch-tokens 8192\nfi\n'
    (finding,) = lint(tmp_path, "s.sh", script)
    assert finding.conditional and finding.line == 2


def test_with_a_pinned_source_vllm_is_still_checked_and_the_report_names_both(tmp_path: Path) -> None:
    source = Path(__file__).parent.parent / "fixtures" / "config_sources" / "xmacro_switch.cpp"
    path = tmp_path / "s.sh"
    path.write_text(f"vllm serve m {TYPO} 1\n", encoding="utf-8")
    report = lint_paths([str(path)], str(source))
    assert [f.rule for f in report.findings] == ["unknown-flag"]
    assert report.to_dict()["vllm"].startswith("vLLM 0.32.0")


def test_ref_without_source_is_a_usage_error(tmp_path: Path) -> None:
    from pdcensus.errors import UsageError

    with pytest.raises(UsageError):
        lint_paths([str(tmp_path)], None, ref="v1")


def test_the_shipped_data_names_its_version_and_holds_what_the_parser_declares() -> None:
    flags = load_vllm_flags()
    assert flags.version == "0.32.0" and flags.allow_abbrev
    tp, negated = flags.by_option["-tp"]
    assert tp.name == "--tensor-parallel-size" and not negated and tp.takes_value
    caching, negated = flags.by_option["--no-enable-prefix-caching"]
    assert caching.name == "--enable-prefix-caching" and negated and not caching.takes_value
    assert all(f.name.startswith("--") and all(n == "--no-" + f.name[2:] for n in f.negations) for f in flags.flags)
    assert len(flags.by_option) == sum(1 + len(f.aliases) + len(f.negations) for f in flags.flags)


@pytest.mark.parametrize(("word", "expected"), [
    ("--max_num_seqs", "--max-num-seqs"), ("--max_num_seqs=4_096", "--max-num-seqs=4_096"),
    ("--compilation_config.cudagraph_capture_sizes", "--compilation-config.cudagraph_capture_sizes"),
    ("-tp", "-tp"), ("m_x", "m_x"),
])
def test_underscores_become_dashes_only_in_the_name_before_the_first_dot(word: str, expected: str) -> None:
    assert normalise(word) == expected


def test_placeholders_and_prose_mentions_are_not_findings(tmp_path: Path) -> None:
    text = ("Run `vllm serve MODEL ...` or `vllm serve <model> --port <port> --max-num-seqs N`; "
            "compare `sglang` and `vllm v0.19.1`.\n")
    assert lint(tmp_path, "r.md", text) == []


@pytest.mark.parametrize(("name", "text", "line"), [
    ("vllm.container", "[Container]\nImage=docker.io/vllm/vllm-openai:v0.32.0\n"
                       "Exec=--model m --max-num-batch-tokens 8192\n", 3),
    ("run.sh", "docker run --gpus all -p 8000:8000 vllm/vllm-openai:v0.32.0 \\\n"
               "  --model m --max-num-batch-tokens 8192\n", 2),
    ("compose-entrypoint.yaml", "services:\n  llm:\n    image: python:3.11\n"
                                "    entrypoint: [python3, -m, vllm.entrypoints.openai.api_server]\n"
                                "    command: [--model, m, --max-num-batch-tokens, '8192']\n", 5),
])
def test_a_vllm_image_or_entrypoint_gets_its_argv_checked(tmp_path: Path, name: str, text: str, line: int) -> None:
    findings = lint(tmp_path, name, text)
    assert [(f.rule, f.line, f.subject) for f in findings] == [("unknown-flag", line, TYPO)], \
        [f.text() for f in findings]
