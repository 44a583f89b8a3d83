"""A recording whose disk fails in the middle of a read: one clear line and exit 3, never an internal error.

The failure is injected (a real EIO needs failing hardware): the file opens and the first
reads succeed, then a read raises ``OSError(EIO)``, as a dying disk or a dropped network
mount does. Each reader is tried through the CLI entry point ``pdcensus.cli.main``: a text
recording read in chunks, a pdcensus recording journal, a Parquet copy, and a truncated gzip
(a real one: the stream simply ends).
"""

from __future__ import annotations

import errno
import gzip
import io
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pdcensus import cli
from pdcensus.sources import textformat
from pdcensus.sources.store import save_parquet

from .recordings import sharing_recording, write_recording


class _FailingFile(io.RawIOBase):
    """A file that reads ``good_bytes`` bytes of the real file, then fails with EIO."""

    def __init__(self, path: Path, good_bytes: int) -> None:
        self._inner = open(path, "rb")  # noqa: SIM115 - closed in close()
        self._left = good_bytes

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._inner.seekable()

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._inner.seek(offset, whence)

    def readinto(self, buffer: Any) -> int:
        if self._left <= 0:
            raise OSError(errno.EIO, "Input/output error")
        view = memoryview(buffer)[: self._left]
        n = self._inner.readinto(view)
        self._left -= n
        return n

    def close(self) -> None:
        self._inner.close()
        super().close()


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as caught:
        cli.main(args)
    out, err = capsys.readouterr()
    return int(caught.value.code or 0), out, err


def _assert_one_clear_line(code: int, out: str, err: str, path: Path) -> None:
    assert code == 3, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert str(path) in lines[0] and "Input/output error" in lines[0], lines[0]
    assert "internal error" not in err and "Traceback" not in err and out == ""


def test_a_text_recording_failing_mid_read_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_recording(tmp_path / "metrics.om", sharing_recording(240))
    size = path.stat().st_size
    real_open = open

    def failing_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if Path(file) == path and "b" in mode:
            return io.BufferedReader(_FailingFile(path, size // 2), buffer_size=4096)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(textformat, "open", failing_open, raising=False)
    _assert_one_clear_line(*_run(["census", str(path)], capsys), path)


def test_a_recording_journal_failing_mid_read_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from pdcensus.sources import recorder_journal

    path = tmp_path / "live.pdrec"
    path.write_bytes(recorder_journal.MAGIC)
    real_read_bytes = Path.read_bytes

    def failing_read_bytes(self: Path) -> bytes:
        if self == path:
            raise OSError(errno.EIO, "Input/output error")
        return real_read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", failing_read_bytes)
    _assert_one_clear_line(*_run(["census", str(path)], capsys), path)


def test_a_parquet_copy_failing_mid_read_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "metrics.parquet"
    save_parquet(sharing_recording(120), path)

    def failing_read_parquet(*args: Any, **kwargs: Any) -> pl.DataFrame:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(pl, "read_parquet", failing_read_parquet)
    _assert_one_clear_line(*_run(["census", str(path)], capsys), path)


def test_a_truncated_gzip_recording_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = write_recording(tmp_path / "whole.om", sharing_recording(240)).read_bytes()
    packed = gzip.compress(text)
    path = tmp_path / "cut.om.gz"
    path.write_bytes(packed[: len(packed) // 2])
    code, out, err = _run(["census", str(path)], capsys)
    assert code == 3 and len(err.strip().splitlines()) == 1 and str(path) in err
    assert "ended before the end-of-stream marker" in err and out == ""
