"""A real Prometheus for integration tests: backfill an OpenMetrics file, serve it, stop it.

``prometheus_server(om_path) -> base_url`` backfills the file with
``promtool tsdb create-blocks-from openmetrics`` into a fresh TSDB directory, starts the
installed ``prometheus`` on 127.0.0.1 on a free port with a 100-year retention (so old
timestamps are kept), waits for ``/-/ready`` and returns ``http://127.0.0.1:PORT``.
``prometheus_scraper(targets, job, scrape_interval) -> base_url`` starts one with an empty
TSDB that scrapes live targets. Both are :class:`pdcensus.sources.prometheus_local.LocalPrometheus`;
every server is stopped when the test module that started it ends (module scope, so a module
can start one server and share it between its tests). Tests using the fixtures are skipped
only when ``promtool`` or ``prometheus`` is not installed.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pdcensus.sources.prometheus_local import LocalPrometheus


@pytest.fixture(scope="module")
def prometheus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[Path], str]]:
    """A function ``start(om_path) -> base_url`` serving that file from a real Prometheus."""
    if shutil.which("promtool") is None or shutil.which("prometheus") is None:
        pytest.skip("promtool and prometheus are not installed")
    started: list[LocalPrometheus] = []

    def start(om_path: Path) -> str:
        server = LocalPrometheus.backfilled(Path(om_path), tmp_path_factory.mktemp("prometheus"))
        started.append(server)
        return server.start().url

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def prometheus_scraper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., str]]:
    """A function ``start(targets, job="radiance", scrape_interval="1s") -> base_url``.

    Starts the installed ``prometheus`` on 127.0.0.1 on a free port with an empty TSDB,
    scraping the given ``host:port`` targets (their ``/metrics``) from the moment it is ready.
    """
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed")
    started: list[LocalPrometheus] = []

    def start(targets: list[str], job: str = "radiance", scrape_interval: str = "1s") -> str:
        server = LocalPrometheus.scraping(targets, tmp_path_factory.mktemp("prometheus-scraper"), job=job,
                                          scrape_interval=scrape_interval)
        started.append(server)
        return server.start().url

    yield start
    for server in started:
        server.stop()
