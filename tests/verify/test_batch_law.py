"""A KV-capacity arm's ITL rise, allowed as far as the before window's step law explains the batch it admitted."""

from __future__ import annotations


import numpy as np
import pytest

from pdcensus.advice.knobs import get_knob
from pdcensus.series.profiles import Signal
from pdcensus.sources.load import load_source
from pdcensus.verify import gate
from pdcensus.verify.arm import bucket_pair, read_window
from pdcensus.verify.batch_law import applies, batch_allowance, mean_batch, step_law


@pytest.fixture(scope="module")
def windows(tmp_path_factory: pytest.TempPathFactory):
    """KV pressure (6,144 blocks) and the same load with twice the blocks: a bigger batch runs."""
    from pdcensus.sim.output import write_sim_dir
    from pdcensus.sim.run import simulate

    root = tmp_path_factory.mktemp("batch-law")
    small = write_sim_dir(simulate("preemption-stall", duration_seconds=3600, seed=1), root / "small")
    large = write_sim_dir(simulate("preemption-stall", duration_seconds=3600, seed=2,
                                   overrides={"--num-gpu-blocks-override": "12288"}), root / "large")
    return read_window(load_source(str(small))), read_window(load_source(str(large)))


def test_the_step_law_is_the_before_windows_decode_only_step_on_its_batch(windows) -> None:
    small, _ = windows
    law = step_law(small.report, small.signals)
    assert law is not None
    base, per_row, n = law
    assert base > 0 and per_row > 0 and n >= 10
    # the line passes through the timed intervals: at their mean batch it is their mean step
    step = np.asarray(small.report.ledger.timeline.decode_step_seconds)
    run = np.nan_to_num(small.signals.gauge(Signal.RUNNING))
    batch = 0.5 * (run + np.r_[run[:1], run[:-1]])
    ok = np.isfinite(step) & (step > 0) & (batch > 0)
    assert base + per_row * batch[ok].mean() == pytest.approx(step[ok].mean(), rel=1e-6)


def test_a_bigger_batch_allows_the_itl_rise_its_step_law_gives_and_a_smaller_one_none(windows) -> None:
    small, large = windows
    b0, b1 = mean_batch(small.signals), mean_batch(large.signals)
    assert b1 > b0
    allowance = batch_allowance((small.report, small.signals), large.signals)
    assert allowance is not None
    base, per_row, _ = step_law(small.report, small.signals)
    assert allowance.ratio == pytest.approx((base + per_row * b1) / (base + per_row * b0))
    assert allowance.ratio > 1 and f"{b0:.1f} -> {b1:.1f} running" in allowance.basis
    assert batch_allowance((large.report, large.signals), small.signals) is None  # the batch fell: no rise allowed
    # the gate holds every bucket's ITL to it, as a prediction; TTFT is still allowed no rise
    pair = bucket_pair(small.signals, large.signals)
    labels = tuple(r.bucket for r in pair.before.rows)
    comparisons = gate.compare_arm(small.signals, large.signals, pair.before_index, pair.after_index, labels, None,
                                   float("nan"), itl_allowance=allowance)
    itl = [c for c in comparisons if c.quantity.startswith("ITL")]
    assert itl and all(c.predicted and c.predicted_ratio == pytest.approx(allowance.ratio) for c in itl)
    assert all(not c.predicted and c.predicted_ratio == 1.0 for c in comparisons if c.quantity.startswith("TTFT"))


def test_only_kv_capacity_arms_get_it() -> None:
    assert applies(get_knob("--num-gpu-blocks-override", "vllm")) and applies(get_knob("--max-num-seqs", "vllm"))
    assert not applies(get_knob("--max-num-batched-tokens", "vllm"))
