"""The fleet: discover every endpoint, screen them all in the store, census the worst from raw samples.

See :mod:`pdcensus.fleet.run` for the three stages; the public names are re-exported here.
"""

from pdcensus.fleet.discover import ENGINE_NAMES, Discovered, batch_selector, batches, discover_endpoints
from pdcensus.fleet.examine import ExamineOutcome, census_names
from pdcensus.fleet.rank import Examined, RankRow, rank
from pdcensus.fleet.run import FLEET_SCHEMA, FleetResult, census_fleet, census_fleet_async, pick
from pdcensus.fleet.screen import ScreenOptions
from pdcensus.fleet.screen_model import ScreenFlag, ScreenRow

__all__ = [
    "ENGINE_NAMES", "FLEET_SCHEMA", "Discovered", "Examined", "ExamineOutcome", "FleetResult", "RankRow",
    "ScreenFlag", "ScreenOptions", "ScreenRow", "batch_selector", "batches", "census_fleet",
    "census_fleet_async", "census_names", "discover_endpoints", "pick", "rank",
]
