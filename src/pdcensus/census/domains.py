"""The domain of every figure the census prints, and the one check that withholds a figure outside it.

A figure's domain follows from its definition: a share of decoders' time lies in [0, 1]; a rate,
a count or a stall cost is >= 0; a ratio of such figures is finite and >= 0; a wait fits inside
the window it was measured in; a bucket of prefill rates has a width. The report's dataclasses
name each figure's domain beside its definition (``field(metadata=domain(Domain.SHARE))``,
:mod:`pdcensus.census.model`, :mod:`pdcensus.census.verdict_model`,
:mod:`pdcensus.census.overload_model`); a row that must hold as a whole (a bucket's width) says
so in a ``domain_violation()`` method. :func:`withhold` walks a report once, where it is built
(:func:`pdcensus.census.run.census_endpoint`): a figure outside its domain becomes NaN (not
measured: the views print no number for it), a row without a width leaves its table, and each
is named in ``verdict.withheld`` with its value and the rule it broke. An interval whose point
is inside the domain is clipped to it (a bounded figure's interval cannot reach past the bound).

NaN is inside every domain: it already means "not measured", and every view says that instead of
printing a number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields, is_dataclass, replace
from enum import Enum
from typing import Any, TypeVar

KEY = "domain"
_EPS = 1e-9  # float round-off on a share computed as a ratio of sums

T = TypeVar("T")


class Domain(str, Enum):
    """A figure's domain; the value is the rule as the report states it."""

    SHARE = "a share lies in [0, 1]"
    NONNEGATIVE = "a rate, a count, a duration or a stall cost is finite and >= 0"
    RATIO = "a ratio is finite and >= 0"
    WAIT = "a wait fits inside the window"


def domain(d: Domain) -> Mapping[str, Domain]:
    """``field(metadata=domain(Domain.SHARE))``: the figure's domain, next to its definition."""
    return {KEY: d}


def inside(value: float, d: Domain, window_seconds: float = math.inf) -> bool:
    """Whether ``value`` lies in ``d`` (NaN, "not measured", always does)."""
    if math.isnan(value):
        return True
    if d is Domain.SHARE:
        return -_EPS <= value <= 1 + _EPS
    if d is Domain.WAIT:
        limit = window_seconds if math.isfinite(window_seconds) and window_seconds > 0 else math.inf
        return 0 <= value <= limit * (1 + _EPS)
    return math.isfinite(value) and value >= 0


def _clip(bounds: tuple[float, float], d: Domain, window_seconds: float) -> tuple[float, float]:
    high = {Domain.SHARE: 1.0, Domain.WAIT: window_seconds}.get(d, math.inf)
    return tuple(x if math.isnan(x) else min(max(x, 0.0), high) for x in bounds)  # type: ignore[return-value]


def _text(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else str(value)


def withhold(obj: T, window_seconds: float = math.inf, path: str = "") -> tuple[T, tuple[str, ...]]:
    """``obj`` with every figure outside its domain withheld, and one line per figure withheld.

    Walks dataclasses and tuples of dataclasses; leaves ``obj`` itself (the same object) where
    nothing changed. A point outside its domain is withheld with its interval (the field named
    ``<point>_interval`` or, for ``Found``, ``interval``); an interval alone is clipped.
    """
    if not is_dataclass(obj) or isinstance(obj, type):
        return obj, ()
    changes: dict[str, Any] = {}
    notes: list[str] = []
    names = {f.name for f in fields(obj)}
    for f in fields(obj):
        value = getattr(obj, f.name)
        where = f"{path}.{f.name}" if path else f.name
        d = f.metadata.get(KEY)
        if d is not None and isinstance(value, float) and not inside(value, d, window_seconds):
            changes[f.name] = math.nan
            for partner in (f"{f.name}_interval", "interval" if f.name == "loss_share" else ""):
                if partner in names:
                    changes[partner] = (math.nan, math.nan)
            notes.append(f"{where} = {_text(value)} lies outside its domain ({d.value})")
        elif d is not None and isinstance(value, tuple) and len(value) == 2 and f.name not in changes:
            clipped = _clip(value, d, window_seconds)
            if clipped != value and not _same(clipped, value):
                changes[f.name] = clipped
        elif is_dataclass(value):
            new, more = withhold(value, window_seconds, where)
            if new is not value:
                changes[f.name] = new
            notes.extend(more)
        elif isinstance(value, tuple) and value and all(is_dataclass(v) for v in value):
            kept: list[Any] = []
            for i, item in enumerate(value):
                label = getattr(item, "bucket", None) or getattr(getattr(item, "mechanism", None), "value", None) or i
                broken = item.domain_violation() if hasattr(item, "domain_violation") else None
                if broken:  # named by position: its own label would print the impossible figure
                    notes.append(f"{where}[{i}] left out: {broken}")
                    continue
                new, more = withhold(item, window_seconds, f"{where}[{label}]")
                kept.append(new)
                notes.extend(more)
            if len(kept) != len(value) or any(a is not b for a, b in zip(kept, value)):
                changes[f.name] = tuple(kept)
    return (replace(obj, **changes) if changes else obj), tuple(notes)


def _same(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return all((math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b))


def figures(obj: object, path: str = "") -> list[tuple[str, float, Domain]]:
    """Every figure of ``obj`` that has a domain: ``(path, value, domain)``, an interval's bounds one by one."""
    if not is_dataclass(obj) or isinstance(obj, type):
        return []
    out: list[tuple[str, float, Domain]] = []
    for f in fields(obj):
        value = getattr(obj, f.name)
        where = f"{path}.{f.name}" if path else f.name
        d = f.metadata.get(KEY)
        if d is not None and isinstance(value, float):
            out.append((where, value, d))
        elif d is not None and isinstance(value, tuple):
            out.extend((f"{where}[{i}]", float(x), d) for i, x in enumerate(value) if isinstance(x, float))
        elif is_dataclass(value):
            out.extend(figures(value, where))
        elif isinstance(value, tuple):
            for i, item in enumerate(value):
                out.extend(figures(item, f"{where}[{i}]"))
    return out
