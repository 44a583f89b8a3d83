"""verify-arm: did a deployed knob engage, and did it do what the advice predicted?

A caller of the census and of the advice, not part of either. It censuses the before and
after windows (:mod:`pdcensus.census`) and buckets both on the before window's edges by the
census's one rule. It reads the knob's counter and prediction from the advice. Then it
judges argv, the counter, the bucket pair and the gate:

- :mod:`~pdcensus.verify.arm`: the steps in the runbook's order, and the verdict;
- :mod:`~pdcensus.verify.engaged`: engagement per dial (step budget, stall, preemptions);
- :mod:`~pdcensus.verify.gate`: every bucket's latencies and each prediction, each with its tolerance;
- :mod:`~pdcensus.verify.arm_args`: the command-line contract (spellings, tolerance, exit codes);
- :mod:`~pdcensus.verify.model`: the typed verdict and its JSON.
"""
