"""The store lane's order of events, with the committer driven by hand.

The server tests show the lane's answers are durable under real load; these
pin down *when* things happen around a commit, which load alone cannot:
jobs that arrive during a commit wait for it without touching the store, and
when it ends they run and their group goes to the committer before the
previous group's answers are released.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from dranet_cloud.ipam import Owner, SqliteStore
from dranet_cloud.server.ipam_loop import StoreLane
from dranet_cloud.toolkit.errors import WouldBlock
from dranet_cloud.toolkit.iprange import ip_range_from_cidr

RANGE = ip_range_from_cidr("10.9.0.0/24")


class HandCommitter:
    """Records each commit handed over; the test ends them with :meth:`finish`."""

    def __init__(self) -> None:
        self.pending: list[tuple[Callable[[], None], asyncio.Future[None]]] = []
        self.handed = 0

    def __call__(self, commit: Callable[[], None]) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.pending.append((commit, fut))
        self.handed += 1
        return fut

    def finish(self) -> None:
        commit, fut = self.pending.pop(0)
        try:
            commit()
        except Exception as exc:
            fut.set_exception(exc)
        else:
            fut.set_result(None)


def committed_claims(db: Path) -> set[str]:
    """Claim UIDs another connection sees: what is durable."""
    with sqlite3.connect(db) as other:
        return {str(uid) for (uid,) in other.execute("SELECT claim_uid FROM allocations")}


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def make_lane(
    store: SqliteStore,
    committer: HandCommitter,
    fallback: Callable[[Callable[[], Any], float], Any],
) -> StoreLane:
    return StoreLane(
        store,
        fallback=fallback,
        committer=committer,
        failed=lambda exc: f"failed: {exc}",
    )


async def no_fallback(job: Callable[[], Any], arrival: float) -> Any:
    raise AssertionError("no job should reach the worker pool here")


def test_jobs_that_arrive_during_a_commit_form_the_next_group(tmp_path: Path) -> None:
    db = tmp_path / "ipam.db"
    store = SqliteStore(db)
    committer = HandCommitter()
    ran: list[str] = []

    def job(uid: str) -> Callable[[], list[str]]:
        def allocate() -> list[str]:
            ran.append(uid)
            return store.allocate(Owner("pool", "mac:aa", uid), [RANGE])

        return allocate

    async def scenario() -> None:
        lane = make_lane(store, committer, no_fallback)
        first = asyncio.ensure_future(lane.run(job("a")))
        await settle()
        assert ran == ["a"] and committer.handed == 1 and not first.done()
        assert committed_claims(db) == set()  # written, not yet durable

        later = [asyncio.ensure_future(lane.run(job(uid))) for uid in ("b", "c")]
        await settle()
        assert ran == ["a"]  # they wait for the commit without touching the store

        committer.finish()
        await asyncio.sleep(0)  # one loop iteration: the callback that sees the end runs
        # In that callback, not iterations later: b and c ran and their group went
        # to the committer, so the store is not left idle while answers are sent.
        assert ran == ["a", "b", "c"] and committer.handed == 2
        await settle()
        assert first.done() and len(first.result()) == 1
        assert committed_claims(db) == {"a"}
        assert not any(t.done() for t in later)  # their commit has not ended

        committer.finish()
        await settle()
        answers = [t.result()[0] for t in later]
        assert committed_claims(db) == {"a", "b", "c"}
        assert len({first.result()[0], *answers}) == 3
        assert lane.ran_inline == 3 and lane.sent_to_pool == 0

    try:
        asyncio.run(scenario())
    finally:
        store.close()


def test_a_queued_job_that_fails_or_would_block_leaves_its_group_alone(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ipam.db"
    store = SqliteStore(db)
    committer = HandCommitter()
    pooled: list[str] = []

    async def fallback(job: Callable[[], Any], arrival: float) -> Any:
        pooled.append("ran on a worker")
        return "from the pool"

    def allocate(uid: str) -> Callable[[], list[str]]:
        return lambda: store.allocate(Owner("pool", "mac:aa", uid), [RANGE])

    def broken() -> list[str]:
        raise ValueError("a bug in a plugin")

    def blocked() -> list[str]:
        raise WouldBlock("the store is held by another thread (injected)")

    async def scenario() -> None:
        lane = make_lane(store, committer, fallback)
        first = asyncio.ensure_future(lane.run(allocate("a")))
        await settle()
        queued = [asyncio.ensure_future(lane.run(j)) for j in (broken, allocate("b"), blocked)]
        await settle()
        committer.finish()
        await settle()
        assert first.result()
        with pytest.raises(ValueError, match="a bug in a plugin"):
            queued[0].result()
        assert cast(Any, queued[2].result()) == "from the pool" and pooled == ["ran on a worker"]
        assert not queued[1].done()  # b's commit is still under way
        committer.finish()
        await settle()
        assert queued[1].result() and committed_claims(db) == {"a", "b"}
        assert lane.sent_to_pool == 1

    try:
        asyncio.run(scenario())
    finally:
        store.close()


def test_a_would_block_that_plugin_code_swallows_still_sends_the_request_to_the_pool(
    tmp_path: Path,
) -> None:
    """WouldBlock is an ordinary exception, so a plugin's ``except Exception``
    catches it; the lane reads the signal from the deferred-writes scope, so
    the plugin's stand-in answer is never the request's answer."""
    store = SqliteStore(tmp_path / "ipam.db")
    caught: list[str] = []

    async def fallback(job: Callable[[], Any], arrival: float) -> Any:
        return "from the pool"

    def careless_plugin() -> Any:
        try:
            return store.allocate(Owner("pool", "mac:aa", "a"), [RANGE])
        except Exception as exc:  # the accident: every error becomes an answer
            caught.append(type(exc).__name__)
            return "a made-up answer"

    async def scenario() -> None:
        lane = make_lane(store, HandCommitter(), fallback)
        assert store._lock.acquire(blocking=False)  # another thread's write, as it were
        try:
            answer = await lane.run(careless_plugin)
        finally:
            store._lock.release()
        assert caught == ["WouldBlock"]
        assert answer == "from the pool"
        assert lane.sent_to_pool == 1 and lane.ran_inline == 0

    try:
        asyncio.run(scenario())
    finally:
        store.close()


def test_a_failed_commit_fails_its_group_and_the_next_group_still_lands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "ipam.db"
    store = SqliteStore(db)
    committer = HandCommitter()
    real = store._commit_batch
    failing = [True]

    def commit_batch(conn: sqlite3.Connection) -> None:
        if not failing.pop(0):
            real(conn)
            return
        batch, store._batch = store._batch, None  # what a failed COMMIT leaves behind
        conn.execute("ROLLBACK")
        assert batch is not None
        batch.error = OSError("disk I/O error (injected)")
        batch.done.set()

    monkeypatch.setattr(store, "_commit_batch", commit_batch)
    failing.append(False)

    def allocate(uid: str) -> Callable[[], list[str]]:
        return lambda: store.allocate(Owner("pool", "mac:aa", uid), [RANGE])

    async def scenario() -> None:
        lane = make_lane(store, committer, no_fallback)
        first = asyncio.ensure_future(lane.run(allocate("a")))
        await settle()
        second = asyncio.ensure_future(lane.run(allocate("b")))
        await settle()
        committer.finish()  # a's group fails; b runs now, in a group of its own
        await settle()
        assert cast(Any, first.result()) == "failed: disk I/O error (injected)"
        assert not second.done()
        committer.finish()
        await settle()
        assert second.result() and committed_claims(db) == {"b"}

    try:
        asyncio.run(scenario())
    finally:
        store.close()


def test_a_commit_that_hangs_answers_late_before_the_deadline(tmp_path: Path) -> None:
    """A stalled disk: the answer is ``late`` at arrival + budget, not after the commit."""
    db = tmp_path / "ipam.db"
    store = SqliteStore(db)
    committer = HandCommitter()

    def allocate(uid: str) -> Callable[[], list[str]]:
        return lambda: store.allocate(Owner("pool", "mac:aa", uid), [RANGE])

    async def scenario() -> None:
        lane = StoreLane(
            store,
            fallback=no_fallback,
            committer=committer,
            failed=lambda exc: f"failed: {exc}",
            late=lambda: "late",
            budget=0.2,
        )
        first = asyncio.ensure_future(lane.run(allocate("a"), time.perf_counter()))
        await settle()
        queued = asyncio.ensure_future(lane.run(allocate("b"), time.perf_counter()))
        await asyncio.sleep(0.4)  # the commit never ends
        assert cast(Any, first.result()) == "late" and cast(Any, queued.result()) == "late"
        committer.finish()  # the disk comes back: a is durable, b never ran
        await settle()
        assert committed_claims(db) == {"a"} and committer.handed == 1
        # The kubelet retries: the same address, now durable.
        again = asyncio.ensure_future(lane.run(allocate("a"), time.perf_counter()))
        await settle()
        assert again.result() == store.held(Owner("pool", "mac:aa", "a"))[0].address.split()

    try:
        asyncio.run(scenario())
    finally:
        store.close()
