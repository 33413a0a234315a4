"""IPAM benchmark: allocation rate and per-allocation cost as the pool fills.

Prints:

1. allocations per second of the SQLite store with durability on
   (WAL, ``synchronous=FULL``: every allocation is fsynced before it returns);
2. the cost of one allocation with 100 and with 10,000 existing allocations in
   the pool, with durability on and off (off isolates the search and SQL work
   from the fsync), and the ratio between the two fills;
3. 8 processes x 500 allocations against one file: rate, distinct addresses,
   and whether a second call returns every owner's original addresses.

Run: ``python benchmarks/ipam.py [--quick]``.  Figures, not assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dranet_cloud.ipam import Owner, SqliteStore
from dranet_cloud.ipam.node.sqlite import Synchronous
from dranet_cloud.toolkit.iprange import IPRange, ip_range_from_cidr

V4 = ip_range_from_cidr("10.0.0.0/16")
V6 = ip_range_from_cidr("2001:db8::/64")
DENSE_V4 = ip_range_from_cidr("10.64.0.0/18")  # 16382 addresses: 10,000 fills 61 %
REPO = Path(__file__).resolve().parents[1]
FILLS = (100, 10_000)


def fill(path: Path, count: int, ranges: list[IPRange]) -> None:
    """Create a store with ``count`` allocations (fsync off: setup only)."""
    with SqliteStore(path, synchronous="OFF") as store:
        for i in range(count):
            store.allocate(Owner("fill", "eth1", f"fill-{i}"), ranges)


def interleaved_costs(
    paths: list[Path], synchronous: Synchronous, ranges: list[IPRange], samples: int
) -> list[list[float]]:
    """Seconds per allocate() of a new owner in each store, measured in turns.

    Taking turns between the stores spreads background noise (other
    processes, disk flushes) evenly over the fill levels being compared.
    Each probe owner is released afterwards, untimed, so every pool stays at
    its fill level throughout.
    """
    stores = [SqliteStore(p, synchronous=synchronous) for p in paths]
    costs: list[list[float]] = [[] for _ in stores]
    try:
        for i in range(samples):
            who = Owner("bench", "eth1", f"probe-{i}")
            for store, out in zip(stores, costs, strict=True):
                t0 = time.perf_counter()
                store.allocate(who, ranges)
                out.append(time.perf_counter() - t0)
                store.release(who)
    finally:
        for store in stores:
            store.close()
    return costs


def rate(path: Path, count: int) -> float:
    with SqliteStore(path, synchronous="FULL") as store:
        t0 = time.perf_counter()
        for i in range(count):
            store.allocate(Owner("rate", "eth1", f"claim-{i}"), [V4, V6])
        return count / (time.perf_counter() - t0)


WORKER = """
import json, sys, time
from dranet_cloud.ipam import Owner, SqliteStore
from dranet_cloud.toolkit.iprange import ip_range_from_cidr
path, worker, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
v4, v6 = ip_range_from_cidr("10.0.0.0/16"), ip_range_from_cidr("2001:db8::/64")
store = SqliteStore(path)
print("ready", flush=True)
sys.stdin.readline()
got = {f"claim-{i}": store.allocate(Owner("pool", worker, f"claim-{i}"), [v4, v6])
       for i in range(count)}
print(json.dumps(got), flush=True)
"""


def processes(path: Path, workers: int, per_worker: int) -> None:
    SqliteStore(path).close()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(path), f"w{n}", str(per_worker)],
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        for n in range(workers)
    ]
    for p in procs:
        assert p.stdout is not None
        if p.stdout.readline().strip() != "ready":
            raise SystemExit("worker failed to start")
    t0 = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.close()
    results: dict[Owner, list[str]] = {}
    for n, p in enumerate(procs):
        assert p.stdout is not None
        out = p.stdout.read()
        if p.wait() != 0:
            raise SystemExit(f"worker {n} failed")
        for claim, got in json.loads(out).items():
            results[Owner("pool", f"w{n}", claim)] = got
    elapsed = time.perf_counter() - t0
    total = workers * per_worker
    v4 = {got[0] for got in results.values()}
    v6 = {got[1] for got in results.values()}
    with SqliteStore(path) as store:
        same = sum(store.allocate(o, [V4, V6]) == got for o, got in results.items())
        rows = len(store.list())
    print(
        f"  {workers} processes x {per_worker} dual-stack allocations: {elapsed:.2f} s, "
        f"{total / elapsed:,.0f} allocations/s"
    )
    print(
        f"  distinct IPv4 {len(v4)}/{total}, distinct IPv6 {len(v6)}/{total}, "
        f"rows {rows} (expected {2 * total})"
    )
    print(f"  second call returned the original addresses for {same}/{total} owners")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--dir", help="where to put the databases (default: a temp dir)")
    args = parser.parse_args()
    samples = 200 if args.quick else 1000
    workdir = Path(args.dir or tempfile.mkdtemp(prefix="ipam-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"sqlite {__import__('sqlite3').sqlite_version}, databases in {workdir}")

    print("\n1. allocation rate, SQLite WAL synchronous=FULL (durability on), dual-stack")
    per_sec = rate(workdir / "rate.db", samples)
    print(f"  {samples} allocations: {per_sec:,.0f} allocations/s ({1e3 / per_sec:.3f} ms each)")

    print(
        "\n2. cost of one dual-stack allocation vs existing allocations "
        f"(median/mean over {samples}, measured in turns, IPv4 {V4}, IPv6 {V6})"
    )
    for label, ranges in (("/16 + /64", [V4, V6]), ("dense /18 (IPv4 only)", [DENSE_V4])):
        tag = "dense" if "dense" in label else "sparse"
        paths = [workdir / f"fill-{n}-{tag}.db" for n in FILLS]
        for path, n in zip(paths, FILLS, strict=True):
            fill(path, n, ranges)
        for sync in ("FULL", "OFF"):
            per_fill = interleaved_costs(paths, sync, ranges, samples)
            medians = [statistics.median(c) for c in per_fill]
            means = [statistics.fmean(c) for c in per_fill]
            for n, mean, median in zip(FILLS, means, medians, strict=True):
                print(
                    f"  {label:22s} {n:>6,} existing, synchronous={sync:4s}: "
                    f"median {median * 1e3:.3f} ms, mean {mean * 1e3:.3f} ms"
                )
            print(
                f"  {label:22s} 10,000 vs 100 (synchronous={sync}): "
                f"median {medians[1] / medians[0]:.2f}x, mean {means[1] / means[0]:.2f}x"
            )

    print("\n3. concurrent processes on one file (synchronous=FULL)")
    processes(workdir / "procs.db", 8, 500)


if __name__ == "__main__":
    main()
