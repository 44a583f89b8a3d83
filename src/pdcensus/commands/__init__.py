"""CLI commands, one module per area; importing a module registers its commands on ``app``."""

from pdcensus.commands import advice, census, demo, export, fleet, fpm, live, query, serve, sim  # noqa: F401
