"""Whether the engine's own config says it has a second KV tier to evict decoders' KV into.

The runbook's lagged tail is "something evicted (arena loan, expert slab, KV)" and re-fetched
while decode runs. Where the engine states its cache config, the KV half of that can be ruled
in or out from it instead of from the tail test. vLLM exports every ``CacheConfig`` field as a
label of ``vllm:cache_config_info`` (``vllm/config/cache.py`` ``metrics_info``; 0.32.0
``vllm/v1/metrics/loggers.py`` registers it): with ``kv_offloading_size`` and ``num_cpu_blocks``
unset (``None``) there is no host tier, and the only way vLLM V1 takes a running request's
blocks is preemption by recompute (``v1/core/sched/scheduler.py`` ``_preempt_request``: the
blocks are freed and the request re-prefills from token 0), which the census counts as a
preemption stall, not as eviction. Measured on the live CPU runs: ``kv_offloading_size="None"``,
``num_cpu_blocks="None"``; the InferenceX offload runs set ``--kv-offloading-size``.

Engines without such a label answer ``None`` (not known), and nothing changes for them.
"""

from __future__ import annotations

from pdcensus.series.model import Endpoint

CACHE_CONFIG_INFO = "vllm:cache_config_info"
UNSET = frozenset({"", "None", "none", "0", "0.0"})
TIER_LABELS = ("kv_offloading_size", "num_cpu_blocks")


def kv_second_tier(endpoint: Endpoint) -> tuple[bool | None, str]:
    """(whether a second KV tier is configured, the labels that say so); (None, "") where the engine does not tell."""
    for key in endpoint.select(CACHE_CONFIG_INFO):
        labels = dict(key.labels)
        if not all(name in labels for name in TIER_LABELS):
            continue
        said = ", ".join(f'{name}="{labels[name]}"' for name in TIER_LABELS)
        return any(labels[name] not in UNSET for name in TIER_LABELS), f"{CACHE_CONFIG_INFO} {said}"
    return None, ""
