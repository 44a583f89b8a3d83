"""The Parquet store round-trips exactly; load_source finds and sniffs files and directories."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from pdcensus.errors import DataError
from pdcensus.series.model import Endpoint, Family, MetricType, Recording, SeriesKey
from pdcensus.sources.load import load_source, sniff_text_format
from pdcensus.sources.openmetrics_writer import write_openmetrics
from pdcensus.sources.store import save_parquet
from pdcensus.sources.textformat import TextFormat
from shared_data import REAL_METRICS

from test_textformat_roundtrip import assert_same, sample_recording

REALDATA = REAL_METRICS


def test_parquet_round_trip_is_exact_with_nan_samples_and_absent_cells(tmp_path: Path) -> None:
    original = sample_recording()
    save_parquet(original, tmp_path / "rec.parquet")
    back = load_source(tmp_path / "rec.parquet")
    assert_same(original, back)
    assert back.families == original.families
    for ea, eb in zip(original.endpoints, back.endpoints):
        nan_samples = np.isnan(ea.values) & ea.present
        assert nan_samples.any()
        np.testing.assert_array_equal(nan_samples, np.isnan(eb.values) & eb.present)


def test_parquet_keeps_a_scrape_row_with_no_sample_and_a_series_with_none(tmp_path: Path) -> None:
    keys = [SeriesKey("g", (("instance", "i"), ("job", "j"))), SeriesKey("h", (("instance", "i"), ("job", "j")))]
    values = np.array([[1.0, np.nan], [np.nan, np.nan], [3.0, np.nan]])
    present = np.array([[True, False], [False, False], [True, False]])
    endpoint = Endpoint("j", "i", np.array([10.0, 25.0, 40.5]), keys, values, present)
    original = Recording({"g": Family("g", MetricType.GAUGE)}, [endpoint], "x")
    save_parquet(original, tmp_path / "r.parquet")
    back = load_source(tmp_path / "r.parquet")
    assert_same(original, back)


def test_parquet_without_our_metadata_is_a_data_error(tmp_path: Path) -> None:
    import polars as pl

    pl.DataFrame({"a": [1, 2]}).write_parquet(tmp_path / "other.parquet")
    with pytest.raises(DataError, match="without pdcensus metadata"):
        load_source(tmp_path / "other.parquet")


def test_damaged_parquet_is_a_data_error(tmp_path: Path) -> None:
    save_parquet(sample_recording(), tmp_path / "r.parquet")
    data = (tmp_path / "r.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match="cut.parquet"):
        load_source(tmp_path / "cut.parquet")


def test_load_source_sniffs_openmetrics_by_content_not_name(tmp_path: Path) -> None:
    path = tmp_path / "recording.txt"
    write_openmetrics(sample_recording(), path)
    assert_same(sample_recording(), load_source(path))


def test_load_source_reads_a_0_0_4_scrape_at_the_file_mtime(tmp_path: Path) -> None:
    path = tmp_path / "node-7.prom"
    shutil.copy(REALDATA / "vllm-0.4.3_opt-125m_datadog-fixture.prom", path)
    os.utime(path, (1_718_140_600.5, 1_718_140_600.5))
    endpoint = load_source(path).endpoint()
    assert endpoint.timestamps.tolist() == [1_718_140_600.5]
    assert endpoint.instance == "node-7"
    assert load_source(path, scrape_time=99.0).endpoint().timestamps.tolist() == [99.0]


def test_load_source_reads_gzip_text(tmp_path: Path) -> None:
    plain = tmp_path / "rec.om"
    write_openmetrics(sample_recording(), plain)
    packed = tmp_path / "rec.om.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert_same(load_source(plain), load_source(packed))
    scrape = tmp_path / "box.prom.gz"
    scrape.write_bytes(gzip.compress((REALDATA / "sglang-0.3.x_llama-3.1-8b_sglang-docs.prom").read_bytes()))
    assert load_source(scrape, scrape_time=1.0).endpoint().instance == "box"


def test_load_source_on_a_directory_takes_metrics_om(tmp_path: Path) -> None:
    write_openmetrics(sample_recording(), tmp_path / "metrics.om")
    (tmp_path / "truth.json").write_text("{}")
    assert_same(sample_recording(), load_source(tmp_path))


def test_load_source_on_a_directory_prefers_a_fresh_parquet_copy(tmp_path: Path) -> None:
    write_openmetrics(sample_recording(), tmp_path / "metrics.om")
    only_first = sample_recording()
    only_first.endpoints = only_first.endpoints[:1]
    save_parquet(only_first, tmp_path / "metrics.parquet")
    os.utime(tmp_path / "metrics.om", (1000.0, 1000.0))
    assert len(load_source(tmp_path).endpoints) == 1
    os.utime(tmp_path / "metrics.om", None)
    os.utime(tmp_path / "metrics.parquet", (1000.0, 1000.0))
    assert len(load_source(tmp_path).endpoints) == 2


def test_load_source_on_a_directory_with_one_prom_file_takes_it(tmp_path: Path) -> None:
    shutil.copy(REALDATA / "sglang-0.3.x_llama-3.1-8b_sglang-docs.prom", tmp_path / "scrape.prom")
    assert load_source(tmp_path, scrape_time=1.0).endpoint().instance == "scrape"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(lambda d: d / "nope.om", "no such file", id="missing-file"),
        pytest.param(lambda d: d, "no recording in directory", id="empty-directory"),
        pytest.param(lambda d: (d / "a.om").touch() or (d / "b.prom").touch() or d, "several recordings",
                     id="ambiguous-directory"),
    ],
)
def test_load_source_names_the_path_when_there_is_nothing_to_load(tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    target = make(tmp_path)
    with pytest.raises(DataError, match=message) as caught:
        load_source(target)
    assert str(tmp_path) in str(caught.value)


def test_empty_directory_error_lists_what_it_looked_for(tmp_path: Path) -> None:
    with pytest.raises(DataError) as caught:
        load_source(tmp_path)
    for name in ("metrics.om", "metrics.parquet", "*.om", "*.prom"):
        assert name in str(caught.value)


@pytest.mark.parametrize(
    ("head", "tail", "expected"),
    [
        pytest.param(b"# TYPE g gauge\ng 1\n", b"", TextFormat.PROMETHEUS, id="plain-scrape"),
        pytest.param(b"g 1 1700000000123\n", b"", TextFormat.PROMETHEUS, id="millisecond-timestamps"),
        pytest.param(b'g{a="x y"} 1\n', b"", TextFormat.PROMETHEUS, id="space-in-label-no-timestamp"),
        pytest.param(b"g 1 1700000000.5\n", b"", TextFormat.OPENMETRICS, id="float-second-timestamps"),
        pytest.param(b"g 1 1700000000\n", b"", TextFormat.OPENMETRICS, id="integer-second-timestamps"),
        pytest.param(b"# TYPE g gauge\n# UNIT g seconds\ng 1\n", b"", TextFormat.OPENMETRICS, id="unit-line"),
        pytest.param(b"g 1\n", b"g 1\n# EOF\n", TextFormat.OPENMETRICS, id="eof-at-the-end"),
    ],
)
def test_sniff_tells_openmetrics_from_prometheus_text(head: bytes, tail: bytes, expected: TextFormat) -> None:
    assert sniff_text_format(head, tail) is expected


def test_load_source_reads_the_recorders_journal_by_its_magic_line(tmp_path: Path) -> None:
    from pdcensus.sources.load import RECORD_JOURNAL_MAGIC
    from pdcensus.sources.recorder_journal import MAGIC, ScrapeHeader, encode_block

    assert RECORD_JOURNAL_MAGIC == MAGIC
    body = (REALDATA / "sglang-0.3.x_llama-3.1-8b_sglang-docs.prom").read_bytes()
    blocks = [
        encode_block(ScrapeHeader(time=1000.0 + 15 * i, job="rec", instance="h:1", up=1, body_bytes=len(body)), body)
        for i in range(3)
    ]
    path = tmp_path / "run.pdrec"
    path.write_bytes(MAGIC + b"".join(blocks))
    endpoint = load_source(path).endpoint()
    assert endpoint.timestamps.tolist() == [1000.0, 1015.0, 1030.0]
    assert load_source(tmp_path).endpoint().instance == "h:1"


def test_a_gzip_file_with_a_corrupt_stream_is_a_data_error(tmp_path: Path) -> None:
    from pdcensus.errors import DataError
    from pdcensus.sources.load import load_source

    bad = tmp_path / "metrics.om.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00" + b"\x00" * 11)  # gzip magic, then a broken deflate block
    with pytest.raises(DataError, match="cannot read"):
        load_source(bad)
