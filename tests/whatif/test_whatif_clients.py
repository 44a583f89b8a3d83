"""A closed population with a standing queue: a change of admission room is predicted by a twin of clients.

The truth is the simulator run with the change: 8 closed-loop clients against ``--max-num-seqs 4``
(4 run, 4 wait), then ``--max-num-seqs 8``. A twin that replayed the recorded arrivals would keep
4 waiting; as 8 clients it lets them in."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pdcensus.sim.config import Build
from pdcensus.sim.output import write_sim_dir
from pdcensus.sim.run import simulate_scenario
from pdcensus.sim.scenarios import Scenario, Segment
from pdcensus.sim.scheduler import VLLM_ADMISSION
from pdcensus.sim.workload import Clients, Workload
from pdcensus.sources.load import load_source
from pdcensus.whatif import what_if
from pdcensus.whatif.measure import measure, read_window


def _clients(seqs: int) -> Scenario:
    rng = random.Random(5)
    pairs = tuple((rng.randint(150, 400), rng.randint(300, 600)) for _ in range(200))
    flags = {"--num-gpu-blocks-override": "400", "--block-size": "128", "--max-num-seqs": str(seqs),
             "--max-num-batched-tokens": "2048", "--checkpoint-interval": "2048"}
    return Scenario("clients", "8 closed-loop clients", (Segment(1.0, Build.V1_8_3, flags,
                                                                 Workload(clients=Clients(8, pairs))),),
                    restart_down_seconds=0.0, admission=VLLM_ADMISSION)


def _run(seqs: int, folder: Path) -> Path:
    return write_sim_dir(simulate_scenario(_clients(seqs), duration_seconds=600, seed=1, scrape_interval_seconds=1.0,
                                           profile="vllm"), folder)


def test_more_admission_room_for_waiting_clients_is_predicted_by_a_twin_of_clients(tmp_path: Path) -> None:
    before, after = _run(4, tmp_path / "before"), _run(8, tmp_path / "after")
    recording = load_source(before)
    argv = [a.decode() for a in (before / "cmdline").read_bytes().split(b"\0") if a]
    result = what_if(recording, ["--max-num-seqs=8"], argv=argv, seeds=2)
    assert result.refused is None
    assert any(w.startswith("twin as 8 closed-loop clients") for w in result.warnings)
    truth = measure(read_window(load_source(after)))
    predicted = {f.name: f.predicted.median for f in result.figures}
    assert truth.get("waiting_mean") < 0.5 and predicted["waiting_mean"] < 0.5  # the queue is let in
    assert predicted["running_mean"] == pytest.approx(truth.get("running_mean"), rel=0.15)
    assert predicted["ttft_p50_seconds"] == pytest.approx(truth.get("ttft_p50_seconds"), rel=0.5)
    # 4 -> 8 running, and the recording never varied its batch: how a step grows with it is unknown
    assert all(f.basis.startswith("withheld") for f in result.figures if f.name == "per_stream_idle_tokens_per_second")
