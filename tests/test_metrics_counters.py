"""Issue 26: ``/metrics`` comes from counters the store keeps, never from reading the store.

At 30,000 claims a scrape used to read every allocation under the store's
lock on the event loop (2.3 s), and ``/health`` waited 8.7 s behind four
scrapers.  The counters (:mod:`dranet_cloud.ipam.node.pool_counts`) must agree with the
file after every kind of write, including a write that was rolled back and a
change made by another process.
"""

from __future__ import annotations

import ipaddress
import socket
import sqlite3
import statistics
import threading
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dranet_cloud.ipam import MemoryStore, Owner, SqliteStore
from dranet_cloud.ipam.node.rows import addr_key
from dranet_cloud.toolkit.errors import AddressConflict
from dranet_cloud.toolkit.iprange import IPRange, ip_range_from_cidr

from .test_server_attacks import health_once
from .test_server_cli import ServeProcess
from .waiting import wait_until

V4 = ip_range_from_cidr("10.6.0.0/24")
V6 = ip_range_from_cidr("fd00:6::/120")
LOW = IPRange(ipaddress.ip_address("10.6.0.1"), ipaddress.ip_address("10.6.0.127"))


def counted(store: SqliteStore | MemoryStore) -> tuple[dict[str, int], dict[IPRange, int]]:
    """What a full read of the store says the tally should hold."""
    pools: dict[str, int] = {}
    ranges = dict.fromkeys((V4, V6, LOW), 0)
    for alloc in store.list():
        pools[alloc.owner.pool] = pools.get(alloc.owner.pool, 0) + 1
        ip = ipaddress.ip_interface(alloc.address).ip
        for rng in ranges:
            if rng.version == ip.version and int(rng.start) <= int(ip) <= int(rng.end):
                ranges[rng] += 1
    return pools, ranges


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_the_tally_follows_every_kind_of_write(tmp_path: Path, kind: str) -> None:
    store = SqliteStore(tmp_path / "ipam.db") if kind == "sqlite" else MemoryStore()
    # The static address first: a random allocation before it could take it (1 in 254).
    store.reserve(Owner("static-pool", "mac:0d", "s"), ["10.6.0.200/24"])
    store.allocate(Owner("local-ipam", "mac:0c", "before-watch"), [V4, V6])
    store.watch_ranges([V4, V6, LOW])  # counts what was there before
    for i in range(6):
        store.allocate(Owner("local-ipam", "mac:0c", f"c{i}"), [V4, V6])
    with pytest.raises(AddressConflict):  # rolled back: counts nothing
        store.reserve(Owner("other", "mac:0e", "x"), ["10.6.0.200/24"])
    store.release(Owner("local-ipam", "mac:0c", "c1"))
    store.collect(live_claims=["before-watch", "c0", "c2", "c3", "s"])  # frees c4, c5
    pools, ranges = counted(store)
    assert store.tally.pools() == pools == {"local-ipam": 8, "static-pool": 1}
    assert store.tally.ranges() == ranges
    assert ranges[V4] == 5 and ranges[V6] == 4
    store.close()


def test_a_change_by_another_process_is_recounted(tmp_path: Path) -> None:
    db = tmp_path / "ipam.db"
    server_side = SqliteStore(db)
    server_side.watch_ranges([V4])
    server_side.allocate(Owner("local-ipam", "mac:0c", "a"), [V4])
    assert server_side.recount_if_changed() is False  # its own commits are counted already
    with SqliteStore(db) as by_hand:  # `dranet-cloud ipam ...` on the node
        by_hand.allocate(Owner("local-ipam", "mac:0c", "b"), [V4])
        by_hand.release(Owner("local-ipam", "mac:0c", "a"))
        by_hand.allocate(Owner("local-ipam", "mac:0c", "c"), [V4])
    assert server_side.tally.pools() == {"local-ipam": 1}  # stale until recounted
    assert server_side.recount_if_changed() is True
    assert server_side.tally.pools() == {"local-ipam": 2}
    assert server_side.tally.ranges() == {V4: 2}
    server_side.close()


def fill(db: Path, claims: int) -> None:
    """``claims`` allocations in 10.8.0.0/16, written straight into the file."""
    SqliteStore(db).close()  # the schema
    base = int(ipaddress.ip_address("10.8.0.1"))
    rows = [
        (4, addr_key(4, base + i), f"{ipaddress.ip_address(base + i)}/32", "local-ipam",
         "mac:0c:42:a1:00:00:11", f"claim-{i}", 0, time.time(), None, None, None)
        for i in range(claims)
    ]  # fmt: skip
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT INTO allocations (family, addr_key, address, pool, device, claim_uid, "
            "static, created_at, claim_namespace, claim_name, claim_pods) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


def scrape(sock: Path, stop: threading.Event, bodies: list[bytes]) -> None:
    """Scrape ``/metrics`` on one keep-alive connection until ``stop``."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)
        s.connect(str(sock))
        while not stop.is_set():
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                data += s.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            while len(body) < length:
                body += s.recv(65536)
            bodies.append(body)


def test_health_stays_fast_with_four_scrapers_at_30000_claims(tmp_path: Path) -> None:
    fill(tmp_path / "ipam.db", 30_000)
    server = ServeProcess(tmp_path, "--no-access-log", ranges=("10.8.0.0/16",))
    stop = threading.Event()
    bodies: list[bytes] = []
    scrapers = [
        threading.Thread(target=scrape, args=(server.sock, stop, bodies), daemon=True)
        for _ in range(4)
    ]
    try:
        for t in scrapers:
            t.start()
        wait_until(lambda: len(bodies) >= 8, "the scrapers' first answers")
        times = [health_once(server.sock) for _ in range(30)]
    finally:
        stop.set()
        for t in scrapers:
            t.join(30)
        assert server.terminate() == 0
    assert all(answer.startswith(b"HTTP/1.1 200") for _took, answer in times)
    median = statistics.median(took for took, _answer in times)
    assert median < 0.05, f"/health median {median * 1000:.1f} ms with four scrapers"
    families = {f.name: f for f in text_string_to_metric_families(bodies[-1].decode())}
    used = families["dranet_cloud_ipam_pool_used"].samples[0]
    assert used.labels == {"range": "10.8.0.1-10.8.255.254"} and used.value == 30_000
