"""Traps: the runbook's "Metric traps" as named checks that fire on the data.

vLLM's prompt counter adds two (:func:`prompt_counter_traps`): prompt tokens that include
cache hits never computed, and prompts counted when their prefill ends (with which family
to scrape to see more).

Each check returns a :class:`Trap` whether or not it fired, so the report shows what
was checked. A fired trap is something the census stepped around (and a human reading
raw metrics would likely step in).
"""

from __future__ import annotations

import numpy as np

from pdcensus.census.buckets import MAX_STEP_SECONDS
from pdcensus.census.model import LedgerResult, PreemptionResult, ShapeResult, Trap
from pdcensus.census.prefill_progress import QUERIES_ONCE, PrefillBasis, PrefillProgress
from pdcensus.census.signals import ShapeSignals
from pdcensus.engines import record
from pdcensus.series.profiles import Signal

# Prefill made by prefix-hit cuts matters once it is this share of all prefill tokens.
REPLAY_SHARE = 0.25
# Diluted mean step: chunk steps are at most this share of steps ...
DILUTED_STEP_SHARE = 0.10
# ... yet carry at least this many times their share of step time.
DILUTED_TIME_FACTOR = 3.0
STEP_DETAIL = (Signal.PREFILL_STEPS_DURATION, Signal.PREFILL_STEP_TOKENS, Signal.TOKEN_QUEUE_WAIT)


def replay_share(signals: ShapeSignals) -> tuple[float, np.ndarray | None]:
    """Share of prefill tokens that were prefix-hit replay, and the replay rate per scrape."""
    cut = signals.increase(Signal.PREFIX_HIT_CUT_TOKENS)
    if cut is None:
        return float("nan"), None
    dt = signals.interval_seconds
    with np.errstate(invalid="ignore", divide="ignore"):
        replay_rate = np.where(dt > 0, cut / dt, np.nan)
    prompt = signals.increase(Signal.PROMPT_TOKENS)
    if signals.prefill_tokens_per_second is not None and not signals.rates_from_counters:
        total = float(np.nansum(signals.prefill_tokens_per_second * np.nan_to_num(dt)))
    elif prompt is not None:
        total = float(np.nansum(prompt))
    else:
        return float("nan"), replay_rate
    share = float(np.nansum(cut)) / total if total > 0 else float("nan")
    return min(share, 1.0) if np.isfinite(share) else share, replay_rate


def prompt_counter_traps(p: PrefillProgress) -> tuple[Trap, ...]:
    """vLLM's prompt counter: cache hits that never ran, and prefill counted when it ends.

    The opposite of radiance's prefix-hit cuts (replay that *is* computed): vLLM's
    ``prompt_tokens_total`` counts cached prompt tokens that were never computed.
    """
    out: list[Trap] = []
    share = p.computed_share
    looked_up = (f"; prefix_cache_queries_total is {p.queries_per_prompt:.0f}x the prompt tokens: vLLM looks a "
                 "waiting request up again on every admission attempt, so hits/queries is no cache share here"
                 if np.isfinite(p.queries_per_prompt) and p.queries_per_prompt > QUERIES_ONCE[1] else "")
    if np.isfinite(share):
        fired = share <= 1.0 - REPLAY_SHARE
        out.append(Trap("prompt-tokens-include-cache-hits", bool(fired),
                        f"only {100 * share:.0f} % of prompt tokens were computed ({p.computed_source.value}); the "
                        "census buckets by computed prefill" + looked_up if fired else
                        f"{100 * share:.0f} % of prompt tokens were computed ({p.computed_source.value})" + looked_up,
                        share))
    else:
        out.append(Trap("prompt-tokens-include-cache-hits", bool(looked_up),
                        "computed share unknown: prompt tokens (cache hits included) are taken as prefill" + looked_up))
    late = p.basis in (PrefillBasis.SPREAD_BACK, PrefillBasis.COMPLETION_COUNTER, PrefillBasis.ADMISSION_TO_COMPLETION)
    text = (f"the prompt counter moves when a prefill ends: {100 * p.hidden_share:.0f} % of the reconstructed "
            f"prefill time falls in polls where it did not move; prefill = {p.basis.value}" if late
            else f"prefill = {p.basis.value}")
    if p.hint:
        text += "; " + p.hint
    out.append(Trap("prompt-counted-at-prefill-end", late, text, p.hidden_share if late else None))
    return tuple(out)


def check_traps(
    signals: ShapeSignals,
    ledger: LedgerResult,
    preemption: PreemptionResult,
    shape: ShapeResult,
) -> tuple[Trap, ...]:
    prof = signals.profile
    radiance = record(prof.engine).latency_under_other_prefix
    traps: list[Trap] = []

    missing = [prof.name_of(s) for s in (Signal.TTFT, Signal.ITL) if s not in signals.histograms]
    if Signal.PREEMPTIONS not in signals.increases:
        missing.append(prof.name_of(Signal.PREEMPTIONS))
    fired = radiance and bool(missing)
    traps.append(Trap("latency-under-radiance-prefix", fired,
                      ("latency and preemption exist only under vllm:; not scraped here: "
                       + ", ".join(str(m) for m in missing) + " - a radiance:-only query reads as "
                       "'the endpoint never stalls anyone'") if fired else
                      "latency and preemptions read from their vllm: names (radiance: has none)"))

    depth = signals.gauge(Signal.PREEMPTED_DEPTH)
    counter = signals.increase(Signal.PREEMPTIONS)
    if depth is None:
        traps.append(Trap("preemption-from-instant-depth", False, "no instant preempted-depth gauge in this shape"))
    elif counter is None:
        traps.append(Trap("preemption-from-instant-depth", True,
                          f"only the instant depth {prof.name_of(Signal.PREEMPTED_DEPTH)} is scraped: it is not a "
                          "count, preemptions between scrapes are invisible"))
    else:
        inc = np.nan_to_num(counter) > 0
        seen = float((np.nan_to_num(depth)[inc] > 0).mean()) if inc.any() else float("nan")
        fired = bool(inc.any() and seen < 0.5)
        traps.append(Trap("preemption-from-instant-depth", fired,
                          (f"the depth gauge was 0 at {100 * (1 - seen):.0f} % of the scrapes whose interval had "
                           f"preemptions ({preemption.total:.0f} in the counter): the counter is the count")
                          if fired else "preemptions read from the counter, the depth is context only",
                          seen if np.isfinite(seen) else None))

    if ledger.available and ledger.chunk_share_of_steps > 0:
        factor = ledger.chunk_share_of_step_time / ledger.chunk_share_of_steps
        fired = ledger.chunk_share_of_steps <= DILUTED_STEP_SHARE and factor >= DILUTED_TIME_FACTOR
        traps.append(Trap("diluted-mean-step", bool(fired),
                          f"{100 * ledger.chunk_share_of_steps:.1f} % of steps carry "
                          f"{100 * ledger.chunk_share_of_step_time:.0f} % of step time: step_seconds/steps "
                          f"({1000 * ledger.mean_step_seconds:.1f} ms) hides the chunk step "
                          f"({1000 * ledger.chunk_step_seconds:.0f} ms); use the phase ratio", float(factor)))
    else:
        traps.append(Trap("diluted-mean-step", False, "no ledger or no chunk steps: nothing to dilute"))

    share, _ = replay_share(signals)
    if np.isfinite(share):
        fired = share >= REPLAY_SHARE
        traps.append(Trap("prefill-from-prefix-hit-cuts", bool(fired),
                          f"{100 * share:.0f} % of prefill tokens are prefix-hit replay (prefill you created "
                          "yourself); buckets also shown on client-new prefill" if fired else
                          f"{100 * share:.0f} % of prefill tokens are prefix-hit replay", share))
    else:
        traps.append(Trap("prefill-from-prefix-hit-cuts", False,
                          "no prefix_hit_cut_tokens counter in this shape: replay unknown"))
    if signals.prefill_progress is not None:
        traps.extend(prompt_counter_traps(signals.prefill_progress))

    if radiance:
        absent = [prof.name_of(s) for s in STEP_DETAIL if s in prof.signals and s not in signals.histograms]
        traps.append(Trap("step-detail-histograms-unscraped", bool(absent),
                          ("not scraped: " + ", ".join(str(a) for a in absent) + "; per-request forensics need "
                           "`curl localhost:7770/stats` on the endpoint's host") if absent else
                          "step-detail histograms scraped"))

    interval = signals.scrape_interval_seconds
    traps.append(Trap("step-over-30s", bool(interval > MAX_STEP_SECONDS),
                      (f"scrape interval {interval:.0f} s" if np.isfinite(interval) else
                       "scrape interval not measured (one scrape)")
                      + (" > 30 s: a scrape samples a small fraction of the engine's steps"
                         if interval > MAX_STEP_SECONDS else ""),
                      float(interval)))
    n = len(shape.segments)
    traps.append(Trap("window-spans-shapes", n > 1,
                      f"the window holds {n} shapes; only shape {shape.analysed} is ranked" if n > 1
                      else "the window is one shape", float(n)))
    return tuple(traps)
