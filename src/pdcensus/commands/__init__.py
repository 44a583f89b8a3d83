"""CLI commands, one module per area; ``pdcensus.cli`` imports each, which registers its commands on ``app``."""
