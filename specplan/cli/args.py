"""Argument types of the command line, read the way a scenario reads its numbers.

`whole_number` takes what a person writes for a count (`8`, `40_000`, `1e12`),
as the scenario schema does (specplan.simulator.core.schema.to_number), and
refuses a fraction or a word in one line naming the flag.
"""

from __future__ import annotations

import argparse
import math


def whole_number(text: str) -> int:
    """An int from '8', '40_000' or '1e12'; argparse names the flag in the refusal."""
    try:
        value = float(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not math.isfinite(value) or value != int(value):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(value)
