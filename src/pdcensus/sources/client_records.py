"""Per-request client records from the benchmark tools people run: what users felt.

Why: the endpoint's counters say when the engine counted something; a client's own record of
each request says when its first token arrived and how fast the rest came. Three formats,
each read into :class:`ClientRequest` (seconds, relative to the file's first request):

- this harness's ``client_requests.csv[.gz]`` (the InferenceX multi-turn replay):
  ``relative_time_sec, ttft_ms, tpot_ms, latency_ms, input_num_tokens, output_num_tokens,
  approx_cached_percent, conversation_id, client_id``; ``tpot_ms`` is the mean time per
  output token after the first;
- GuideLLM's benchmark report JSON (``benchmarks[].requests.successful[]`` with
  ``start_time, first_token_time, end_time, prompt_tokens, output_tokens``, epoch seconds,
  as its 0.2-0.3 reports write them);
- vLLM's ``benchmark_serving --save-result --save-detailed`` JSON: parallel lists
  ``input_lens, output_lens, ttfts`` (seconds) and ``itls`` (per request, seconds). It has no
  start times: every request is placed at 0 and only TTFT and TPOT are meaningful.

A file that is none of these raises :class:`ClientRecordsError` (a ``CensusError``).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pdcensus.errors import DataError


class ClientRecordsError(DataError):
    """A client-records file that none of the readers understands."""


@dataclass(frozen=True)
class ClientRequest:
    start: float  # seconds from the first request's start (NaN where the format has none)
    ttft: float  # seconds
    tpot: float  # seconds per output token after the first (NaN with one output token)
    latency: float  # seconds, start to last token
    input_tokens: int
    output_tokens: int
    cached_share: float = float("nan")  # the client's estimate of prompt tokens already cached
    session: str = ""  # conversation / client id where the format has one

    @property
    def first_token(self) -> float:
        return self.start + self.ttft

    @property
    def end(self) -> float:
        return self.start + self.latency


def _open_text(path: Path) -> str:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8")


def _f(row: dict[str, Any], key: str) -> float:
    try:
        return float(row[key])
    except (KeyError, TypeError, ValueError):
        return float("nan")


def read_harness_csv(text: str) -> list[ClientRequest]:
    rows = list(csv.DictReader(io.StringIO(text)))
    need = {"relative_time_sec", "ttft_ms", "tpot_ms", "latency_ms", "input_num_tokens", "output_num_tokens"}
    if not rows or not need <= set(rows[0]):
        raise ClientRecordsError("not a client_requests CSV: expected columns " + ", ".join(sorted(need)))
    out = []
    for r in rows:
        out.append(ClientRequest(_f(r, "relative_time_sec"), _f(r, "ttft_ms") / 1e3, _f(r, "tpot_ms") / 1e3,
                                 _f(r, "latency_ms") / 1e3, int(_f(r, "input_num_tokens")),
                                 int(_f(r, "output_num_tokens")), _f(r, "approx_cached_percent") / 100.0,
                                 str(r.get("conversation_id") or r.get("client_id") or "")))
    return out


def read_guidellm(doc: dict[str, Any]) -> list[ClientRequest]:
    reqs = [q for b in doc.get("benchmarks", []) for q in (b.get("requests") or {}).get("successful", [])]
    if not reqs:
        raise ClientRecordsError("GuideLLM report without benchmarks[].requests.successful[]")
    t0 = min(_f(q, "start_time") for q in reqs)
    out = []
    for q in reqs:
        start, first, end = _f(q, "start_time"), _f(q, "first_token_time"), _f(q, "end_time")
        n = int(_f(q, "output_tokens"))
        tpot = (end - first) / (n - 1) if n > 1 else float("nan")
        out.append(ClientRequest(start - t0, first - start, tpot, end - start, int(_f(q, "prompt_tokens")), n,
                                 session=str(q.get("request_id", ""))))
    return out


def read_benchmark_serving(doc: dict[str, Any]) -> list[ClientRequest]:
    ins, outs, ttfts, itls = (doc.get(k) for k in ("input_lens", "output_lens", "ttfts", "itls"))
    if not (isinstance(ins, list) and isinstance(outs, list) and isinstance(ttfts, list)):
        raise ClientRecordsError("benchmark_serving result without input_lens/output_lens/ttfts (use --save-detailed)")
    out = []
    for i, (n_in, n_out, ttft) in enumerate(zip(ins, outs, ttfts)):
        gaps = itls[i] if isinstance(itls, list) and i < len(itls) and isinstance(itls[i], list) else []
        decode = float(np.sum(gaps)) if gaps else float("nan")
        tpot = decode / len(gaps) if gaps else float("nan")
        out.append(ClientRequest(float("nan"), float(ttft), tpot, float(ttft) + (decode if gaps else 0.0),
                                 int(n_in), int(n_out)))
    return out


def load_client_records(path: str | Path) -> list[ClientRequest]:
    """Read any of the three formats (sniffed from the content, not the name)."""
    p = Path(path)
    try:
        text = _open_text(p)
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile) as exc:
        raise ClientRecordsError(f"{p}: cannot read client records: {exc}") from exc
    head = text.lstrip()[:1]
    if head in ("{", "["):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ClientRecordsError(f"{p}: not JSON: {exc}") from exc
        except RecursionError:
            raise ClientRecordsError(f"{p}: JSON nested too deep to read") from None
        if not isinstance(doc, dict):
            raise ClientRecordsError(f"{p}: JSON top level is not an object")
        return read_guidellm(doc) if "benchmarks" in doc else read_benchmark_serving(doc)
    return read_harness_csv(text)
