"""Attach advice to a census report: recommend from the side channels, cite where facts came from.

The flow stays one-way (census -> advice -> report): the census report is built first, then
this returns an :class:`~pdcensus.advice.endpoint_report.EndpointReport` with ``advice`` filled
(typed recommendations) and ``side_evidence`` saying which facts came from which side channel
(argv, boot ledger, ``/stats``). Advice does no I/O: the caller (:mod:`pdcensus.api`) reads the
evidence bundle (``pdcensus collect``, or a simulator output directory) with
:func:`pdcensus.sources.bundle.read_bundle` and the recording's prefill trace, and passes both in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from pdcensus.advice.capacity import read_diagnostics, with_box
from pdcensus.advice.endpoint_report import EndpointReport, SideEvidence
from pdcensus.advice.evidence import BootLedger, flags_from_argv, parse_boot_ledger
from pdcensus.advice.recommend import DEFAULT_TARGET_DECODE_SHARE, recommend
from pdcensus.advice.ttft_replay import PrefillTrace
from pdcensus.census.model import CensusReport
from pdcensus.engines import of_argv
from pdcensus.sources.bundle import Bundle


def prefix_hit_depths_from_stats(stats: object) -> tuple[int, ...]:
    """Prompt depths of multi-turn requests in ``/stats`` recent requests (the hit depths' proxy)."""
    if not isinstance(stats, dict):
        return ()
    rows = stats.get("recent_requests") or []
    depths = []
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict) and row.get("kind") == "session":
            tokens = row.get("prompt_tokens")
            if isinstance(tokens, (int, float)) and tokens > 0:
                depths.append(int(tokens))
    return tuple(depths)


def _boot_facts(boot: BootLedger) -> dict[str, int]:
    facts = {"stager_smallest_pass_tokens": boot.stager_smallest_pass_tokens,
             "kv_capacity_tokens": boot.kv_capacity_tokens, "arena_tokens": boot.arena_tokens,
             "expert_slab_experts": boot.expert_slab_experts}
    return {k: v for k, v in facts.items() if v is not None}


def attach_advice(
    report: CensusReport,
    bundle: Bundle | None = None,
    target_decode_share: float = DEFAULT_TARGET_DECODE_SHARE,
    trace: PrefillTrace | None = None,
    unreadable: str | None = None,
    config_flags: Mapping[str, str] | None = None,
) -> EndpointReport:
    """``report`` with advice filled, using the side channels of ``bundle`` where given.

    ``unreadable`` says why an evidence bundle that was asked for could not be read (cited as
    such). ``config_flags`` are what the engine's own config labels say is set
    (:func:`pdcensus.advice.deploy.deployed_from_labels`). ``trace`` (:func:`pdcensus.advice.ttft_replay.trace_from_signals`, read by
    :mod:`pdcensus.api`) feeds the replayed TTFT column.
    """
    flags: dict[str, str] = {}
    boot = BootLedger()
    depths: tuple[int, ...] = ()
    cited = SideEvidence(unreadable=unreadable)
    if bundle is not None:
        if bundle.argv:
            running = of_argv(bundle.argv)
            flags = flags_from_argv(bundle.argv[1:], short=running is not None and running.short_flags)  # -b, -np
        if bundle.boot_lines:
            boot = parse_boot_ledger("\n".join(bundle.boot_lines))
        depths = prefix_hit_depths_from_stats(bundle.stats)
        missing = tuple(k for k, v in (("argv", bundle.argv), ("boot ledger", bundle.boot_lines),
                                       ("/stats", bundle.stats), ("/diagnostics", bundle.diagnostics)) if not v)
        cited = SideEvidence(unreadable=unreadable, origin=bundle.source,
                             argv=" ".join(bundle.argv) if bundle.argv else None,
                             boot_ledger=_boot_facts(boot) if bundle.boot_lines else None,
                             prefix_hit_depths=len(depths), missing=missing)
    box = read_diagnostics(bundle.diagnostics) if bundle is not None else None
    if box is not None:
        cited = replace(cited, diagnostics=box.to_dict())
    flags = {**(config_flags or {}), **flags}  # the engine's own config labels (vLLM), argv over them
    recs = recommend(report, flags=flags, boot=boot, target_decode_share=target_decode_share,
                     prefix_hit_depths_tokens=depths, trace=trace)
    recs = with_box(recs, box)  # the box before any knob; the VRAM split beside capacity (advice.capacity)
    return EndpointReport.of(report, recs, cited)
