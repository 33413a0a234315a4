"""argparse types for numbers with bounds: durations in seconds and whole numbers.

One reader per kind, so every flag refuses the same way: a rejected value
exits 2 with argparse's usage message naming the value and the bound.
Standard library only (``health`` runs as a kubelet probe and imports this).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def seconds_type(most: float, *, zero: bool = False) -> Callable[[str], float]:
    """A finite number of seconds above 0 (from 0 with ``zero``) and at most ``most``.

    ``float()`` accepts ``nan`` and ``inf``; either would make a wait endless
    (``nan`` compares false with everything), and a negative one is a typo.
    """
    lowest = "from 0" if zero else "above 0"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        in_range = (value >= 0 if zero else value > 0) and value <= most
        if not math.isfinite(value) or not in_range:
            raise argparse.ArgumentTypeError(
                f"{text!r} must be a finite number of seconds {lowest} and at most {most:g}"
            )
        return value

    return parse


def whole_number_type(
    least: int, most: int | None = None, *, unit: str = ""
) -> Callable[[str], int]:
    """A whole number of at least ``least`` (and at most ``most``), e.g. of ``unit`` seconds."""
    of = f" of {unit}" if unit else ""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number{of}") from None
        if most is None and value < least:
            raise argparse.ArgumentTypeError(f"{text!r} must be at least {least}")
        if most is not None and not least <= value <= most:
            raise argparse.ArgumentTypeError(
                f"{text!r} must be between {least} and {most}{' ' + unit if unit else ''}"
            )
        return value

    return parse
