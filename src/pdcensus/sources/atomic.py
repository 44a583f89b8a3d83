"""Write a file whole or not at all: a temporary file beside it, fsynced, then renamed over it.

A report written straight to its path leaves half a ``report.html`` behind when the disk
fills, and a reader (a browser, a CI artifact upload) cannot tell. Here the bytes go to
``.NAME.XXXX.tmp`` in the same directory; only a complete, fsynced file is renamed to NAME
(rename is atomic within one filesystem). A path that is not a regular file (``/dev/stdout``,
a FIFO, ``/dev/full``) is written into, never replaced; a symbolic link's target is written,
the link kept. Any failure removes the temporary file and raises
:class:`~pdcensus.errors.ReportWriteError` with one line: the path and the reason.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from pdcensus.errors import ReportWriteError


def write_atomically(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` (text is UTF-8) to ``path`` through a temporary file and a rename."""
    out = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)  # write the link's target
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = ""
    try:
        if out.exists() and not out.is_file():  # a device, a FIFO: written into, never renamed over
            with open(out, "wb") as fh:
                fh.write(raw)
                fh.flush()
            return out
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent if str(out.parent) else ".")
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644 & ~_umask())
        os.replace(tmp, out)
    except OSError as exc:
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        code = errno.errorcode.get(exc.errno or 0, "")
        reason = f"{exc.strerror or exc}" + (f" ({code})" if code else "")
        raise ReportWriteError(f"cannot write {str(out)!r}: {reason}; the path is left as it was") from None
    return out


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
