"""Finding a free address without enumerating the range.

A range may hold 2^64 addresses, so the search never walks addresses: it walks
the *occupied* ones, in ascending order, from the random start, and stops at
the first hole.  Its cost is the length of the occupied run that starts at the
chosen point (plus one index lookup), not the size of the range or the number
of allocations elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

# occupied(lo, hi): ascending, distinct occupied integer addresses within [lo, hi].
OccupiedScan = Callable[[int, int], Iterator[int]]


def _first_gap(lo: int, hi: int, occupied: OccupiedScan) -> int | None:
    expected = lo
    scan = occupied(lo, hi)
    try:
        for addr in scan:
            if addr > expected:
                return expected
            expected = addr + 1
    finally:
        close = getattr(scan, "close", None)
        if close is not None:
            close()
    return expected if expected <= hi else None


def first_free(start: int, end: int, begin: int, occupied: OccupiedScan) -> int | None:
    """The first free address at or after ``begin``, wrapping to ``start``; None when full.

    ``start``/``end`` bound the range inclusively and ``start <= begin <= end``.
    """
    found = _first_gap(begin, end, occupied)
    if found is None and begin > start:
        found = _first_gap(start, begin - 1, occupied)
    return found
