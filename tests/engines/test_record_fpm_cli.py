"""`pdcensus record --fpm tcp://HOST:PORT --out FILE`: the FPM recorder reached through `record`.

A real ZMQ PUB on 127.0.0.1 (the simulator's publisher) sends chunk and decode-only steps; the
recording must hold exactly what was sent and give the ledger those steps imply.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pdcensus.census.fpm_ledger import fpm_ledger
from pdcensus.cli import main
from pdcensus.sim.fpm_publisher import FpmPublisher, FpmStep, scheduled_metrics
from pdcensus.sources.fpm import FpmDialect, load_fpm

DECODE_WALL, CHUNK_WALL = 0.015, 0.6


def _publish_until(pub: FpmPublisher, done: threading.Event) -> threading.Thread:
    decode = FpmStep(DECODE_WALL, scheduled_metrics((), (), (), (100, 200, 300)))
    chunk = FpmStep(CHUNK_WALL, scheduled_metrics((4096,), (4096,), (), (100, 200, 300)))

    def publish() -> None:
        i = 0
        while not done.wait(0.002):
            pub.publish(chunk if i % 10 == 0 else decode)
            i += 1

    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    return thread


def test_record_fpm_stores_a_live_publishers_steps_and_their_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "steps.jsonl"
    done = threading.Event()
    with FpmPublisher("tcp://127.0.0.1:0", dialect=FpmDialect.VLLM) as pub:
        assert pub.endpoint.startswith("tcp://127.0.0.1:")
        thread = _publish_until(pub, done)
        try:
            main(["record", "--fpm", pub.endpoint, "--out", str(out), "--duration", "1s"])
        finally:
            done.set()
            thread.join(timeout=5)
    records = load_fpm(out)
    assert len(records) > 20
    assert {r.wall_time for r in records} == {DECODE_WALL, CHUNK_WALL}
    overall, _ = fpm_ledger(records)
    assert overall.decode_step_mean_seconds == pytest.approx(DECODE_WALL)
    assert overall.chunk_step_mean_seconds == pytest.approx(CHUNK_WALL)
    assert f"{len(records)} records" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        pytest.param(["record", "--fpm", "http://127.0.0.1:1", "--out", "o.jsonl", "--duration", "1s"],
                     "tcp://HOST:PORT", id="bad-address"),
        pytest.param(["record", "--fpm", "127.0.0.1:9", "--out", "o.jsonl", "--duration", "0s"], "above 0",
                     id="zero-duration"),
        pytest.param(["record", "http://127.0.0.1:9/metrics", "--fpm", "127.0.0.1:9", "--out", "o.jsonl"],
                     "not both", id="urls-and-fpm"),
        pytest.param(["record", "--out", "o.jsonl"], "nothing to record", id="neither"),
        pytest.param(["record", "--fpm", "127.0.0.1:9"], "--out is required", id="no-out"),
        pytest.param(["record", "--fpm", "127.0.0.1:9", "--out", "o.jsonl", "--interval", "15s"],
                     "no scrape interval", id="fpm-with-interval"),
        pytest.param(["record", "--fpm", "127.0.0.1:9", "--out", "o.jsonl", "--job", "X"],
                     "no job label", id="fpm-with-job"),
    ],
)
def test_bad_record_input_is_one_error_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2
    assert len(err) == 1 and err[0].startswith("error: ") and says in err[0]
    assert not (tmp_path / "o.jsonl").exists()
