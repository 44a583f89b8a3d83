"""The engine's cache config on a second KV tier (pdcensus.census.kv_tier), read from vLLM's info gauge."""

from __future__ import annotations

from pdcensus.census.kv_tier import kv_second_tier
from pdcensus.sources.recorder_journal import parse_exposition


def _endpoint(labels: str) -> object:
    body = f"# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{{{labels}}} 1.0\n".encode()
    return parse_exposition(body, "text/plain; version=0.0.4", 1.0, "vllm", "a:1").endpoints[0]


def test_no_offloading_and_no_cpu_blocks_is_no_second_tier() -> None:
    tier, basis = kv_second_tier(_endpoint('block_size="128",kv_offloading_size="None",num_cpu_blocks="None"'))
    assert tier is False
    assert 'kv_offloading_size="None"' in basis


def test_kv_offloading_is_a_second_tier() -> None:
    tier, _ = kv_second_tier(_endpoint('kv_offloading_size="64",num_cpu_blocks="None"'))
    assert tier is True


def test_an_engine_that_does_not_tell_is_unknown() -> None:
    assert kv_second_tier(_endpoint('block_size="16"')) == (None, "")
