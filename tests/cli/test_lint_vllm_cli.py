"""`pdcensus lint` without --source checks vLLM commands against the shipped vLLM 0.32.0 flags data."""

from __future__ import annotations

from pathlib import Path

from test_shell import run_cli

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: llm}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.32.0
        command: ["vllm", "serve", "m", "-tp", "2", "--max-num-batch-tokens", "4096"]
"""


def test_lint_without_source_finds_the_vllm_typo_and_exits_1(tmp_path: Path) -> None:
    (tmp_path / "deploy.yaml").write_text(DEPLOYMENT)
    (tmp_path / "serve.sh").write_text("exec python3 -m vllm.entrypoints.openai.api_server --model m "
                                       "--max_num_seqs 8 --no-enable-prefix-caching\n")
    done = run_cli("lint", str(tmp_path))
    assert done.returncode == 1, done.stderr
    assert "deploy.yaml:10:" in done.stdout and "did you mean --max-num-batched-tokens" in done.stdout
    assert "serve.sh" not in done.stdout  # underscores and --no-X are vLLM's own spellings
    assert "-tp" not in done.stdout.replace("--max-num-batch-tokens", "")


def test_lint_of_a_clean_vllm_script_exits_0(tmp_path: Path) -> None:
    (tmp_path / "serve.sh").write_text("vllm serve m --max-num-batched-tokens 4096 -tp 2\n")
    done = run_cli("lint", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 error(s)" in done.stderr or "0 finding(s)" in done.stderr, done.stderr
