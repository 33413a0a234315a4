"""Requests that only touch the node's IPAM store run on the event loop.

A ``local-ipam`` claim is a dictionary lookup, a few SQLite statements on a
local file and a reply.  Handing it to a worker thread and back cost more
than the work itself: two wake-ups and a GIL hand-over each way, with cold
caches after each.  So such a request runs where it was parsed, with the
store in deferred mode (:meth:`SqliteStore.deferred_writes`), under two
rules that keep the loop (and ``/health``) from ever waiting on it:

* it never waits: when the store lock is taken (a worker thread, the
  collector, a commit under way) or another process holds the database's
  write lock, the store raises :class:`~dranet_cloud.toolkit.errors.WouldBlock`
  before reading anything and records it on the deferred-writes scope, and
  the request goes to the worker pool, where waiting is allowed and bounded
  by the busy timeout (whatever the plugin code in between did with the
  exception: the lane reads the scope, not the outcome);
* it never commits: its writes stay in the open transaction.  At the end of
  the loop iteration, every request that wrote in it is committed together
  on the committer thread (one fsync for all of them), and only then are
  the answers released.  A group that changed nothing (a kubelet retry)
  commits on the loop at once, which writes nothing to disk.  Requests that
  arrive while a commit holds the store queue for it and run the moment it
  ends, as the next group.

If the commit fails, every answer that waited for it becomes an error (the
kubelet retries): nobody learns of an address that is not on disk.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from dranet_cloud.ipam.node.sqlite import SqliteStore
from dranet_cloud.toolkit.errors import WouldBlock
from dranet_cloud.toolkit.logsafe import safe

log = logging.getLogger(__name__)

T = TypeVar("T")


def _failure(fut: asyncio.Future[None]) -> BaseException | None:
    if fut.cancelled():
        return RuntimeError("the commit was cancelled (the server is stopping)")
    return fut.exception()


class StoreOnlyJob:
    """A request job marked as touching nothing but the node's IPAM store.

    ``finish`` turns what the job returned into the answer.  It runs after
    the job's writes are committed, outside the stretch between two commits
    in which the store waits for the loop, so work that needs no store
    (encoding the reply) belongs there rather than in the job.
    """

    __slots__ = ("finish", "job")

    def __init__(self, job: Callable[[], Any], finish: Callable[[Any], Any] | None = None) -> None:
        self.job = job
        self.finish: Callable[[Any], Any] = finish if finish is not None else _same

    def __call__(self) -> Any:
        """Job and finish together, for a thread where nothing waits on the store."""
        return self.finish(self.job())


def _same(value: Any) -> Any:
    return value


_OVERDUE = object()  # what a job's future holds once its deadline passed


def _overdue(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_result(_OVERDUE)


class _Blocked:
    """What a queued job's future holds when the job would have waited."""

    __slots__ = ("reason",)

    def __init__(self, reason: Exception) -> None:
        self.reason = reason


class StoreLane:
    """Runs :class:`StoreOnlyJob` jobs on the loop and commits their writes in groups.

    ``fallback`` runs a job where it may wait (a worker, given the request's
    arrival time; it may answer in the job's place instead); ``committer``
    runs a commit on the one thread that does them; ``failed`` turns a commit
    failure into the answer every request of that group gets instead.

    The store is busy from one commit to the next, so the lane keeps the
    time between them short: when a commit ends, the jobs that queued
    during it run at once, in the same callback, and their group is handed
    to the committer before anything else (sending the answers, parsing new
    requests) runs.  That other work then overlaps the next fsync instead
    of delaying it.
    """

    def __init__(
        self,
        store: SqliteStore,
        *,
        fallback: Callable[[Callable[[], T], float], Awaitable[Any]],
        committer: Callable[[Callable[[], None]], asyncio.Future[None]],
        failed: Callable[[BaseException], Any],
        late: Callable[[], Any] | None = None,
        budget: float = 8.0,
    ) -> None:
        self.store = store
        self._fallback: Callable[[Callable[[], Any], float], Awaitable[Any]] = fallback
        self._committer = committer
        self._failed = failed
        self._late = late
        self._budget = budget
        self._batches: list[Any] = []
        self._answers: list[tuple[asyncio.Future[Any], Any]] = []
        self._scheduled: asyncio.Handle | None = None
        # True from handing a commit over until it has ended, however it ended:
        # the committer holds the store meanwhile.
        self._committing = False
        # Jobs that arrived during a commit, run as soon as it ends.
        self._queued: list[tuple[Callable[[], Any], asyncio.Future[Any]]] = []
        # Requests answered here and requests that went to the pool because they
        # would have waited (figures for tests; never reset).
        self.ran_inline = 0
        self.sent_to_pool = 0

    async def run(self, job: Callable[[], T], arrival: float | None = None) -> T:
        """The job's answer, released once what it wrote is durable.

        ``arrival`` (``time.perf_counter()`` when the request was read) is
        passed on to ``fallback`` for a job that must wait on a worker.
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        timer = None
        if arrival is not None and self._late is not None:
            # A commit that hangs (a stalled disk) must not hold the answer past
            # DRANET's timeout: it gets ``late`` instead; writes made meanwhile
            # are committed or not, and a retry of the claim finds them.
            left = arrival + self._budget - time.perf_counter()
            timer = loop.call_at(loop.time() + left, _overdue, fut)
        if self._committing:
            # The committer holds the store until its fsync is done: queue here
            # rather than occupy a worker thread; the job runs when that commit
            # ends and its writes form the next group.
            self._queued.append((job, fut))
        else:
            self._start(job, fut)
        outcome = await fut
        if timer is not None:
            timer.cancel()
        if outcome is _OVERDUE and self._late is not None:
            log.warning("store lane: no commit within %g s of the request's arrival", self._budget)
            return cast(T, self._late())
        if isinstance(outcome, _Blocked):
            log.debug(
                "store lane: %s; running the request on a worker thread", safe(outcome.reason)
            )
            self.sent_to_pool += 1
            began = time.perf_counter() if arrival is None else arrival
            result: T = await self._fallback(job, began)
            return result
        return cast(T, outcome)

    def _start(self, job: Callable[[], Any], fut: asyncio.Future[Any]) -> None:
        """Run ``job`` now; ``fut`` gets its answer at once (nothing written),
        after its group's commit, or :class:`_Blocked`."""
        if fut.done():  # the request was cancelled while queued
            return
        blocked: Exception | None
        with self.store.deferred_writes() as scope:
            try:
                answer = job()
            except Exception as exc:
                if scope.blocked is None and not isinstance(exc, WouldBlock):
                    fut.set_exception(exc)
                    return
                blocked = scope.blocked or exc
            else:
                # A step that would have waited is recorded on the scope even
                # when the code between here and the store caught its exception.
                blocked = scope.blocked
            finally:
                # Whatever happened, what was written must be committed (a
                # write made before a refusal, too): the group holds the lock.
                self._hold(scope.batches)
        if blocked is not None:
            fut.set_result(_Blocked(blocked))
            return
        self.ran_inline += 1
        if scope.batches:
            self._answers.append((fut, answer))
        else:
            fut.set_result(answer)

    def _hold(self, batches: list[Any]) -> None:
        if not batches:
            return
        self._batches.extend(b for b in batches if b not in self._batches)
        if self._scheduled is None:
            # At the end of this loop iteration: requests parsed in it join.
            self._scheduled = asyncio.get_running_loop().call_soon(self._commit)

    def _commit(self) -> None:
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
        batches, self._batches = self._batches, []
        answers, self._answers = self._answers, []
        try:
            clean = self.store.commit_if_clean(batches)
        except Exception as exc:
            self._release(answers, exc)
            return
        if clean:
            self._release(answers, None)
            return
        self._committing = True
        done = self._committer(lambda: self.store.commit_deferred(batches))
        done.add_done_callback(lambda f: self._committed(f, answers))
        # Hand the GIL over now: the committer needs it for the few lines
        # before SQLite takes over, and would otherwise wait for this thread's
        # next stretch of Python (up to the 5 ms switch interval) before its
        # fsync even starts.  The fsync itself then overlaps the loop's work.
        time.sleep(0)

    def _committed(
        self, done: asyncio.Future[None], answers: list[tuple[asyncio.Future[Any], Any]]
    ) -> None:
        self._committing = False
        queued, self._queued = self._queued, []
        for job, fut in queued:
            self._start(job, fut)
        if self._scheduled is not None:
            # The next group goes to the committer before anything else runs.
            self._commit()
        self._release(answers, _failure(done))

    def _release(
        self, answers: list[tuple[asyncio.Future[Any], Any]], error: BaseException | None
    ) -> None:
        if error is not None:
            log.error(
                "store lane: the commit for %d answer(s) failed, each gets a 500: %s",
                len(answers),
                safe(error),
            )
        for fut, answer in answers:
            if not fut.done():
                fut.set_result(answer if error is None else self._failed(error))
