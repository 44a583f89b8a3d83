"""radiance's knobs as a catalogue: the runbook's "Knob semantics" (radiance 1.8.x, GUIDE section 4.5).

The entries live in :data:`pdcensus.advice.knobs.CATALOGUE` (names and members are checked
against the pinned image's ``core/config.cpp`` by :mod:`pdcensus.advice.flags`); this module
adds what the shared interface needs: the pin, the env rule (the serve script reads
``RADIANCE_<FLAG>``), the primary knob per mechanism and the one precondition that must travel
in the same line: ``--prefill-span N`` needs ``--max-num-batched-tokens`` = N checkpoint
intervals, or ``config_validate`` refuses to start.
"""

from __future__ import annotations

from collections.abc import Mapping

from pdcensus.advice.catalogue.model import EngineCatalogue, Gap
from pdcensus.advice.knobs import CATALOGUE as RADIANCE_KNOBS, ActsOn

DEFAULT_CHECKPOINT_INTERVAL = 4096


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def complete(flag: str, value: str, deployed: Mapping[str, str]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """Span and step budget travel together: budget = span x checkpoint interval."""
    interval = _int(deployed.get("--checkpoint-interval")) or DEFAULT_CHECKPOINT_INTERVAL
    if flag == "--prefill-span" and value.isdigit():
        budget = int(value) * interval
        return ((("--max-num-batched-tokens", str(budget)),),
                (f"--max-num-batched-tokens {budget}: --prefill-span {value} needs {value} x --checkpoint-interval "
                 f"{interval} (config_validate refuses anything else)",))
    span = _int(deployed.get("--prefill-span")) or 1
    if flag == "--max-num-batched-tokens" and value.isdigit() and span > 1:
        new_span = max(1, int(value) // interval) if int(value) % interval == 0 else 1
        return ((("--prefill-span", str(new_span)),),
                (f"--prefill-span {new_span}: the deployed --prefill-span {span} needs the budget at {span} intervals",))
    return (), ()


CATALOGUE = EngineCatalogue(
    engine="radiance", name="radiance", pin="radiance 1.8.x",
    sources=("runbook: Knob semantics (GUIDE section 4.5)", "the pinned image's core/config.cpp (help table + validator)"),
    env_rule="the serve script reads RADIANCE_<FLAG> and passes --<flag> only when it is non-empty",
    knobs=tuple(RADIANCE_KNOBS.values()),
    gaps=(Gap(ActsOn.PREEMPTION_STALL, "no knob reserves KV for resumed sequences beyond --max-num-seqs",
              "more KV memory per replica, or more replicas"),),
    primary={ActsOn.STEP_TIME_SHARING: "--prefill-interleave", ActsOn.EVICTION: "--max-num-batched-tokens",
             ActsOn.PREEMPTION_STALL: "--max-num-seqs", ActsOn.SELF_MADE_PREFILL: "--checkpoint-policy"},
    serve=("radiance", "serve"), measures_decode_only_steps=True, complete=complete,
)
