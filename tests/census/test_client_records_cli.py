"""`pdcensus census --client-records`: what users felt, by the census's own prefill buckets, on a real run."""

from __future__ import annotations

import json

import pytest

from pdcensus.cli import main
from shared_data import SHARED_REALDATA

RUN = SHARED_REALDATA / "vllm-inferencex" / "llama70b-vllm0.15" / "tp1_bs16_offloadoff"


class Ran:
    def __init__(self, code: int, output: str) -> None:
        self.exit_code, self.output = code, output


@pytest.fixture
def run(capsys):
    def invoke(*args: str) -> Ran:
        with pytest.raises(SystemExit) as exc:
            main(list(args))
            raise SystemExit(0)
        out = capsys.readouterr()
        return Ran(int(exc.value.code or 0), out.out + out.err)
    return invoke


def test_client_records_put_what_users_felt_in_the_report_by_prefill_bucket(run):
    result = run("census", f"{RUN}.om.gz", "--client-records", f"{RUN}.client_requests.csv.gz", "--json")
    assert result.exit_code == 0, result.output
    felt = json.loads(result.output)["client_felt"]
    sides = ("arrived_busy", "arrived_idle", "decoded_busy", "decoded_idle")
    assert all(felt[s]["requests"] > 0 for s in sides)
    # every request lands on exactly one side of each split
    assert felt["arrived_busy"]["requests"] + felt["arrived_idle"]["requests"] >= 4900
    # users' per-token time in busy and idle polls: the same within 5 % on this run (no interference felt)
    assert felt["tpot_ratio"] == pytest.approx(1.0, abs=0.05)


def test_client_records_without_a_recording_source_is_a_usage_error(run):
    result = run("census", "--prometheus", "http://127.0.0.1:9", "--client-records", f"{RUN}.client_requests.csv.gz")
    assert result.exit_code == 2 and "--client-records goes with a recording SOURCE" in result.output


def test_an_unreadable_client_record_file_is_one_error_line(run, tmp_path):
    bad = tmp_path / "records.csv"
    bad.write_text("not,a,harness\n1,2,3\n")
    result = run("census", f"{RUN}.om.gz", "--client-records", str(bad))
    assert result.exit_code == 3 and result.output.count("error:") == 1
