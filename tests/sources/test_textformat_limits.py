"""Files built to exhaust memory: no newline, a huge comment line, a gzip bomb. Each is refused at its cap.

The caps are lowered through their environment variables (``PDCENSUS_MAX_LINE``,
``PDCENSUS_MAX_DECOMPRESSED``) so the files stay small: a 64 KiB cap and 1 MiB of input
test the same code as the 16 MiB default and a 2 GB file (RELIABILITY.md gives the
measured memory of the 2 GB cases at the default caps).
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pdcensus.errors import DataError, RecordingParseError
from pdcensus.sources.textformat import TextFormat, read_text

MiB = 1 << 20


@pytest.fixture(autouse=True)
def small_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PDCENSUS_MAX_LINE", "64KiB")
    monkeypatch.setenv("PDCENSUS_MAX_DECOMPRESSED", "1MiB")


class CountingReader:
    """A real file, counting the bytes taken from it (to show the reader stopped early)."""

    def __init__(self, path: Path) -> None:
        self.fh = open(path, "rb")
        self.taken = 0
        self.name = str(path)

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n)
        self.taken += len(data)
        return data


def test_a_file_with_no_newline_is_refused_at_the_line_cap_before_it_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "nonl.om"
    path.write_bytes(b"a" * (4 * MiB))
    reader = CountingReader(path)
    try:
        with pytest.raises(RecordingParseError, match=r":1: a line longer than 64 KiB: 'aaaa.*PDCENSUS_MAX_LINE=SIZE"):
            read_text(reader, TextFormat.OPENMETRICS)  # type: ignore[arg-type]
    finally:
        reader.fh.close()
    assert reader.taken <= 256 << 10  # a few caps' worth, not the 4 MiB


@pytest.mark.parametrize("fmt", list(TextFormat))
def test_a_comment_line_over_the_cap_is_refused_with_its_line_number(tmp_path: Path, fmt: TextFormat) -> None:
    path = tmp_path / "comment.om"
    path.write_bytes(b"# TYPE x gauge\nx 1 1\n# " + b"c" * MiB + b"\nx 2 2\n# EOF\n")
    with pytest.raises(RecordingParseError, match=r"comment.om:3: a line longer than 64 KiB: '# ccc") as caught:
        read_text(path, fmt)
    assert caught.value.exit_code == 3 and len(str(caught.value)) < 400


def test_a_long_line_inside_one_read_chunk_is_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "label.om"
    path.write_bytes(b'# TYPE x gauge\nx{a="' + b"v" * (100 << 10) + b'"} 1 1\n# EOF\n')
    with pytest.raises(RecordingParseError, match=r":2: a line longer than 64 KiB"):
        read_text(path, TextFormat.OPENMETRICS, chunk_bytes=4 * MiB)


def test_a_line_under_the_cap_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "ok.om"
    path.write_bytes(b'# TYPE x gauge\nx{a="' + b"v" * (60 << 10) + b'"} 1 1\n# EOF\n')
    assert len(read_text(path, TextFormat.OPENMETRICS).endpoint().keys) == 1


def test_a_gzip_bomb_of_zeros_is_refused_after_one_chunk(tmp_path: Path) -> None:
    path = tmp_path / "bomb.om.gz"
    with gzip.open(path, "wb", compresslevel=9) as fh:
        for _ in range(8):
            fh.write(b"\0" * MiB)
    with pytest.raises(RecordingParseError, match=r"bomb.om.gz:1: not a text metrics file \(NUL byte"):
        read_text(path, TextFormat.OPENMETRICS)


def test_a_gzip_of_valid_lines_past_the_decompressed_cap_is_refused_naming_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "lines.om.gz"
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write(b"# TYPE x gauge\n")
        fh.write(b"# a comment of a bomb made of whole lines\n" * 60_000)  # 2.5 MiB
        fh.write(b"x 1 1\n# EOF\n")
    with pytest.raises(DataError, match=r"decompressed recording is over the limit of 1 MiB.*PDCENSUS_MAX_DECOMPRESSED"):
        read_text(path, TextFormat.OPENMETRICS)


def test_the_census_cli_refuses_a_newline_free_file_with_one_line_and_exit_3(tmp_path: Path) -> None:
    path = tmp_path / "z.om"
    with open(path, "wb") as fh:
        fh.truncate(64 * MiB)  # sparse: 64 MiB of NUL, as `truncate -s` makes
    text = tmp_path / "t.om"
    text.write_bytes(b"x" * (2 * MiB))
    for file, said in ((path, "NUL byte at column 1"), (text, "a line longer than 64 KiB")):
        done = subprocess.run([sys.executable, "-m", "pdcensus", "census", str(file)], capture_output=True,
                              text=True, timeout=60, check=False, env=dict(os.environ))
        assert done.returncode == 3, done.stderr
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ") and said in done.stderr


def _churn(path: Path, n: int) -> Path:
    """``n`` scrapes, each with a new label set of one gauge: n series x n timestamps."""
    rows = [f'x{{id="{i}"}} 1 {1.7e9 + i:.0f}' for i in range(n)]
    path.write_text("# TYPE x gauge\n" + "\n".join(rows) + "\n# EOF\n")
    return path


def test_label_churn_past_the_grid_cap_is_refused_naming_its_size(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PDCENSUS_MAX_CELLS", "1000000")
    with pytest.raises(DataError, match=r"2,000 series x 2,000 distinct timestamps, a grid of 4,000,000 cells.*"
                                        r"PDCENSUS_MAX_CELLS=N"):
        read_text(_churn(tmp_path / "churn.om", 2000), TextFormat.OPENMETRICS)


def test_more_series_than_the_series_cap_are_refused_as_they_come(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PDCENSUS_MAX_SERIES", "500")
    with pytest.raises(DataError, match=r"more than 500 distinct series \(label churn\?\).*PDCENSUS_MAX_SERIES=N"):
        read_text(_churn(tmp_path / "churn.om", 2000), TextFormat.OPENMETRICS)


def test_the_same_churn_under_the_caps_reads(tmp_path: Path) -> None:
    assert len(read_text(_churn(tmp_path / "churn.om", 300), TextFormat.OPENMETRICS).endpoint().keys) == 300
