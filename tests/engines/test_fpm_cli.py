"""`pdcensus fpm record` and `pdcensus fpm ledger` from the command line."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import msgspec
import pytest

from pdcensus.cli import main
from pdcensus.sim.fpm_publisher import FpmPublisher, FpmStep, scheduled_metrics
from pdcensus.sources.fpm import FpmDialect, FpmRecord, QueuedRequestMetrics, ScheduledRequestMetrics, load_fpm


def write_recording(path: Path, decode_wall: float, chunk_wall: float) -> None:
    lines = [msgspec.json.encode({"schema": "pdcensus/fpm/v1", "address": "tcp://127.0.0.1:1",
                                  "started_unix_seconds": 0.0})]
    for i in range(100):
        chunk = i % 10 == 0
        sched = ScheduledRequestMetrics(num_prefill_requests=int(chunk), sum_prefill_tokens=4096 * chunk,
                                        num_decode_requests=16)
        rec = FpmRecord(float(i), i, FpmDialect.DYNAMO, 1, "w", 0, i, None,
                        chunk_wall if chunk else decode_wall, sched, QueuedRequestMetrics())
        lines.append(msgspec.json.encode(rec))
    path.write_bytes(b"\n".join(lines) + b"\n")


def test_ledger_prints_the_mean_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "fpm.jsonl"
    write_recording(path, 0.015, 0.45)
    main(["fpm", "ledger", str(path)])
    out = capsys.readouterr().out
    assert "mean decode-only step 15.0 ms, mean chunk step 450.0 ms" in out
    assert "10 chunk, 90 decode-only" in out


def test_ledger_json_carries_the_means(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "fpm.jsonl"
    write_recording(path, 0.02, 0.3)
    main(["fpm", "ledger", str(path), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "pdcensus/fpm-ledger/v1"
    assert doc["ledger"]["decode_step_mean_seconds"] == pytest.approx(0.02)
    assert doc["ledger"]["chunk_step_mean_seconds"] == pytest.approx(0.3)
    assert doc["prefill_buckets"][0]["steps"] == 90


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        pytest.param(["fpm", "record", "http://x", "--out", "o.jsonl", "--duration", "1s"], 2, "tcp://HOST:PORT",
                     id="bad-address"),
        pytest.param(["fpm", "record", "20380", "--out", "o.jsonl", "--duration", "0s"], 2, "above 0",
                     id="zero-duration"),
        pytest.param(["fpm", "ledger", "absent.jsonl"], 3, "cannot read", id="missing-file"),
    ],
)
def test_bad_input_is_one_error_line_and_the_documented_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    argv: list[str], code: int, says: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == code
    assert len(err) == 1 and err[0].startswith("error: ") and says in err[0]


def test_record_stores_a_live_publishers_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "live.jsonl"
    done = threading.Event()
    with FpmPublisher(dialect=FpmDialect.VLLM) as pub:
        step = FpmStep(0.015, scheduled_metrics((), (), (), (100, 200)))

        def publish() -> None:
            while not done.wait(0.005):
                pub.publish(step)

        thread = threading.Thread(target=publish, daemon=True)
        thread.start()
        try:
            main(["fpm", "record", pub.endpoint, "--out", str(out), "--duration", "1s"])
        finally:
            done.set()
            thread.join(timeout=5)
    records = load_fpm(out)
    assert records and all(r.wall_time == 0.015 and r.dialect is FpmDialect.VLLM for r in records)
    assert f"{len(records)} records" in capsys.readouterr().out
