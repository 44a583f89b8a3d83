"""The shape of each Prometheus API answer, checked once where every answer comes in.

A server, a proxy or a fake can answer ``{"status": "success", "data": 5}``, a sample value
``"abc"``, or a result with no ``metric``. Every reader of the API (the census's fetch, the
fleet's discovery and screen, ``query``) would otherwise meet that as a ``TypeError`` deep in
its own loop; :func:`check_data` refuses it at the door with one line naming the URL and what
is wrong (a ``DataError``, exit 3), so the readers can trust the shapes below:

::

    /api/v1/series                 a list of {label: string}
    /api/v1/labels, /label/N/values  a list of strings
    /api/v1/query, /query_range    {"resultType": ..., "result": ...}; for a vector or a matrix,
                                   each result has "metric" {label: string} and its "value"
                                   [time, "number"] or "values" [[time, "number"], ...]
    /api/v1/metadata               {name: [{...}, ...]}

Other paths are passed through unchecked. The envelope's ``warnings`` and ``infos`` are a list
of strings; one string alone is taken as one note (never split into characters), anything
else is refused the same way (:func:`notes`).
"""

from __future__ import annotations

import json
import math
from typing import Any

from pdcensus.errors import DataError


def _kind(value: Any) -> str:
    return "null" if value is None else f"{type(value).__name__} {str(value)[:40]!r}"


def _labels(url: str, value: Any, where: str) -> None:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise DataError(f"{url}: not a Prometheus API answer ({where} is {_kind(value)}, not labels of strings)")


def _point(url: str, p: Any) -> None:
    ok = isinstance(p, list) and len(p) == 2 and isinstance(p[0], (int, float)) and isinstance(p[1], str)
    if ok:
        try:
            float(p[1])
            ok = math.isfinite(float(p[0]))
        except ValueError:
            ok = False
    if not ok:
        raise DataError(f"{url}: not a Prometheus API answer (a sample is {str(p)[:40]!r}, "
                        "not [time, \"number\"])")


def _query(url: str, data: Any) -> None:
    if not isinstance(data, dict) or "result" not in data:
        raise DataError(f"{url}: not a Prometheus API answer (data is {_kind(data)}, not "
                        "{resultType, result})")
    kind, result = data.get("resultType"), data["result"]
    if kind in ("scalar", "string"):
        if not isinstance(result, list) or len(result) != 2:
            raise DataError(f"{url}: not a Prometheus API answer (a {kind} result is {_kind(result)})")
        return
    if not isinstance(result, list):
        raise DataError(f"{url}: not a Prometheus API answer (data.result is {_kind(result)}, not a list)")
    for s in result:
        if not isinstance(s, dict) or "metric" not in s:
            raise DataError(f"{url}: not a Prometheus API answer (a result has no 'metric': {str(s)[:60]!r})")
        _labels(url, s["metric"], "a result's metric")
        if "value" in s:
            _point(url, s["value"])
        values = s.get("values")
        if values is not None:
            if not isinstance(values, list):
                raise DataError(f"{url}: not a Prometheus API answer (a result's values are {_kind(values)})")
            for p in values:
                _point(url, p)


def check_data(url: str, path: str, data: Any) -> None:
    """Raise DataError if ``data`` (the envelope's ``data``) has the wrong shape for ``path``."""
    if data is None:
        return
    if path == "/api/v1/series":
        if not isinstance(data, list):
            raise DataError(f"{url}: not a Prometheus API answer (data is {_kind(data)}, not a list of label sets)")
        for labels in data:
            _labels(url, labels, "a series")
    elif path == "/api/v1/labels" or (path.startswith("/api/v1/label/") and path.endswith("/values")):
        if not isinstance(data, list) or not all(isinstance(v, str) for v in data):
            raise DataError(f"{url}: not a Prometheus API answer (data is {_kind(data)}, not a list of strings)")
    elif path in ("/api/v1/query", "/api/v1/query_range"):
        _query(url, data)
    elif path == "/api/v1/metadata":
        if not isinstance(data, dict) or not all(
                isinstance(v, list) and all(isinstance(e, dict) for e in v) for v in data.values()):
            raise DataError(f"{url}: not a Prometheus API answer (metadata is {_kind(data)}, not "
                            "{name: [entries]})")


def notes(body: dict[str, Any], field_name: str, url: str) -> list[str]:
    """``warnings``/``infos``: a list of strings; one string is one note; anything else is refused."""
    got = body.get(field_name)
    if got is None or got == [] or got == "":
        return []
    if isinstance(got, str):
        return [got]
    if not isinstance(got, list):
        raise DataError(f"{url}: not a Prometheus API answer ({field_name!r} is {type(got).__name__}, "
                        "not a list of strings)")
    for note in got:
        if not isinstance(note, str):
            raise DataError(f"{url}: not a Prometheus API answer ({field_name!r} holds {_kind(note)}, "
                            "not a string)")
    return list(got)


def _error_body(content: bytes) -> dict[str, Any]:
    try:
        body = json.loads(content)
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, the int-digits limit
        return {}
    return body if isinstance(body, dict) else {}


def api_error_type(content: bytes) -> str:
    """The ``errorType`` of an API error answer, '' for anything else."""
    body = _error_body(content)
    return str(body.get("errorType", "")) if body.get("status") == "error" else ""


def api_error_suffix(content: bytes) -> str:
    """``': <the error>'`` (200 characters at most) of an answer that carries one, else ''."""
    body = _error_body(content)
    return f": {str(body['error'])[:200]}" if body.get("error") else ""
