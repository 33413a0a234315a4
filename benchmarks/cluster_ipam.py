"""Cluster-scope IPAM benchmark: many nodes, one range, the Kubernetes API as the only referee.

N simulated nodes (threads of this process, each with its own SQLite journal
and its own API client) allocate and then release M claims in total against
the Kubernetes API emulator running in *another* process (``dranet-cloud
emulate kubernetes --latency S``), so the emulator's CPU is not this
process's GIL.  Each claim exists in the emulator as a ResourceClaim and its
address as an IPAddress object naming it.  Prints:

* claims per second cluster-wide (allocation, release, both);
* API calls and API writes (creates and deletes) per allocation;
* p50/p99 latency of one allocation and of one release;
* duplicate addresses (two live claims with one address) and leaked objects
  (IPAddress objects of this project left after every release): both must be 0;
* one leak-reclaiming sweep between the phases: every 10th claim is missing
  from the API (deleted, its release lost), so exactly their objects must go.

Run (inside ``unshare -n`` like every manual run):
``python benchmarks/cluster_ipam.py [--nodes 100] [--claims 5000] [--latency 0.002]``.
Figures, not assertions; the exit code is 1 when a duplicate or a leak was seen.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

from dranet_cloud.claims import ClaimReference
from dranet_cloud.ipam.base import Owner
from dranet_cloud.ipam.cluster import MANAGED_BY, MANAGED_BY_LABEL, ClusterIpam, open_cluster_ipam
from dranet_cloud.ipam.reclaim import KubernetesClaims
from dranet_cloud.iprange import IPRange
from dranet_cloud.kube import KubeClient

POOL = "local-ipam"
NAMESPACE = "bench"


def range_for(claims: int, fill: float) -> IPRange:
    """The smallest IPv4 CIDR (network and broadcast excluded) ``claims`` fill at most ``fill``."""
    prefix = 32 - math.ceil(math.log2(claims / fill + 2))
    return IPRange.parse(f"10.64.0.0/{prefix}")


def claims_fixture(path: Path, count: int, nodes: int, gone_every: int) -> list[ClaimReference]:
    """Every claim; every ``gone_every``-th one is left out of the emulator (deleted
    while its pod ran, release lost): leak reclaiming must delete its object."""
    items = []
    refs = []
    for i in range(count):
        if gone_every and i % gone_every == gone_every - 1:
            refs.append(
                ClaimReference(
                    uid=f"00000000-0000-4000-8000-{i:012d}", namespace=NAMESPACE, name=f"claim-{i}"
                )
            )
            continue
        uid = f"00000000-0000-4000-8000-{i:012d}"
        name = f"claim-{i}"
        items.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"namespace": NAMESPACE, "name": name, "uid": uid},
                "status": {
                    "allocation": {
                        "devices": {
                            "results": [
                                {
                                    "request": "nic",
                                    "driver": "dra.net",
                                    "pool": f"node-{i % nodes}",
                                    "device": "eth1",
                                }
                            ]
                        }
                    }
                },
            }
        )
        refs.append(ClaimReference(uid=uid, namespace=NAMESPACE, name=name))
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return refs


class Emulator:
    """``dranet-cloud emulate kubernetes`` in a child process."""

    def __init__(self, fixture: Path, latency: float) -> None:
        argv = [
            sys.executable,
            "-m",
            "dranet_cloud.cli.main",
            "emulate",
            "kubernetes",
            "--fixture",
            str(fixture),
            "--latency",
            repr(latency),
        ]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the emulator did not start (exit {self.proc.wait()})")
        self.kubeconfig: str = json.loads(line)["env"]["KUBECONFIG"]

    def cpu_seconds(self) -> float:
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            return float("nan")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


PROFILES: list[Any] = []  # one cProfile per node thread with --profile


def run_nodes(
    nodes: list[ClusterIpam],
    work: list[list[tuple[Owner, ClaimReference]]],
    job: Any,
    profile: bool = False,
) -> tuple[float, list[float], list[str]]:
    """Run ``job(ipam, owner, claim)`` for every node's claims, one thread per node."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(len(nodes) + 1)

    def node_loop(ipam: ClusterIpam, mine: list[tuple[Owner, ClaimReference]]) -> None:
        if profile:
            import cProfile

            prof = cProfile.Profile(time.thread_time)  # CPU time: threads wait a lot
            with lock:
                PROFILES.append(prof)
            prof.enable()
        own: list[float] = []
        start.wait()
        for owner, claim in mine:
            t0 = time.perf_counter()
            try:
                job(ipam, owner, claim)
            except Exception as exc:  # a figure, not a crash: counted and shown
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
            own.append(time.perf_counter() - t0)
        if profile:
            prof.disable()
        with lock:
            latencies.extend(own)

    threads = [
        threading.Thread(target=node_loop, args=(ipam, mine), daemon=True)
        for ipam, mine in zip(nodes, work, strict=True)
    ]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - began, latencies, errors


def total_calls(nodes: list[ClusterIpam]) -> Counter[str]:
    out: Counter[str] = Counter()
    for ipam in nodes:
        out.update(ipam.calls)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--claims", type=int, default=5000)
    parser.add_argument("--latency", type=float, default=0.002, help="seconds per API call")
    parser.add_argument("--range", default=None, help="CIDR (default: the claims fill <= 80%%)")
    parser.add_argument(
        "--synchronous",
        default="FULL",
        choices=("OFF", "NORMAL", "FULL"),
        help="the journals' SQLite synchronous mode (default FULL, as serve runs)",
    )
    parser.add_argument("--dir", default=None, help="where the journals go (default: a temp dir)")
    parser.add_argument(
        "--gone-every",
        type=int,
        default=10,
        help="every Nth claim is missing from the API when leak reclaiming runs between the "
        "phases (default 10; 0: none)",
    )
    parser.add_argument("--profile", default=None, help="write a cProfile of this process here")
    args = parser.parse_args()

    rng = IPRange.parse(args.range) if args.range else range_for(args.claims, 0.8)
    with tempfile.TemporaryDirectory(prefix="cluster-ipam-", dir=args.dir) as tmp:
        work_dir = Path(tmp)
        refs = claims_fixture(work_dir / "claims.json", args.claims, args.nodes, args.gone_every)
        emu = Emulator(work_dir / "claims.json", args.latency)
        try:
            return bench(args, rng, refs, emu, work_dir)
        finally:
            emu.stop()


def bench(
    args: argparse.Namespace,
    rng: IPRange,
    refs: list[ClaimReference],
    emu: Emulator,
    work_dir: Path,
) -> int:
    nodes = []
    for n in range(args.nodes):
        ipam = open_cluster_ipam(
            str(work_dir / f"node-{n}.db"), node=f"node-{n}", kubeconfig=emu.kubeconfig
        )
        ipam.journal.synchronous = args.synchronous
        ipam.journal._connection().execute(f"PRAGMA synchronous = {args.synchronous}")
        nodes.append(ipam)
    work: list[list[tuple[Owner, ClaimReference]]] = [[] for _ in nodes]
    for i, ref in enumerate(refs):
        owner = Owner(
            POOL, f"mac:0c:42:a1:{i >> 16 & 255:02x}:{i >> 8 & 255:02x}:{i & 255:02x}", ref.uid
        )
        work[i % len(nodes)].append((owner, ref))
    answers: dict[str, list[str]] = {}
    answers_lock = threading.Lock()

    def allocate(ipam: ClusterIpam, owner: Owner, claim: ClaimReference) -> None:
        got = ipam.allocate(owner, [rng], claim=claim)
        with answers_lock:
            answers[claim.uid] = got

    def release(ipam: ClusterIpam, owner: Owner, claim: ClaimReference) -> None:
        ipam.release(owner)

    cpu0, emu_cpu0 = time.process_time(), emu.cpu_seconds()
    alloc_time, alloc_lat, alloc_err = run_nodes(nodes, work, allocate, bool(args.profile))
    cpu1, emu_cpu1 = time.process_time(), emu.cpu_seconds()
    alloc_calls = total_calls(nodes)

    # Every live claim's address must be distinct and backed by its own object.
    by_address = Counter(a for got in answers.values() for a in got)
    duplicates = sum(n - 1 for n in by_address.values() if n > 1)
    with KubeClient(emu.kubeconfig, timeout=60) as client:
        objects = client.list_ip_addresses(f"{MANAGED_BY_LABEL}={MANAGED_BY}")
        owners = {o.name: o.annotations.get("dranet-cloud.dra.net/claim-uid") for o in objects}
        unbacked = sum(
            1
            for uid, got in answers.items()
            for a in got
            if owners.get(str(ipaddress.ip_interface(a).ip)) != uid
        )
        fill = len(objects) / rng.size

        # Leak reclaiming, from one node, between the phases: the objects of the
        # claims missing from the API go (whichever node made them), no other.
        t0 = time.perf_counter()
        swept = nodes[0].cluster_reclaim(KubernetesClaims(client), grace=timedelta(0)).sweep
        gc_time = time.perf_counter() - t0
        gone = {
            r.uid
            for i, r in enumerate(refs)
            if args.gone_every and i % args.gone_every == args.gone_every - 1
        }
        wrongly_swept = sum(1 for name in swept.deleted if owners.get(name) not in gone)

        before_release = total_calls(nodes)
        release_time, release_lat, release_err = run_nodes(nodes, work, release)
        release_calls = total_calls(nodes) - before_release
        left = client.list_ip_addresses(f"{MANAGED_BY_LABEL}={MANAGED_BY}")
    if PROFILES:
        import pstats

        stats = pstats.Stats(PROFILES[0])
        for prof in PROFILES[1:]:
            stats.add(prof)
        stats.dump_stats(args.profile)
    journal_left = sum(len(ipam.list()) for ipam in nodes)
    for ipam in nodes:
        ipam.close()

    m = len(refs)
    writes = alloc_calls["create"] + alloc_calls["delete"]
    print(
        f"cluster_ipam: {len(nodes)} nodes, {m} claims, range {rng} ({rng.size} addresses, "
        f"{fill:.0%} full at the peak), {args.latency * 1000:g} ms per API call, "
        f"journals synchronous={args.synchronous}"
    )
    print(
        f"  allocate: {m / alloc_time:7.1f} claims/s ({alloc_time:.2f} s), latency p50 "
        f"{statistics.median(alloc_lat) * 1000:.1f} ms "
        f"p99 {percentile(alloc_lat, 0.99) * 1000:.1f} ms"
    )
    print(
        f"  release:  {m / release_time:7.1f} claims/s ({release_time:.2f} s), latency p50 "
        f"{statistics.median(release_lat) * 1000:.1f} ms "
        f"p99 {percentile(release_lat, 0.99) * 1000:.1f} ms"
    )
    print(f"  both:     {m / (alloc_time + release_time):7.1f} claims/s allocated and released")
    print(
        f"  API per allocation: {sum(alloc_calls.values()) / m:.3f} calls, {writes / m:.3f} writes "
        f"({dict(alloc_calls)}); per release: {sum(release_calls.values()) / m:.3f} calls "
        f"({dict(release_calls)})"
    )
    print(
        f"  leak reclaiming (one node's sweep): deleted {len(swept.deleted)} of "
        f"{swept.checked} objects ({len(gone)} claims gone, {wrongly_swept} live claims' "
        f"objects deleted) in {gc_time:.2f} s"
    )
    print(
        f"  CPU during allocation: this process {cpu1 - cpu0:.1f} s, emulator "
        f"{emu_cpu1 - emu_cpu0:.1f} s"
    )
    print(
        f"  duplicates: {duplicates}, addresses without their claim's object: {unbacked}, "
        f"leaked objects after release: {len(left)}, journal rows left: {journal_left}, "
        f"errors: {len(alloc_err)} allocating, {len(release_err)} releasing"
    )
    for err in (alloc_err + release_err)[:5]:
        print(f"    {err[:300]}")
    bad = (
        duplicates
        or unbacked
        or left
        or journal_left
        or alloc_err
        or release_err
        or wrongly_swept
        or len(swept.deleted) != len(gone)
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
