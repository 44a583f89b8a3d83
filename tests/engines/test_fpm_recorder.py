"""The FPM recorder against real ZMQ PUB sockets on 127.0.0.1 stores what was published."""

from __future__ import annotations

import threading
from pathlib import Path

import msgspec
import pytest
import zmq

from pdcensus.errors import DataError, RecordingParseError
from pdcensus.sim.fpm_publisher import FpmPublisher, FpmStep, queued_metrics, scheduled_metrics
from pdcensus.sources.fpm import FpmDialect, FpmRecord, FpmRecordingSummary, load_fpm, record_fpm

STEPS = [
    FpmStep(0.0151, scheduled_metrics((), (), (), (900, 1100, 4000))),
    FpmStep(0.4200, scheduled_metrics((2048,), (8192,), (0,), (901, 1101, 4001)), queued_metrics((300,))),
    FpmStep(0.0152, scheduled_metrics((), (), (), (902, 1102))),
    FpmStep(0.3900, scheduled_metrics((2048, 64), (8192, 64), (2048, 0), ()), queued_metrics((), (5000,))),
]


class Recorder:
    """record_fpm on a thread, with an event set once the first message is in."""

    def __init__(self, address: str, path: Path, max_records: int | None = None) -> None:
        self.first = threading.Event()
        self.stop = threading.Event()
        self.records: list[FpmRecord] = []
        self.summary: FpmRecordingSummary | None = None

        def on_record(record: FpmRecord) -> None:
            self.records.append(record)
            self.first.set()

        def run() -> None:
            self.summary = record_fpm(address, path, 20.0, max_records=max_records,
                                      on_record=on_record, stop=self.stop)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def finish(self) -> FpmRecordingSummary:
        self.stop.set()
        self.thread.join(timeout=10)
        assert self.summary is not None
        return self.summary


def wait_for_subscription(recorder: Recorder, ping: object) -> None:
    """PUB drops messages until the subscription arrives: ping until the recorder hears one."""
    for _ in range(500):
        ping()  # type: ignore[operator]
        if recorder.first.wait(0.01):
            return
    pytest.fail("the recorder never received a message")


@pytest.mark.parametrize("dialect", list(FpmDialect), ids=[d.value for d in FpmDialect])
def test_recorded_steps_equal_the_published_steps(tmp_path: Path, dialect: FpmDialect) -> None:
    out = tmp_path / "fpm.jsonl"
    with FpmPublisher(dialect=dialect, worker_id="sim-0", dp_rank=0) as pub:
        recorder = Recorder(pub.endpoint, out)
        wait_for_subscription(recorder, pub.heartbeat)
        sequences = [pub.publish(step) for step in STEPS]
        while len([r for r in recorder.records if not r.is_heartbeat]) < len(STEPS):
            assert recorder.thread.is_alive()
            recorder.first.wait(0.01)
        summary = recorder.finish()
    stored = [r for r in load_fpm(out) if not r.is_heartbeat]
    assert [r.sequence for r in stored] == sequences
    assert [r.wall_time for r in stored] == [s.wall_time_seconds for s in STEPS]
    assert [r.scheduled_requests for r in stored] == [s.scheduled for s in STEPS]
    assert [r.queued_requests for r in stored] == [s.queued for s in STEPS]
    assert all(r.dialect is dialect for r in stored)
    if dialect is not FpmDialect.LEGACY:
        assert [r.counter_id for r in stored] == sequences  # the publisher stamps counter_id
    assert summary.stored == len(load_fpm(out)) and summary.rejected == 0
    assert summary.sequence_gaps == 0


def test_the_recorder_counts_sequence_gaps_and_rejects_bad_messages(tmp_path: Path) -> None:
    context = zmq.Context()
    pub = context.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub.bind("tcp://127.0.0.1:0")
    endpoint = pub.getsockopt_string(zmq.LAST_ENDPOINT)
    payload = msgspec.msgpack.encode({"version": 1, "wall_time": 0.02,
                                      "scheduled_requests": {"num_decode_requests": 4}})

    def send(seq: int, body: bytes = payload) -> None:
        pub.send_multipart([b"", seq.to_bytes(8, "big"), body])

    def wait_for(recorder: Recorder, seq: int) -> None:
        while not any(r.sequence == seq for r in recorder.records):
            assert recorder.thread.is_alive()
            recorder.first.wait(0.01)

    try:
        recorder = Recorder(endpoint, tmp_path / "gaps.jsonl")
        wait_for_subscription(recorder, lambda: send(0))
        for seq in (1, 5, 6):  # 2, 3 and 4 were dropped on the way
            send(seq)
        wait_for(recorder, 6)
        send(7, b"\xc1")  # undecodable: rejected, so 7 also reads as missing
        send(8)
        wait_for(recorder, 8)
        summary = recorder.finish()
    finally:
        pub.close(linger=0)
        context.term()
    pings = sum(1 for r in recorder.records if r.sequence == 0)
    assert summary.sequence_gaps == 4
    assert summary.rejected == 1
    assert summary.stored == pings + 4


def test_a_torn_last_line_is_ignored_on_load(tmp_path: Path) -> None:
    out = tmp_path / "fpm.jsonl"
    with FpmPublisher() as pub:
        recorder = Recorder(pub.endpoint, out)
        wait_for_subscription(recorder, pub.heartbeat)
        pub.publish(STEPS[1])
        while not any(not r.is_heartbeat for r in recorder.records):
            recorder.first.wait(0.01)
        recorder.finish()
    whole = load_fpm(out)
    with open(out, "ab") as fh:
        fh.write(b'{"received_unix_seconds": 1.0, "sequ')  # the write a crash cut short
    assert load_fpm(out) == whole


def test_a_corrupt_line_inside_the_file_names_the_file_and_line(tmp_path: Path) -> None:
    out = tmp_path / "fpm.jsonl"
    out.write_bytes(b'{"schema":"pdcensus/fpm/v1","address":"tcp://x:1","started_unix_seconds":0}\n'
                    b"not json\n"
                    b'{"schema":"pdcensus/fpm/v1","address":"tcp://x:1","started_unix_seconds":1}\n')
    with pytest.raises(RecordingParseError, match=r"fpm.jsonl:2:"):
        load_fpm(out)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        pytest.param(b'{"received_unix_seconds": 1}\n', "header", id="no-header"),
        pytest.param(b'{"schema":"other/v9"}\n', "unknown schema", id="other-schema"),
    ],
)
def test_files_that_are_not_fpm_recordings_are_refused(tmp_path: Path, content: bytes, match: str) -> None:
    out = tmp_path / "x.jsonl"
    out.write_bytes(content)
    with pytest.raises(RecordingParseError, match=match):
        load_fpm(out)


def test_a_missing_file_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="cannot read"):
        load_fpm(tmp_path / "absent.jsonl")
