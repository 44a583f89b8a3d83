"""``pdcensus whatif``: the simulator calibrated to a recording, then asked what a knob would change.

Entry point::

    from pdcensus.whatif import what_if
    result = what_if(recording, ["--max-num-seqs=32"], argv=cmdline)
    result.calibration_error     # the twin without the change, against the recording
    result.refused               # a reason when that error is beyond the bound, else None
    result.figures               # observed, twin before/after, predicted (median and range over seeds)

Modules: ``knobs`` (each engine's spelling -> the twin), ``measure`` (one window's figures,
read the census's way), ``traffic`` and ``calibrate`` (the twin), ``run`` (the what-if),
``model`` (the typed result and its JSON), ``render`` (the terminal view).
"""

from pdcensus.whatif.model import WhatIfResult
from pdcensus.whatif.run import what_if

__all__ = ["WhatIfResult", "what_if"]
