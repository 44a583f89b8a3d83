"""``python -m pdcensus`` runs the command line."""

from pdcensus.cli import main

main()
