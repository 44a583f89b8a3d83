"""Fixtures for the renderer tests: a hand-built census report with every section filled."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pdcensus.advice.endpoint_report import EndpointReport

sys.path.insert(0, str(Path(__file__).parent))
from sample_report import make_report  # noqa: E402


@pytest.fixture
def report_factory() -> Callable[..., EndpointReport]:
    return make_report
