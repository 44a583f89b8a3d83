"""pdcensus: which mechanism makes decode collapse while another session prefills.

Reads an endpoint's Prometheus metrics (a recording, or a Prometheus-compatible server),
proves the window is one shape, keeps the step ledger, buckets decode by prefill from the
same scrape, lag-tests, and names the knob that acts on the measured mechanism.
"""

from __future__ import annotations

__version__ = "0.1.0"
