"""Prometheus's duration grammar, the one duration parser in pdcensus.

Two forms, both Prometheus's own:

* :func:`parse_duration_ms` is ``model.ParseDuration`` (prometheus/common ``model/time.go``,
  commit 06628cd): ``[0-9]+`` and a unit, units in the order ``y w d h m s ms``, each at most
  once (``1h30m``, ``10s53ms``), a year of 365 days; ``0`` alone needs no unit. No
  fractions (``1.5h``), no bare trailing number (``1h30``), no other unit (``2x``), no
  empty string. PromQL test scripts (``load 5m``, ``eval instant at 10s``) read their
  durations with it.
* :func:`parse_api_duration_seconds` is what Prometheus's HTTP API accepts for ``step``,
  ``timeout`` and the like (``parseDuration`` in ``web/api/v1/api.go``): a plain number of
  seconds (``90``, ``1.5``), else the grammar above. The command line reads every
  duration option with it.
"""

from __future__ import annotations

import math
import re

_DURATION = re.compile(r"(?:([0-9]+)y)?(?:([0-9]+)w)?(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?"
                       r"(?:([0-9]+)s)?(?:([0-9]+)ms)?")
_UNIT_MS = (365 * 86_400_000, 7 * 86_400_000, 86_400_000, 3_600_000, 60_000, 1000, 1)
_GO_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_duration_ms(text: str) -> int:
    """A Prometheus duration (``5m``, ``1h30m``, ``10s53ms``, ``0``) in milliseconds; ValueError otherwise."""
    if text == "0":
        return 0
    found = _DURATION.fullmatch(text) if text else None
    if found is None:
        raise ValueError(f"not a valid duration string: {text!r}")
    return sum(int(n) * unit for n, unit in zip(found.groups(), _UNIT_MS, strict=True) if n is not None)


def parse_api_duration_seconds(text: str) -> float:
    """Seconds as a plain (finite) number, else a Prometheus duration; ValueError otherwise."""
    if _GO_FLOAT.fullmatch(text):
        seconds = float(text)
        if math.isfinite(seconds):
            return seconds
        raise ValueError(f"cannot parse {text!r} to a valid duration: it overflows")
    return parse_duration_ms(text) / 1000.0
