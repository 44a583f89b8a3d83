"""An engine that leaves SGLang's and TGI's tallies unfed runs the same trajectory and radiance counters."""

from __future__ import annotations

from pdcensus.sim.config import parse_config
from pdcensus.sim.engine import Engine
from pdcensus.sim.entities import Request


def _load(engine: Engine) -> None:
    for i in range(40):
        engine.submit(Request(0.3 * i, 200 + 31 * (i % 7), 150 + 47 * (i % 5)))
    engine.submit(Request(4.0, 30000, 60))


def test_unfed_tallies_change_nothing_else_and_stay_empty() -> None:
    fed, unfed = Engine(parse_config({})), Engine(parse_config({}), engine_tallies=False)
    for engine in (fed, unfed):
        _load(engine)
        for k in range(1, 121):
            engine.advance_until(k * 0.5)
    assert fed.metrics.counters() == unfed.metrics.counters()
    assert fed.metrics.e2e.cumulative() == unfed.metrics.e2e.cumulative()
    assert fed.metrics.inter_token.total == unfed.metrics.inter_token.total
    assert fed.ledger == unfed.ledger
    assert fed.tallies.finished_requests == fed.metrics.request_success > 0
    assert fed.tallies.sglang_inter_token.count == fed.metrics.inter_token.count > 0
    assert unfed.tallies.finished_requests == 0 and unfed.tallies.sglang_inter_token.count == 0
    assert unfed.tallies.tgi_forward_decode.count == 0 and unfed.tallies.tgi_input_length.count == 0
