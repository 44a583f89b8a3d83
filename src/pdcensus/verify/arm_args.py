"""verify-arm's contract with a pipeline: how the knob may be written, the tolerance, the exit codes.

The advice prints a knob as ``--prefill-interleave 2``; a deploy line writes ``--x=N``; a shell
splits ``--flag --x N`` into two words. All three name the same arm, so all are accepted
(and ``x=N``, ``x N``). Kept apart from the verification itself (numpy, the census) so the
command line parses and answers a usage error without loading them.

Exit codes (also in docs/commands.md): 0 engaged and within the prediction; 1 not engaged;
5 engaged but off the prediction beyond the tolerance, or with a cost nobody predicted;
3 inconclusive (the data cannot decide: no argv, too few busy scrapes, a comparison whose interval
straddles its band or is wider than it) or unreadable data;
2 a usage error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pdcensus.errors import UsageError
from pdcensus.verify.model import ArmOutcome

# Relative tolerance around each prediction. BENCHMARKS.md "Interleave prediction error": the
# busy per-stream prediction is within 10 % on the simulator, the replayed TTFT p90 within about
# a third at N = 1-2; 25 % gates on the rate with room for its error and the gate judges a
# quantity's whole 90 % interval, so TTFT's noise does not fail it alone.
DEFAULT_TOLERANCE = 0.25

ARM_EXIT_CODES = {
    ArmOutcome.ENGAGED: 0,
    ArmOutcome.NOT_ENGAGED: 1,
    ArmOutcome.INCONCLUSIVE: 3,
    ArmOutcome.OFF_PREDICTION: 5,
}

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


def parse_flag(flag: str, rest: Sequence[str] = ()) -> tuple[str, str | None]:
    """``("--name", value or None)`` from ``"--x N"``, ``"--x=N"``, ``"x=N"``, or ``"--x"`` with ``rest == ["N"]``."""
    words = flag.split()
    if len(words) == 2 and "=" not in words[0]:
        head, value = words[0], words[1]
    elif len(words) == 1:
        head, _, value = words[0].partition("=")
    else:
        raise UsageError(f"--flag wants one knob: \"--x N\", --x=N or --x N, got {flag!r}")
    extra = list(rest)
    if extra:
        if len(extra) > 1 or value:
            raise UsageError(f"--flag {flag!r} with extra arguments {' '.join(extra)!r}: give one knob and one value")
        value = extra[0]
    name = head.lstrip("-")
    if not _NAME.match(name):
        raise UsageError(f"--flag wants a knob name such as --prefill-interleave, got {flag!r}")
    return "--" + name, value or None
