"""Threads that run the blocking part of a request for the event loop.

A ``SimpleQueue`` in and ``call_soon_threadsafe`` out: about a third of the
cost of ``run_in_executor`` per job (no ``concurrent.futures`` future chained
to an asyncio one), which is measurable when the whole request takes a few
hundred microseconds.  Daemon threads: a plugin that never returns cannot
keep the process alive after shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any]]


def _settle(fut: asyncio.Future[Any], value: Any, ok: bool) -> None:
    if fut.done():  # the request was cancelled meanwhile (shutdown)
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


class WorkerPool:
    """``size`` daemon threads taking jobs from one queue."""

    def __init__(self, size: int, name: str = "byodp-worker"):
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, job: Callable[[], T]) -> asyncio.Future[T]:
        """Run ``job`` on a pool thread; the future settles on the calling loop."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        self._jobs.put((loop, fut, job))
        return fut

    def _work(self) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                return
            loop, fut, job = item
            try:
                value: Any = job()
                ok = True
            except BaseException as exc:  # handed to the awaiting request
                value, ok = exc, False
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits
                loop.call_soon_threadsafe(_settle, fut, value, ok)

    def close(self) -> None:
        """Let each thread finish its current job and stop (queued jobs still run first)."""
        for _ in self._threads:
            self._jobs.put(None)
