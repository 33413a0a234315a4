"""Cluster-scope IPAM benchmark: many nodes, one range, the Kubernetes API as the only referee.

N simulated nodes (each with its own SQLite journal and its own API client)
allocate and then release M claims in total against the Kubernetes API
emulator running in *another* process (``dranet-cloud emulate kubernetes
--latency S``).  The nodes are spread over K worker processes (``--processes``,
default: one per usable core), threads within each, because 100 processes do
not fit two cores and one process's GIL was the bottleneck, not the API.  Each
phase (allocate all, then release all) starts in every worker at one barrier
and is timed cluster-wide, from that start to the last node's end.  Each claim
exists in the emulator as a ResourceClaim and its address as an IPAddress
object naming it.  Prints:

* claims per second cluster-wide (allocation, release, both);
* API calls and API writes (creates and deletes) per allocation;
* p50/p99 latency of one allocation and of one release;
* duplicate addresses (two live claims with one address, across all nodes of
  all processes) and leaked objects (IPAddress objects of this project left
  after every release): both must be 0;
* one leak-reclaiming sweep between the phases: every 10th claim is missing
  from the API (deleted, its release lost), so exactly their objects must go.

Run (inside ``unshare -n`` like every manual run):
``python benchmarks/cluster_ipam.py [--nodes 100] [--claims 5000] [--latency 0.002]
[--processes K]``.
Figures, not assertions; the exit code is 1 when a duplicate or a leak was seen.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import math
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from dranet_cloud.claims import ClaimReference
from dranet_cloud.ipam.base import Owner
from dranet_cloud.ipam.cluster import ClusterIpam, open_cluster_ipam
from dranet_cloud.ipam.cluster_api import MANAGED_BY, MANAGED_BY_LABEL
from dranet_cloud.ipam.reclaim import KubernetesClaims
from dranet_cloud.iprange import IPRange
from dranet_cloud.kube import KubeClient

POOL = "local-ipam"
NAMESPACE = "bench"
PHASE_TIMEOUT = 900.0  # seconds any one step between parent and workers may take


def range_for(claims: int, fill: float) -> IPRange:
    """The smallest IPv4 CIDR (network and broadcast excluded) ``claims`` fill at most ``fill``."""
    prefix = 32 - math.ceil(math.log2(claims / fill + 2))
    return IPRange.parse(f"10.64.0.0/{prefix}")


def bench_range(args: argparse.Namespace) -> IPRange:
    return IPRange.parse(args.range) if args.range else range_for(args.claims, 0.8)


def claim_ref(i: int) -> ClaimReference:
    return ClaimReference(
        uid=f"00000000-0000-4000-8000-{i:012d}", namespace=NAMESPACE, name=f"claim-{i}"
    )


def is_gone(i: int, gone_every: int) -> bool:
    """Whether claim ``i`` is left out of the emulator (deleted while its pod ran,
    release lost): leak reclaiming must delete its object."""
    return bool(gone_every) and i % gone_every == gone_every - 1


def claims_fixture(path: Path, count: int, nodes: int, gone_every: int) -> list[ClaimReference]:
    """Every claim; the gone ones (:func:`is_gone`) are left out of the fixture."""
    items = []
    refs = []
    for i in range(count):
        ref = claim_ref(i)
        refs.append(ref)
        if is_gone(i, gone_every):
            continue
        items.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"namespace": NAMESPACE, "name": ref.name, "uid": ref.uid},
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
        return process_cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` (all its threads) so far, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


# -- one worker process: its share of the nodes, one thread each ---------------------------------


@dataclass
class PhaseResult:
    """What one worker sends back after a phase; every field pickles."""

    began: float  # time.monotonic(): CLOCK_MONOTONIC, one clock for every process on Linux
    ended: float
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)  # API calls during the phase
    answers: dict[str, list[str]] = field(default_factory=dict)  # claim UID -> addresses
    journal_rows: int = 0  # rows left in this worker's journals after the phase


PROFILES: list[Any] = []  # one cProfile per node thread with --profile


def run_nodes(
    nodes: list[ClusterIpam],
    work: list[list[tuple[Owner, ClaimReference]]],
    job: Callable[[ClusterIpam, Owner, ClaimReference], None],
    start: Callable[[], None],
    profile: bool = False,
) -> PhaseResult:
    """Run ``job(ipam, owner, claim)`` for every node's claims, one thread per node.

    Every thread is started and waiting before ``start()`` (the cluster-wide
    barrier) is called, so the phase's clock starts with no thread start-up in it.
    """
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    go = threading.Barrier(len(nodes) + 1)

    def node_loop(ipam: ClusterIpam, mine: list[tuple[Owner, ClaimReference]]) -> None:
        if profile:
            import cProfile

            prof = cProfile.Profile(time.thread_time)  # CPU time: threads wait a lot
            with lock:
                PROFILES.append(prof)
            prof.enable()
        own: list[float] = []
        go.wait()
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
    before = total_calls(nodes)
    start()
    began = time.monotonic()
    go.wait()
    for t in threads:
        t.join()
    return PhaseResult(began, time.monotonic(), latencies, errors, total_calls(nodes) - before)


def total_calls(nodes: list[ClusterIpam]) -> Counter[str]:
    out: Counter[str] = Counter()
    for ipam in nodes:
        out.update(ipam.calls)
    return out


def node_work(
    args: argparse.Namespace, node: int, count: int
) -> list[tuple[Owner, ClaimReference]]:
    """Node ``node``'s claims: every ``args.nodes``-th one, from ``node`` on."""
    out = []
    for i in range(node, count, args.nodes):
        ref = claim_ref(i)
        owner = Owner(
            POOL, f"mac:0c:42:a1:{i >> 16 & 255:02x}:{i >> 8 & 255:02x}:{i & 255:02x}", ref.uid
        )
        out.append((owner, ref))
    return out


def worker(
    index: int,
    args: argparse.Namespace,
    kubeconfig: str,
    work_dir: str,
    barrier: Barrier,
    conn: Connection,
) -> None:
    """Nodes ``index``, ``index + K``, ...: allocate at the first barrier, report,
    sweep when told to (worker 0 holds node 0), release at the second barrier, report."""
    rng = bench_range(args)
    ids = list(range(index, args.nodes, args.processes))
    nodes = []
    for n in ids:
        ipam = open_cluster_ipam(
            str(Path(work_dir) / f"node-{n}.db"), node=f"node-{n}", kubeconfig=kubeconfig
        )
        ipam.journal.synchronous = args.synchronous
        ipam.journal._connection().execute(f"PRAGMA synchronous = {args.synchronous}")
        nodes.append(ipam)
    work = [node_work(args, n, args.claims) for n in ids]
    answers: dict[str, list[str]] = {}
    answers_lock = threading.Lock()

    def allocate(ipam: ClusterIpam, owner: Owner, claim: ClaimReference) -> None:
        got = ipam.allocate(owner, [rng], claim=claim)
        with answers_lock:
            answers[claim.uid] = got

    def release(ipam: ClusterIpam, owner: Owner, claim: ClaimReference) -> None:
        ipam.release(owner)

    def start() -> None:
        barrier.wait(PHASE_TIMEOUT)

    try:
        conn.send("ready")
        cpu0 = time.process_time()
        done = run_nodes(nodes, work, allocate, start, bool(args.profile))
        done.answers = answers
        conn.send((done, time.process_time() - cpu0))
        command = conn.recv()
        if command == "sweep":  # leak reclaiming from one node, between the phases
            with KubeClient(kubeconfig, timeout=60) as client:
                t0 = time.perf_counter()
                swept = nodes[0].cluster_reclaim(KubernetesClaims(client), grace=timedelta(0)).sweep
                conn.send((list(swept.deleted), swept.checked, time.perf_counter() - t0))
            command = conn.recv()
        assert command == "release", command
        done = run_nodes(nodes, work, release, start)
        done.journal_rows = sum(len(ipam.list()) for ipam in nodes)
        conn.send(done)
        if PROFILES:
            import pstats

            stats = pstats.Stats(PROFILES[0])
            for prof in PROFILES[1:]:
                stats.add(prof)
            stats.dump_stats(f"{args.profile}.{index}")
    finally:
        for ipam in nodes:
            ipam.close()
        conn.close()


# -- the parent: fixture, emulator, workers, checks, figures ---------------------------------------


class Workers:
    """K worker processes, a pipe to each and the barrier every phase starts at."""

    def __init__(self, args: argparse.Namespace, kubeconfig: str, work_dir: Path) -> None:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process holding locks
        self.barrier = ctx.Barrier(args.processes + 1)
        self.conns: list[Connection] = []
        self.procs = []
        for index in range(args.processes):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(
                target=worker,
                args=(index, args, kubeconfig, str(work_dir), self.barrier, theirs),
                daemon=True,
            )
            proc.start()
            theirs.close()  # so a worker's death is an EOF here, not a hang
            self.conns.append(mine)
            self.procs.append(proc)

    def recv(self, conn: Connection) -> Any:
        if not conn.poll(PHASE_TIMEOUT):
            raise SystemExit(f"a worker gave no answer in {PHASE_TIMEOUT:g} s")
        try:
            return conn.recv()
        except EOFError:
            raise SystemExit("a worker died (its traceback is above)") from None

    def gather(self) -> list[Any]:
        return [self.recv(conn) for conn in self.conns]

    def start(self) -> None:
        self.barrier.wait(PHASE_TIMEOUT)

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs if p.pid is not None]

    def stop(self) -> None:
        for proc in self.procs:
            proc.join(30)
            if proc.is_alive():
                proc.terminate()
                proc.join(10)


def merged(results: list[PhaseResult]) -> tuple[float, list[float], list[str], Counter[str]]:
    """Cluster-wide: (seconds from the first start to the last end, latencies, errors, calls)."""
    calls: Counter[str] = Counter()
    for r in results:
        calls.update(r.calls)
    return (
        max(r.ended for r in results) - min(r.began for r in results),
        [x for r in results for x in r.latencies],
        [e for r in results for e in r.errors],
        calls,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--claims", type=int, default=5000)
    parser.add_argument("--latency", type=float, default=0.002, help="seconds per API call")
    parser.add_argument("--range", default=None, help="CIDR (default: the claims fill <= 80%%)")
    parser.add_argument(
        "--processes",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="worker processes the nodes are spread over, threads within each "
        "(default: one per usable core)",
    )
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
    parser.add_argument(
        "--profile", default=None, help="write a cProfile of the node threads (all workers) here"
    )
    args = parser.parse_args()
    args.processes = max(1, min(args.processes, args.nodes))

    with tempfile.TemporaryDirectory(prefix="cluster-ipam-", dir=args.dir) as tmp:
        work_dir = Path(tmp)
        refs = claims_fixture(work_dir / "claims.json", args.claims, args.nodes, args.gone_every)
        emu = Emulator(work_dir / "claims.json", args.latency)
        try:
            workers = Workers(args, emu.kubeconfig, work_dir)
            try:
                return bench(args, bench_range(args), refs, emu, workers)
            finally:
                workers.stop()
        finally:
            emu.stop()


def bench(
    args: argparse.Namespace,
    rng: IPRange,
    refs: list[ClaimReference],
    emu: Emulator,
    workers: Workers,
) -> int:
    workers.gather()  # every worker has opened its nodes
    emu_cpu0 = emu.cpu_seconds()
    workers.start()
    allocated = workers.gather()
    emu_cpu1 = emu.cpu_seconds()
    alloc_time, alloc_lat, alloc_err, alloc_calls = merged([r for r, _ in allocated])
    worker_cpu = [cpu for _, cpu in allocated]
    answers: dict[str, list[str]] = {}
    for r, _ in allocated:
        answers.update(r.answers)

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

        # Leak reclaiming, from one node (node 0, in worker 0), between the phases:
        # the objects of the claims missing from the API go (whichever node made them), no other.
        workers.conns[0].send("sweep")
        swept_deleted, swept_checked, gc_time = workers.recv(workers.conns[0])
        gone = {r.uid for i, r in enumerate(refs) if is_gone(i, args.gone_every)}
        wrongly_swept = sum(1 for name in swept_deleted if owners.get(name) not in gone)

        for conn in workers.conns:
            conn.send("release")
        workers.start()
        released: list[PhaseResult] = workers.gather()
        release_time, release_lat, release_err, release_calls = merged(released)
        left = client.list_ip_addresses(f"{MANAGED_BY_LABEL}={MANAGED_BY}")
    journal_left = sum(r.journal_rows for r in released)
    workers.stop()
    if args.profile:
        import pstats

        stats = pstats.Stats(f"{args.profile}.0")
        for index in range(1, args.processes):
            stats.add(f"{args.profile}.{index}")
        stats.dump_stats(args.profile)
        for index in range(args.processes):
            os.remove(f"{args.profile}.{index}")

    m = len(refs)
    writes = alloc_calls["create"] + alloc_calls["delete"]
    print(
        f"cluster_ipam: {args.nodes} nodes, {m} claims, range {rng} ({rng.size} addresses, "
        f"{fill:.0%} full at the peak), {args.latency * 1000:g} ms per API call, "
        f"journals synchronous={args.synchronous}"
    )
    split = (len(range(i, args.nodes, args.processes)) for i in range(args.processes))
    print(
        f"  processes: {args.processes} worker process(es), node threads in each: "
        f"{', '.join(map(str, split))}"
        f"; phases timed from one cluster-wide barrier"
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
        f"  leak reclaiming (one node's sweep): deleted {len(swept_deleted)} of "
        f"{swept_checked} objects ({len(gone)} claims gone, {wrongly_swept} live claims' "
        f"objects deleted) in {gc_time:.2f} s"
    )
    print(
        f"  CPU during allocation: node processes {sum(worker_cpu):.1f} s "
        f"({' + '.join(f'{c:.1f}' for c in worker_cpu)}), emulator {emu_cpu1 - emu_cpu0:.1f} s"
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
        or len(swept_deleted) != len(gone)
        or len(answers) != m
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
