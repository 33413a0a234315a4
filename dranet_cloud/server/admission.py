"""Worker slots for requests that may block, handed out in arrival order with a deadline.

A plugin call or a store write that may wait runs on a worker thread.  With
every worker busy, a fixed cap that answers 503 at once turned a burst the
server could absorb in a few milliseconds into failed claims (64 concurrent
claims: 68% 503s), while an unbounded queue let a request behind a slow
webhook wait 20 s, twice DRANET's client timeout, only to be answered when
nobody listened any more.

So a request waits for a slot, first come first served, but only while an
answer can still reach DRANET in time: it must get its slot by ``arrival +
budget - expected``, where ``expected`` is how long jobs have recently taken
(an exponentially weighted mean).  A request that cannot is answered 503
with ``Retry-After`` as soon as that is known: at once when the queue is full
or the recent jobs alone would overrun the budget, else at its deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque

# DRANET's webhook client gives every call 10 s; the answer must be on its way by then.
QUEUE_BUDGET = 8.0
MAX_WAITING = 1024
_WEIGHT = 0.2  # of the newest job in the mean job time


class Admission:
    """``slots`` concurrent jobs; the rest wait in a FIFO, each until its deadline."""

    def __init__(
        self, slots: int, *, budget: float = QUEUE_BUDGET, max_waiting: int = MAX_WAITING
    ) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        self.slots = slots
        self.budget = budget
        self.max_waiting = max_waiting
        self.busy = 0
        self.expected = 0.0  # seconds a job has recently taken
        self.turned_away = 0
        self._waiters: deque[asyncio.Future[bool]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def acquire(self, arrival: float) -> str | None:
        """Hold a slot (``None``), or say why the request cannot get one in time.

        ``arrival`` is the request's ``time.perf_counter()`` when it was read.
        """
        if self.busy < self.slots and not self._waiters:
            self.busy += 1
            return None
        why = self._hopeless(arrival)
        if why is not None:
            self.turned_away += 1
            return why
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        wait = arrival + self.budget - self.expected - time.perf_counter()
        timer = loop.call_later(wait, _expire, fut)
        self._waiters.append(fut)
        try:
            granted = await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled() and fut.result():
                self.release()  # handed over just as the request was cancelled
            else:
                self._forget(fut)
            raise
        finally:
            timer.cancel()
        if granted:
            return None
        self._forget(fut)
        self.turned_away += 1
        return (
            f"no worker became free within {self.budget - self.expected:.1f} s "
            f"({self.slots} busy, {len(self._waiters)} more waiting)"
        )

    def _forget(self, fut: asyncio.Future[bool]) -> None:
        with contextlib.suppress(ValueError):
            self._waiters.remove(fut)

    def _hopeless(self, arrival: float) -> str | None:
        if len(self._waiters) >= self.max_waiting:
            return f"{len(self._waiters)} requests are already waiting for a worker"
        if time.perf_counter() - arrival + self.expected >= self.budget:
            return (
                f"requests take {self.expected:.1f} s each now, so one that waits for a worker "
                f"cannot be answered within {self.budget:g} s"
            )
        return None

    def release(self, seconds: float | None = None) -> None:
        """Give the slot back (to the longest waiter); ``seconds`` is how long the job took."""
        if seconds is not None:
            self.expected += _WEIGHT * (seconds - self.expected)
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(True)  # the slot passes on; busy stays the same
                return
        self.busy -= 1


def _expire(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)
