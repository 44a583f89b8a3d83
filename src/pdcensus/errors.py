"""One exception tree for pdcensus, mapped to exit codes at the CLI boundary.

::

    CensusError                 exit 3 unless a subclass says otherwise
    ├── UsageError              exit 2: bad flag value, unknown scenario, unknown profile
    │   ├── MissingExtraError   exit 2: a command needs an optional extra that is not installed
    │   └── PromQLParseError    exit 2: the expression is not valid PromQL
    ├── DataError               exit 3: the data cannot be used (one-line reason)
    │   ├── RecordingParseError exit 3: "<file>:<line>: <what is wrong>"
    │   ├── NotEnoughDataError  exit 3: too little data for what was asked
    │   └── QueryEvaluationError exit 3: Prometheus would refuse this query over this data
    ├── UnsupportedQueryError   exit 3: a PromQL construct outside our exact subset
    ├── RecordWriteError        exit 3: a recorder's journal could not be written
    ├── ReportWriteError        exit 3: a report file (--html, --markdown) could not be written
    └── SourceUnreachableError  exit 4: a server could not be reached

Messages quote the offending input and list the valid choices where there are any.
"""

from __future__ import annotations


class CensusError(Exception):
    """Root of every error pdcensus raises on purpose."""

    exit_code = 3


class UsageError(CensusError):
    """The user asked for something that does not exist or cannot be combined."""

    exit_code = 2


class MissingExtraError(UsageError):
    """A command needs an optional extra (``pdcensus[serve]``, ``pdcensus[fpm]``) that is not installed."""

    def __init__(self, what: str, extra: str, module: str) -> None:
        self.extra = extra
        self.module = module
        super().__init__(f"{what} needs pdcensus[{extra}] (the module {module!r} is not installed); "
                         f"install it with: pip install 'pdcensus[{extra}]'")


class PromQLParseError(UsageError):
    """The expression is not valid PromQL (quotes the expression and the parser's reason)."""


class DataError(CensusError):
    """The data exists but cannot be used."""

    exit_code = 3


class RecordingParseError(DataError):
    """A recording file could not be parsed; names the file and the 1-based line."""

    def __init__(self, path: str, line: int, what: str) -> None:
        self.path = path
        self.line = line
        self.what = what
        super().__init__(f"{path}:{line}: {what}")


class NotEnoughDataError(DataError):
    """Too little data for the pass that was asked for."""


class QueryEvaluationError(DataError):
    """Prometheus would refuse to evaluate this query over this data (e.g. ambiguous matching)."""


class UnsupportedQueryError(CensusError):
    """A PromQL function or construct outside the exact subset we evaluate."""

    exit_code = 3


class RecordWriteError(CensusError):
    """A recorder's journal could not be written (disk full, file-size limit, I/O error); exit 3."""


class ReportWriteError(CensusError):
    """A report file could not be written (missing directory, read-only, disk full); exit 3.

    The terminal report is printed first, and nothing partial is left at the path.
    """


class SourceUnreachableError(CensusError):
    """A Prometheus-compatible server or an endpoint could not be reached."""

    exit_code = 4
