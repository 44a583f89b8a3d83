"""What users felt, from their own client records, split by the census's prefill buckets.

Why: the endpoint's counters say when the engine counted tokens; a benchmark client's
records (``pdcensus.sources.client_records``) say what each request waited for its first
token (TTFT) and how fast the rest came (TPOT, the client's mean inter-token latency).
Read beside the census, they answer "did users decode slower while other prompts
prefilled?" from the users' side.

Client clocks are not the scraper's. :func:`align_records` finds the offset between them:
vLLM counts a prompt in the step that emits its first token, so the client's first-token
instants weighted by prompt tokens must line up with the prompt counter's increases; the
offset is the lag of the best cross-correlation (1 s resolution), with its z-score so a
weak match is reported, never trusted silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pdcensus.sources.client_records import ClientRequest

# An alignment whose correlation peak is fewer standard deviations above the median is weak.
MIN_ALIGNMENT_Z = 5.0
# A request decoded "during prefill" when at least this share of its decode window lay in busy scrapes.
BUSY_DECODE_SHARE = 0.5
MIN_REQUESTS = 10


@dataclass(frozen=True)
class Alignment:
    offset_seconds: float  # recording time = client time + offset
    z: float  # the correlation peak's height in robust standard deviations

    @property
    def trusted(self) -> bool:
        return bool(np.isfinite(self.z) and self.z >= MIN_ALIGNMENT_Z)


@dataclass(frozen=True)
class FeltSide:
    requests: int
    ttft_p50: float
    ttft_p90: float
    tpot_p50: float
    tpot_p90: float


@dataclass(frozen=True)
class ClientFelt:
    alignment: Alignment
    arrived_busy: FeltSide  # TTFT of requests that arrived in a scrape with busy prefill
    arrived_idle: FeltSide
    decoded_busy: FeltSide  # TPOT of requests that decoded mostly in busy scrapes
    decoded_idle: FeltSide
    tpot_ratio: float  # median TPOT decoded idle / decoded busy: per-stream decode busy / idle as users felt it


def _grid(times: np.ndarray, weights: np.ndarray, start: float, length: int) -> np.ndarray:
    g = np.zeros(length)
    ok = np.isfinite(times) & np.isfinite(weights)
    idx = np.clip((times[ok] - start).astype(np.int64), 0, length - 1)
    np.add.at(g, idx, weights[ok])
    return g


def align_records(records: Sequence[ClientRequest], times: np.ndarray, prompt_increase: np.ndarray) -> Alignment:
    """Offset between the client's clock and the recording's (first tokens vs the prompt counter)."""
    first = np.array([r.first_token for r in records])
    tokens = np.array([float(r.input_tokens) for r in records])
    if not np.isfinite(first).any() or times.size < 2:
        return Alignment(float("nan"), float("nan"))
    t0 = float(times[0])
    rec = _grid(times, np.nan_to_num(prompt_increase), t0, int(times[-1] - t0) + 2)
    origin = min(0.0, float(np.nanmin(first)))
    cli = _grid(first, tokens, origin, int(np.nanmax(first) - origin) + 2)
    a, b = rec - rec.mean(), cli - cli.mean()
    n = a.size + b.size
    corr = np.fft.irfft(np.fft.rfft(a, n) * np.conj(np.fft.rfft(b, n)), n)
    # lags k >= 0: client second x sits at recording second x + k; k < 0 wraps to the end
    lags = np.r_[np.arange(a.size), np.arange(-b.size + 1, 0)]
    vals = np.r_[corr[:a.size], corr[n - b.size + 1:]]
    k = int(np.argmax(vals))
    spread = 1.4826 * float(np.median(np.abs(vals - np.median(vals))))
    z = (float(vals[k]) - float(np.median(vals))) / spread if spread > 0 else float("nan")
    return Alignment(t0 + float(lags[k]) - origin, z)


def _side(ttft: np.ndarray, tpot: np.ndarray) -> FeltSide:
    def q(x: np.ndarray, p: float) -> float:
        x = x[np.isfinite(x)]
        return float(np.quantile(x, p)) if x.size else float("nan")
    return FeltSide(int(max(np.isfinite(ttft).sum(), np.isfinite(tpot).sum())), q(ttft, 0.5), q(ttft, 0.9),
                    q(tpot, 0.5), q(tpot, 0.9))


def client_felt(records: Sequence[ClientRequest], times: np.ndarray, prompt_increase: np.ndarray,
                prefill_busy: np.ndarray) -> ClientFelt:
    """TTFT by the prefill bucket a request arrived in, TPOT by the buckets it decoded in.

    ``prefill_busy`` is the census's busy mask per scrape (the interval ending at each scrape).
    """
    al = align_records(records, times, prompt_increase)
    start = np.array([r.start for r in records]) + al.offset_seconds
    first = np.array([r.first_token for r in records]) + al.offset_seconds
    end = np.array([r.end for r in records]) + al.offset_seconds
    ttft = np.array([r.ttft for r in records])
    tpot = np.array([r.tpot for r in records])
    busy = np.asarray(prefill_busy, dtype=bool)
    # the interval (times[i-1], times[i]] carries scrape i's bucket
    cum = np.concatenate([[0.0], np.cumsum(np.where(busy[1:], np.diff(times), 0.0))])

    def busy_seconds(t: np.ndarray) -> np.ndarray:
        return np.asarray(np.interp(t, times, cum), dtype=np.float64)

    at = np.clip(np.searchsorted(times, start, side="left"), 0, times.size - 1)
    inside = np.isfinite(start) & (start >= times[0]) & (start <= times[-1])
    arrived_busy = inside & busy[at]
    arrived_idle = inside & ~busy[at]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = (busy_seconds(end) - busy_seconds(first)) / (end - first)
    decoding = np.isfinite(share) & (end > first) & (first >= times[0]) & (end <= times[-1])
    d_busy, d_idle = decoding & (share >= BUSY_DECODE_SHARE), decoding & (share < BUSY_DECODE_SHARE)
    nan = np.full(len(records), np.nan)
    sides = (_side(np.where(arrived_busy, ttft, nan), nan), _side(np.where(arrived_idle, ttft, nan), nan),
             _side(nan, np.where(d_busy, tpot, nan)), _side(nan, np.where(d_idle, tpot, nan)))
    b, i = sides[2], sides[3]
    ratio = (i.tpot_p50 / b.tpot_p50 if b.requests >= MIN_REQUESTS and i.requests >= MIN_REQUESTS
             and b.tpot_p50 > 0 else float("nan"))
    return ClientFelt(al, *sides, ratio)
