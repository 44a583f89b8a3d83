"""CLI commands, one module per area; importing a module registers its commands on ``app``."""

from pdcensus.commands import census, demo, query, sim  # noqa: F401
