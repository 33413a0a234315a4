"""Issue 26: a burst waits for a worker in order, but never past DRANET's 10 s timeout.

Before, more than 32 requests in progress got an instant 503 (68% of a burst
of 64 claims), while a request behind a slow webhook could wait 20 s for a
worker.  Now a request waits for a worker only until ``arrival + budget -
recent job time``; then, or at once when that is already past, it gets a 503
with ``Retry-After``.  Claims the store lane serves need no worker at all.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from dranet_cloud.server.admission import Admission

from .test_server_bounds import SlowProfile, claim, client, make_host, serve
from .waiting import wait_until


def test_waiters_get_slots_in_arrival_order_until_their_deadline() -> None:
    async def scenario() -> None:
        gate = Admission(1, budget=0.5)
        now = time.perf_counter()
        assert await gate.acquire(now) is None  # the one slot
        order: list[str] = []

        async def wait(name: str) -> None:
            refused = await gate.acquire(time.perf_counter())
            order.append(name if refused is None else f"{name}: 503")
            if refused is None:
                gate.release(0.01)

        waiters = [asyncio.ensure_future(wait(n)) for n in ("a", "b", "c")]
        await asyncio.sleep(0.05)
        gate.release(0.05)  # a, then b and c in turn
        await asyncio.gather(*waiters)
        assert order == ["a", "b", "c"]
        assert gate.busy == 0 and gate.waiting == 0

        assert await gate.acquire(time.perf_counter()) is None
        late = time.perf_counter()
        refused = await gate.acquire(late)  # nobody releases: refused at its deadline
        waited = time.perf_counter() - late
        assert refused is not None and "no worker became free" in refused
        assert 0.3 < waited < 2.0, waited
        assert gate.waiting == 0

        gate.expected = 0.6  # recent jobs alone overrun the budget: refused at once
        start = time.perf_counter()
        refused = await gate.acquire(start)
        assert refused is not None and "cannot be answered within" in refused
        assert time.perf_counter() - start < 0.1
        assert gate.turned_away == 2

    asyncio.run(scenario())


def test_a_slow_plugin_gets_a_503_with_retry_after_in_time_and_claims_go_on(
    tmp_path: Path,
) -> None:
    slow = SlowProfile()
    host = make_host(tmp_path, extra=slow)
    server = serve(host, tmp_path)
    server.app.admission.budget = 1.0
    try:
        with ThreadPoolExecutor(12) as pool:

            def call(uid: str, profile: str) -> tuple[httpx.Response, float]:
                with client(server) as c:
                    start = time.monotonic()
                    r = c.post("/GetProfileConfig", json=claim(uid, profile))
                    return r, time.monotonic() - start

            busy = [pool.submit(call, f"slow-{i}", "slow") for i in range(8)]
            for _ in range(8):  # every worker is inside the slow plugin
                assert slow.entered.acquire(timeout=30)
            waiting = [pool.submit(call, f"late-{i}", "slow") for i in range(3)]
            wait_until(lambda: server.app.admission.waiting == 3, "three waiting requests")
            # local-ipam needs no worker: answered while all eight are taken.
            with client(server) as c:
                assert c.post("/GetProfileConfig", json=claim("ipam-1")).status_code == 200
            for fut in waiting:
                r, took = fut.result(30)
                assert r.status_code == 503, r.text
                assert r.headers["retry-after"] == "1"
                assert "no worker became free" in r.text
                assert 0.8 < took < 5.0, took
            slow.release.set()
            assert [f.result(30)[0].status_code for f in busy] == [200] * 8
    finally:
        slow.release.set()
        server.stop()
        host.close()
