"""A recording as a longer scrape interval would have seen it: every K-th scrape of each endpoint.

    .venv/bin/python bench/downsample.py DIR/metrics.om OUT.om --every 5

Counters and histogram buckets are cumulative, so keeping every K-th scrape of a 1 s recording is
what a K s scrape of the same run stored (up to the scrape's phase): the clients' truth of the run
stays the truth of the thinned recording. It is how the live vLLM runs are read at the 5-15 s
scrape intervals that serving fleets use, where a prefill is far shorter than a scrape.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pdcensus.errors import CensusError
from pdcensus.series.model import Recording
from pdcensus.sources.load import load_source
from pdcensus.sources.openmetrics_writer import write_openmetrics


def thinned(recording: Recording, every: int, phase: int = 0) -> Recording:
    """Each endpoint's rows ``phase, phase + every, ...`` (series with no sample left dropped)."""
    return Recording(recording.families, [ep.take_rows(slice(phase, None, every)) for ep in recording.endpoints],
                     recording.source)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="a recording (OpenMetrics text, .pdrec, ...)")
    parser.add_argument("out", type=Path, help="the thinned recording, OpenMetrics text")
    parser.add_argument("--every", type=int, required=True, help="keep every K-th scrape (K >= 2)")
    parser.add_argument("--phase", type=int, default=0, help="the first scrape kept (0 .. K-1)")
    args = parser.parse_args()
    if args.every < 2 or not 0 <= args.phase < args.every:
        parser.error("--every must be at least 2 and --phase in 0 .. K-1")
    try:
        write_openmetrics(thinned(load_source(str(args.source)), args.every, args.phase), args.out)
    except CensusError as exc:
        print(f"downsample: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
