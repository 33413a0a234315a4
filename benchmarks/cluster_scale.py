"""What N nodes of one cluster ask of its API server: the sidecar's cost at scale.

N simulated nodes run the project's own node-side code (the IPAM store and
journal, the node's pod view, the range views, the collector, the reclaimer
elected with a Lease), each node with its own store and watches, spread over
worker processes (threads within each).  The Kubernetes API emulator runs in
this process with ``--latency`` seconds per call and counts every request and
every object it serves (list items, watch events and bookmarks).  Every node
holds ``--claims-per-node`` claims (ResourceClaims with a running Pod on that
node; every other claim is sent by UID only, as gen1 DRANET does).

Phases, each printed with its figures:

1. start: every node starts at once (a DaemonSet rollout): time to ready,
   objects served, LISTs that bypassed the watch cache;
2. allocate (cluster scope): every claim gets its address: claims/s, API
   writes per allocation, range fill, duplicates;
3. steady state over ``--window`` seconds with no claim changing: requests and
   objects served per minute, all nodes together and per node, watch
   connections held;
4. delete ``--delete-fraction`` of the claims (pod and claim): time until
   their addresses are free, in GC intervals;
5. (cluster scope) nodes vanish (their Node objects deleted, their sidecars
   gone): their objects are reclaimed by the Lease holder only;
6. (cluster scope) the Lease holder is killed: time until another node holds it;
7. rollout: every node restarted at once: objects served, time to ready,
   LISTs that bypassed the watch cache;
8. duplicates, live addresses freed and leaked objects: all must be 0.

``--before DIR`` runs the nodes on another checkout (e.g. ``git worktree add
--detach /tmp/before ba1cbc7``) against the same emulator and prints the
start and steady-state figures of that code, for comparison.

Run (inside ``unshare -n`` like every manual run):
``python benchmarks/cluster_scale.py --nodes 100 [--scope cluster] [--window 120]``.
Figures, not assertions; the exit code is 1 when a duplicate, a freed live
address or a leak was seen.
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

NAMESPACE = "bench"
POOL = "local-ipam"
STEP_TIMEOUT = 1800.0  # seconds any one command to a worker may take
NODES_PER_PROCESS = 125  # simulated nodes sharing one interpreter, by default
HERE = Path(__file__).resolve().parent


# -- what every process agrees on ------------------------------------------------------------


def node_name(n: int) -> str:
    return f"node-{n:04d}"


def claim_uid(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012d}"


def claim_name(i: int) -> str:
    return f"claim-{i}"


def claims_of(n: int, per_node: int) -> range:
    """The claims node ``n`` holds: a contiguous run of indices."""
    return range(n * per_node, (n + 1) * per_node)


def gen1(i: int) -> bool:
    """Every other claim is sent by UID only (gen1 DRANET, v1.4.0)."""
    return i % 2 == 1


def device_of(i: int) -> str:
    return f"mac:0c:42:a1:{i >> 16 & 255:02x}:{i >> 8 & 255:02x}:{i & 255:02x}"


def range_for(claims: int, fill: float) -> str:
    """The smallest IPv4 CIDR that ``claims`` fill at most ``fill`` (network, broadcast out)."""
    prefix = 32 - math.ceil(math.log2(claims / fill + 2))
    return f"10.64.0.0/{prefix}"


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def process_cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return float("nan")


# -- a worker process: its share of the nodes, threads within it -------------------------------
#
# The worker runs on whichever checkout PYTHONPATH names (this one, or --before's), so it
# imports the project lazily and speaks JSON lines on stdin/stdout: one command, one answer.
#
# A worker holds many nodes; a sidecar holds one.  The threads of hundreds of nodes in one
# interpreter would contend for its lock, a cost of the packing, not of the sidecar: the
# default is a worker per NODES_PER_PROCESS nodes (at least one per core).


class SimNode:
    """One node's sidecar parts, built from the project's own code (see ``build``)."""

    def __init__(self, n: int, cfg: dict[str, Any]) -> None:
        self.n = n
        self.name = node_name(n)
        self.cfg = cfg
        self.client: Any = None
        self.store: Any = None
        self.parts: list[Any] = []  # things with stop(), stopped in reverse order
        self.collector: Any = None
        self.elector: Any = None
        self.ready_after = float("nan")

    @property
    def db(self) -> str:
        return str(Path(self.cfg["dir"]) / f"{self.name}.db")

    def start(self) -> None:
        """Start this node's sidecar parts with a client of its own, as a sidecar has."""
        from dranet_cloud.kube import KubeClient

        t0 = time.monotonic()
        self.client = KubeClient(self.cfg["kubeconfig"], timeout=30.0)
        if self.cfg["before"]:
            self._start_before()
        else:
            self._start_after()
        self.ready_after = time.monotonic() - t0

    def _start_before(self) -> None:
        """The node side as shipped before this change (read from --before's checkout)."""
        from dranet_cloud.ipam.node.reclaim import KubernetesClaims
        from dranet_cloud.server.collector import CollectorSettings, PeriodicCollector

        if self.cfg["scope"] == "cluster":
            from dranet_cloud.ipam.cluster.allocator import open_cluster_ipam

            self.store = open_cluster_ipam(self.db, node=self.name, api=self.client)
        else:
            from dranet_cloud.ipam.node.sqlite import SqliteStore

            self.store = SqliteStore(self.db)
        self._set_meta()
        source = KubernetesClaims(self.client, run_timeout=60.0)
        settings = CollectorSettings(interval=self.cfg["gc_interval"], source=source)
        self.collector = PeriodicCollector(lambda: self.store, settings).start()

    def _start_after(self) -> None:
        """The node side of this checkout, assembled as ``serve`` assembles it."""
        from datetime import timedelta

        from dranet_cloud.ipam.node_claims import NodeClaims
        from dranet_cloud.server.collector import CollectorSettings, PeriodicCollector
        from dranet_cloud.toolkit.iprange import IPRange

        grace = timedelta(seconds=self.cfg["grace"])
        jitter = self.cfg["initial_jitter"]
        view = NodeClaims(self.client, self.name, watch=True, grace=grace, initial_jitter=jitter)
        if self.cfg["scope"] == "cluster":
            from dranet_cloud.ipam.cluster.allocator import open_cluster_ipam
            from dranet_cloud.ipam.cluster.reclaimer import Reclaimer

            store = open_cluster_ipam(
                self.db,
                node=self.name,
                api=self.client,
                watch=True,
                initial_jitter=jitter,
                claims=view,
            )
            self.store = store
            self._set_meta()
            store.start([IPRange.parse(self.cfg["range"])])
            reclaimer = Reclaimer(
                self.client,
                view,
                identity=self.name,
                namespace="kube-system",
                grace=grace,
                interval=max(2.0, min(self.cfg["gc_interval"], 60.0)),
                node_jitter=jitter,
            )
            store.reclaimer = reclaimer
            self.parts.append(reclaimer.start())
            self.elector = reclaimer
        else:
            from dranet_cloud.ipam.node.sqlite import SqliteStore

            self.store = SqliteStore(self.db)
            self._set_meta()
        settings = CollectorSettings(interval=self.cfg["gc_interval"], source=view, grace=grace)
        self.collector = PeriodicCollector(lambda: self.store, settings).start()
        # Ready: the pods view and every range view hold their first list.
        until = time.monotonic() + 300.0
        while time.monotonic() < until:
            watches = list(getattr(self.store, "_watches", {}).values())
            if view.synced and all(w.synced_all() for w in watches):
                return
            time.sleep(0.05)
        raise TimeoutError(f"{self.name}: its views did not sync within 300 s")

    def _set_meta(self) -> None:
        """The store knows its cluster (as a store that served before would)."""
        write = getattr(self.store, "set_meta", None)
        if callable(write) and self.cfg.get("cluster_uid"):
            write("cluster_uid", self.cfg["cluster_uid"])

    def allocate(self, i: int) -> list[str]:
        from dranet_cloud.ipam.base import Owner
        from dranet_cloud.toolkit.iprange import IPRange
        from dranet_cloud.wire.claims import ClaimReference

        uid = claim_uid(i)
        owner = Owner(POOL, device_of(i), uid)
        claim = (
            ClaimReference(uid)
            if gen1(i)
            else ClaimReference(uid=uid, namespace=NAMESPACE, name=claim_name(i))
        )
        got: list[str] = self.store.allocate(owner, [IPRange.parse(self.cfg["range"])], claim=claim)
        return got

    def holds(self, i: int) -> bool:
        """Whether this node's store still holds claim ``i`` (a local read, no API call)."""
        uid = claim_uid(i)
        return any(a.owner.claim_uid == uid for a in self.store.list())

    def writes(self) -> int:
        calls = getattr(self.store, "calls", None) or {}
        return int(calls.get("create", 0)) + int(calls.get("delete", 0))

    def deletes(self) -> int:
        """IPAddress deletes this node made: its own releases and, as reclaimer, others'."""
        calls = getattr(self.store, "calls", None) or {}
        total = int(calls.get("delete", 0))
        stats = getattr(self.elector, "stats", None)
        return total + int(getattr(stats, "deleted", 0))

    def leads(self) -> bool:
        return bool(self.elector is not None and self.elector.is_leader)

    def stop(self, *, crash: bool = False) -> None:
        """Stop every part; ``crash``: as a killed process would (no lease released)."""
        if self.collector is not None:
            self.collector.stop()
            self.collector = None
        for part in reversed(self.parts):
            if crash and part is self.elector:
                part.elector.stop(release=False)  # a killed sidecar gives nothing back
            part.stop()
        self.parts.clear()
        self.elector = None
        if self.store is not None:
            self.store.close()
            self.store = None
        if self.client is not None:
            self.client.close()
            self.client = None


def _parallel(jobs: list[Callable[[], Any]], threads: int = 64) -> list[Any]:
    """Run ``jobs`` on a bounded pool; each result or the exception it raised."""
    from concurrent.futures import ThreadPoolExecutor

    def guard(job: Callable[[], Any]) -> Any:
        try:
            return job()
        except Exception as exc:  # a figure, not a crash: counted and shown
            return exc

    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(jobs)))) as pool:
        return list(pool.map(guard, jobs))


def allocate_all(nodes: list[SimNode], per: int, at_once: int) -> dict[str, Any]:
    """Every node allocates its claims, one thread a node, ``at_once`` nodes at a time."""
    answers: dict[str, list[str]] = {}
    latencies: list[float] = []
    errs: list[str] = []
    lock = threading.Lock()
    before = sum(node.writes() for node in nodes)

    def one_node(node: SimNode) -> None:
        for i in claims_of(node.n, per):
            t0 = time.perf_counter()
            try:
                got = node.allocate(i)
            except Exception as exc:
                with lock:
                    errs.append(f"{node.name} claim {i}: {type(exc).__name__}: {exc}"[:300])
                continue
            with lock:
                latencies.append(time.perf_counter() - t0)
                answers[claim_uid(i)] = got

    began = time.monotonic()
    _parallel([lambda node=node: one_node(node) for node in nodes], at_once)
    return {
        "began": began,
        "ended": time.monotonic(),
        "answers": answers,
        "latencies": latencies,
        "errors": errs,
        "writes": sum(node.writes() for node in nodes) - before,
    }


def worker_main() -> int:
    cfg = json.loads(sys.stdin.readline())
    if not cfg["before"]:
        sys.path.insert(0, str(HERE.parent))
    nodes = {n: SimNode(n, cfg) for n in cfg["nodes"]}
    per = cfg["per_node"]
    out: IO[str] = sys.stdout
    sys.stdout = sys.stderr  # only answers go to the parent's pipe

    def answer(doc: dict[str, Any]) -> None:
        out.write(json.dumps(doc) + "\n")
        out.flush()

    answer({"hello": os.getpid()})
    for line in sys.stdin:
        cmd = json.loads(line)
        what = cmd["cmd"]
        if what == "start":
            errors = _parallel([node.start for node in nodes.values()], cfg["start_threads"])
            answer(
                {
                    "ready": [node.ready_after for node in nodes.values()],
                    "errors": [repr(e)[:300] for e in errors if isinstance(e, Exception)],
                }
            )
        elif what == "allocate":
            answer(allocate_all(list(nodes.values()), per, cfg["alloc_threads"]))
        elif what == "held":
            held = [i for i in cmd["claims"] if i // per in nodes and nodes[i // per].holds(i)]
            answer({"held": held})
        elif what == "kill":
            for n in cmd["nodes"]:
                nodes.pop(n).stop(crash=True)
            answer({"killed": cmd["nodes"]})
        elif what == "holder":
            answer({"holders": [node.name for node in nodes.values() if node.leads()]})
        elif what == "kill-holder":
            killed = [n for n, node in nodes.items() if node.leads()]
            for n in killed:
                nodes.pop(n).stop(crash=True)
            answer({"killed": [node_name(n) for n in killed]})
        elif what == "deletes":
            answer({"deletes": {node.name: node.deletes() for node in nodes.values()}})
        elif what == "restart":
            _parallel([node.stop for node in nodes.values()], 64)
            errors = _parallel([node.start for node in nodes.values()], cfg["start_threads"])
            answer(
                {
                    "ready": [node.ready_after for node in nodes.values()],
                    "errors": [repr(e)[:300] for e in errors if isinstance(e, Exception)],
                }
            )
        elif what == "stop":
            _parallel([node.stop for node in nodes.values()], 64)
            answer({"stopped": True})
            return 0
        else:
            answer({"error": f"unknown command {what}"})
    return 0


# -- the parent: the emulator, the workers, the phases, the figures ---------------------------


class Worker:
    """One worker process and its command pipe."""

    def __init__(self, cfg: dict[str, Any], pythonpath: str) -> None:
        env = dict(os.environ, PYTHONPATH=pythonpath)
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cfg) + "\n")
        self.proc.stdin.flush()
        self.nodes: list[int] = cfg["nodes"]
        self.read()

    def send(self, cmd: str, **fields: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cmd": cmd, **fields}) + "\n")
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"a worker died (exit {self.proc.wait()}; its traceback is above)")
        doc: dict[str, Any] = json.loads(line)
        return doc

    def cpu(self) -> float:
        return process_cpu_seconds(self.proc.pid)


class Workers:
    def __init__(self, workers: list[Worker]) -> None:
        self.all = workers

    def ask(self, cmd: str, **fields: Any) -> list[dict[str, Any]]:
        """The same command to every worker at once; their answers."""
        for w in self.all:
            w.send(cmd, **fields)
        return [w.read() for w in self.all]

    def cpu(self) -> float:
        return sum(w.cpu() for w in self.all)

    def stop(self) -> None:
        for w in self.all:
            try:
                w.send("stop")
                w.read()
            except (OSError, SystemExit):
                pass
            try:
                w.proc.wait(30)
            except subprocess.TimeoutExpired:
                w.proc.kill()


def populate(emu: Any, nodes: int, per_node: int) -> None:
    """Every node, its claims, and a running pod per claim on that node."""
    for n in range(nodes):
        emu.add_node(node_name(n))
        for i in claims_of(n, per_node):
            emu.add_claim(NAMESPACE, claim_name(i), uid=claim_uid(i), node=node_name(n))
            emu.add_pod(NAMESPACE, f"pod-{i}", node=node_name(n), claims=(("nic", claim_name(i)),))


def remove_claim(emu: Any, i: int) -> None:
    emu.delete_pod(NAMESPACE, f"pod-{i}")
    emu.delete_claim(NAMESPACE, claim_name(i))


class Meter:
    """The emulator's counters between two moments: requests and objects per resource."""

    def __init__(self, emu: Any) -> None:
        self.emu = emu
        self.t0 = time.monotonic()
        self.s0 = emu.served()

    def delta(self) -> tuple[float, dict[str, Counter[str]], dict[str, Counter[str]]]:
        s1 = self.emu.served()
        seconds = time.monotonic() - self.t0

        def diff(key: str) -> dict[str, Counter[str]]:
            out: dict[str, Counter[str]] = {}
            for res, verbs in s1[key].items():
                old = self.s0[key].get(res, {})
                c = Counter({v: n - old.get(v, 0) for v, n in verbs.items()})
                c = Counter({v: n for v, n in c.items() if n})
                if c:
                    out[res] = c
            return out

        return seconds, diff("requests"), diff("objects")


def total(counts: dict[str, Counter[str]], verb: str | None = None) -> int:
    return sum(n for c in counts.values() for v, n in c.items() if verb is None or v == verb)


def show(counts: dict[str, Counter[str]]) -> str:
    return "; ".join(
        f"{res} " + ", ".join(f"{v} {n}" for v, n in sorted(c.items()))
        for res, c in sorted(counts.items())
    )


@contextmanager
def emulator(args: argparse.Namespace) -> Iterator[Any]:
    from dranet_cloud.testing.kubernetes import KubernetesEmulator

    emu = KubernetesEmulator(
        latency=args.latency,
        bookmark_interval=args.bookmark_interval,
        watch_window=max(100_000, args.nodes * args.claims_per_node * 4),
    )
    with emu:
        yield emu


def wait_until(check: Callable[[], bool], timeout: float, step: float = 0.5) -> float | None:
    """Seconds until ``check()`` held, ``None`` when it did not within ``timeout``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if check():
            return time.monotonic() - t0
        time.sleep(step)
    return None


def start_workers(
    args: argparse.Namespace, emu: Any, kubeconfig: str, work_dir: Path, before: str | None
) -> Workers:
    spread: list[list[int]] = [[] for _ in range(args.processes)]
    for n in range(args.nodes):
        spread[n % args.processes].append(n)
    workers = []
    for index, mine in enumerate(spread):
        cfg = {
            "before": before is not None,
            "kubeconfig": kubeconfig,
            "nodes": mine,
            "per_node": args.claims_per_node,
            "scope": args.scope,
            "range": args.range,
            "dir": str(work_dir),
            "gc_interval": args.gc_interval,
            "cluster_uid": emu.cluster_uid,
            "start_threads": max(1, args.start_threads // args.processes),
            "alloc_threads": args.alloc_threads,
            "initial_jitter": args.initial_jitter,
            "grace": args.grace,
            "worker": index,
        }
        path = before if before is not None else str(HERE.parent)
        workers.append(Worker(cfg, path))
    return Workers(workers)


def steady(emu: Any, args: argparse.Namespace, label: str) -> dict[str, float]:
    """The steady-state window: nothing changes, the nodes run their periodic work."""
    # Past the first collection after the allocations (it reads the cluster's identity
    # once, then keeps it for an hour): the window holds only what repeats.
    time.sleep(max(args.settle, 2 * args.gc_interval))
    meter = Meter(emu)
    time.sleep(args.window)
    seconds, requests, objects = meter.delta()
    per_min = 60.0 / seconds
    figures = {
        "requests_per_min": total(requests) * per_min,
        "objects_per_min": total(objects) * per_min,
        "watches": float(emu.watches_open()),
    }
    n = args.nodes
    print(
        f"  steady state ({label}, {seconds:.0f} s window): "
        f"{figures['requests_per_min']:.0f} requests/min and "
        f"{figures['objects_per_min']:.0f} objects served/min cluster-wide; per node "
        f"{figures['requests_per_min'] / n:.2f} requests/min, "
        f"{figures['objects_per_min'] / n:.2f} objects/min; "
        f"{figures['watches']:.0f} watch connections held"
    )
    print(f"    requests: {show(requests) or 'none'}")
    print(f"    objects:  {show(objects) or 'none'}")
    cluster_lists = sum(
        c.get("list", 0) for res, c in requests.items() if res in ("resourceclaims", "ipaddresses")
    )
    print(f"    LISTs of cluster-wide collections in the window: {cluster_lists}")
    figures["cluster_lists"] = float(cluster_lists)
    return figures


def settle_cpu(workers: Workers, at_least: float, limit: float = 120.0) -> float:
    """Seconds waited (at least ``at_least``) until the nodes' CPU falls below a tenth
    of a core over two seconds: the start's own work (first lists, claim resolution,
    first collections) is done, so the allocation figures are the allocations' alone."""
    t0 = time.monotonic()
    time.sleep(at_least)
    while time.monotonic() - t0 < limit:
        cpu0 = workers.cpu()
        time.sleep(2.0)
        if workers.cpu() - cpu0 < 0.2:
            break
    return time.monotonic() - t0


def startup(emu: Any, workers: Workers, args: argparse.Namespace, what: str) -> None:
    meter = Meter(emu)
    t0 = time.monotonic()
    answers = workers.ask("start" if what == "start" else "restart")
    took = time.monotonic() - t0
    _seconds, requests, objects = meter.delta()
    ready = [r for a in answers for r in a["ready"]]
    errors = [e for a in answers for e in a["errors"]]
    consistent = total(requests, "list-consistent")
    print(
        f"  {what}: {len(ready)} nodes ready in {took:.1f} s (per node p50 "
        f"{median(ready):.2f} s, max {max(ready, default=float('nan')):.2f} s); "
        f"{total(requests)} requests, {total(objects)} objects served; "
        f"LISTs that bypassed the watch cache: {consistent}; errors: {len(errors)}"
    )
    print(f"    objects: {show(objects)}")
    for e in errors[:3]:
        print(f"    {e}")


def run(args: argparse.Namespace, before: str | None) -> dict[str, Any]:
    label = f"before: {before}" if before else "this checkout"
    bad: list[str] = []
    with (
        tempfile.TemporaryDirectory(prefix="cluster-scale-", dir=args.store_dir) as tmp,
        emulator(args) as emu,
    ):
        populate(emu, args.nodes, args.claims_per_node)
        kubeconfig = str(emu.write_kubeconfig(Path(tmp) / "kubeconfig"))
        m = args.nodes * args.claims_per_node
        print(
            f"cluster_scale ({label}): {args.nodes} nodes x {args.claims_per_node} claims "
            f"= {m} claims ({sum(gen1(i) for i in range(m))} sent by UID only), scope "
            f"{args.scope}, range {args.range}, {args.latency * 1000:g} ms per API call, "
            f"bookmarks every {args.bookmark_interval:g} s, GC every {args.gc_interval:g} s, "
            f"{args.processes} worker process(es), at most {args.alloc_threads} node(s) "
            f"of each allocating at a time, stores under {tmp}"
        )
        workers = start_workers(args, emu, kubeconfig, Path(tmp), before)
        try:
            startup(emu, workers, args, "start")
            answers: dict[str, list[str]] = {}
            if args.scope == "cluster":
                quiet = settle_cpu(workers, args.settle)
                print(f"  (allocating after {quiet:.0f} s, when the start's work was done)")
                meter = Meter(emu)
                cpu0 = workers.cpu()
                emu_cpu0 = time.process_time()
                done = workers.ask("allocate")
                emu_cpu = time.process_time() - emu_cpu0
                _seconds, requests, _objects = meter.delta()
                began = min(d["began"] for d in done)
                ended = max(d["ended"] for d in done)
                for d in done:
                    answers.update(d["answers"])
                lat = [x for d in done for x in d["latencies"]]
                errs = [e for d in done for e in d["errors"]]
                writes = sum(d["writes"] for d in done)
                creates = requests.get("ipaddresses", Counter()).get("create", 0)
                dup = Counter(a for got in answers.values() for a in got)
                duplicates = sum(k - 1 for k in dup.values() if k > 1)
                print(
                    f"  allocate: {len(answers) / (ended - began):.0f} claims/s cluster-wide "
                    f"({len(answers)} in {ended - began:.1f} s; p50 "
                    f"{median(lat) * 1000:.1f} ms, p99 "
                    f"{percentile(lat, 0.99) * 1000:.1f} ms), {writes / max(1, len(answers)):.3f}"
                    f" writes per allocation ({creates} creates at the API), range "
                    f"{len(answers) / ipaddress.ip_network(args.range).num_addresses:.0%} full; "
                    f"duplicates {duplicates}; errors {len(errs)}; CPU: nodes "
                    f"{workers.cpu() - cpu0:.1f} s, API emulator {emu_cpu:.1f} s"
                )
                for e in errs[:3]:
                    print(f"    {e}")
                if duplicates or errs:
                    bad.append("allocation")
            else:
                done = workers.ask("allocate")
                for d in done:
                    answers.update(d["answers"])
            figures = steady(emu, args, label)
            if before is not None:
                return figures
            # 4. claims deleted: their addresses are free within two GC intervals.
            step = max(1, round(1 / args.delete_fraction))
            step += 1 - step % 2  # odd: the victims alternate between gen2 and UID-only claims
            victims = [i for i in range(0, m, step) if claim_uid(i) in answers]
            for i in victims:
                remove_claim(emu, i)
            t_del = time.monotonic()

            def freed() -> bool:
                held = [h for a in workers.ask("held", claims=victims) for h in a["held"]]
                if held:
                    return False
                if args.scope != "cluster":
                    return True
                names = {
                    str(ipaddress.ip_interface(a).ip)
                    for i in victims
                    for a in answers.get(claim_uid(i), [])
                }
                return not any(emu.ip_address(name) for name in names)

            took = wait_until(freed, args.gc_interval * 4 + 30)
            print(
                f"  {len(victims)} claims deleted (pod and claim, "
                f"{sum(gen1(i) for i in victims)} of them UID-only): "
                + (
                    f"every address free after {took:.1f} s = "
                    f"{took / args.gc_interval:.2f} GC intervals"
                    if took is not None
                    else "NOT all free within four GC intervals"
                )
            )
            if took is None or took > 2 * args.gc_interval:
                bad.append("deleted claims not freed within two GC intervals")
            del t_del
            live = [i for i in range(m) if i not in set(victims)]
            if args.scope == "cluster":
                bad += vanish_and_takeover(emu, workers, args, answers, live)
            # 7. rollout: every node restarted at once.
            startup(emu, workers, args, "rollout")
            # 8. nothing live freed, nothing leaked.
            if args.scope == "cluster":
                alive = [i for i in live if i // args.claims_per_node not in VANISHED]
                missing = [
                    i
                    for i in alive
                    for a in answers.get(claim_uid(i), [])
                    if not emu.ip_address(str(ipaddress.ip_interface(a).ip))
                ]
                objs = emu.ip_addresses("ipaddress.kubernetes.io/managed-by=dranet-cloud.dra.net")
                live_uids = {claim_uid(i) for i in alive}
                leaked = [
                    o
                    for o in objs
                    if (o["metadata"].get("annotations") or {}).get(
                        "dranet-cloud.dra.net/claim-uid"
                    )
                    not in live_uids
                ]
                names = Counter(o["metadata"]["name"] for o in objs)
                dup = sum(k - 1 for k in names.values() if k > 1)
                print(
                    f"  live addresses freed: {len(missing)}; leaked objects: {len(leaked)}; "
                    f"duplicates: {dup}"
                )
                if missing or leaked:
                    bad.append("live freed or leaked")
        finally:
            workers.stop()
    figures["bad"] = bad
    return figures


VANISHED: set[int] = set()  # nodes whose sidecar and Node object are gone
KILLED: set[int] = set()  # nodes whose sidecar is gone, Node object kept: their objects stay


def vanish_and_takeover(
    emu: Any,
    workers: Workers,
    args: argparse.Namespace,
    answers: dict[str, list[str]],
    live: list[int],
) -> list[str]:
    bad: list[str] = []
    holders = [h for a in workers.ask("holder") for h in a["holders"]]
    print(f"  reclaimer lease held by: {', '.join(holders) or 'nobody'}")
    if len(holders) != 1:
        bad.append("not exactly one lease holder")
    # 5. some nodes vanish: their sidecars die, their Node objects and pods go.
    count = max(1, args.nodes // 100)
    holder_n = {int(h.split("-")[1]) for h in holders}
    gone = [n for n in range(args.nodes - 1, -1, -1) if n not in holder_n][:count]
    VANISHED.update(gone)
    for w in workers.all:
        mine = [n for n in gone if n in w.nodes]
        if mine:
            w.send("kill", nodes=mine)
            w.read()
    before = {k: v for a in workers.ask("deletes") for k, v in a["deletes"].items()}
    for n in gone:
        for i in claims_of(n, args.claims_per_node):
            emu.delete_pod(NAMESPACE, f"pod-{i}")
        emu.delete_node(node_name(n))
    names = {
        str(ipaddress.ip_interface(a).ip)
        for n in gone
        for i in claims_of(n, args.claims_per_node)
        for a in answers.get(claim_uid(i), [])
    }
    # The claims of a vanished node's pods go too (their pods are gone).
    for n in gone:
        for i in claims_of(n, args.claims_per_node):
            emu.delete_claim(NAMESPACE, claim_name(i))
    took = wait_until(lambda: not any(emu.ip_address(x) for x in names), args.vanish_timeout, 1.0)
    after = {k: v for a in workers.ask("deletes") for k, v in a["deletes"].items()}
    deleters = sorted(k for k in after if after[k] > before.get(k, 0))
    print(
        f"  {len(gone)} node(s) vanished with {len(names)} addresses: "
        + (f"reclaimed after {took:.1f} s" if took is not None else "NOT reclaimed in time")
        + f" by {', '.join(deleters) or 'nobody'}"
    )
    if took is None or deleters != sorted(holders):
        bad.append("vanished node not reclaimed by the holder alone")
    # 6. the holder is killed: another node takes the lease.
    t0 = time.monotonic()
    for a in workers.ask("kill-holder"):
        KILLED.update(int(k.split("-")[1]) for k in a["killed"])
    took = wait_until(
        lambda: bool([h for a in workers.ask("holder") for h in a["holders"]]), 120, 0.5
    )
    new = [h for a in workers.ask("holder") for h in a["holders"]]
    print(
        "  lease holder killed: "
        + (
            f"{', '.join(new)} holds it after {took:.1f} s"
            if took is not None
            else "nobody took it"
        )
    )
    if took is None or took > 30:
        bad.append("takeover slower than 30 s")
    del t0
    return bad


def main() -> int:
    if "--worker" in sys.argv[1:]:
        return worker_main()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--claims-per-node", type=int, default=10)
    parser.add_argument("--scope", choices=("node", "cluster"), default="cluster")
    parser.add_argument("--latency", type=float, default=0.002, help="seconds per API call")
    parser.add_argument("--range", default=None, help="CIDR (default: the claims fill <= 80%%)")
    parser.add_argument("--window", type=float, default=120.0, help="steady-state seconds")
    parser.add_argument(
        "--settle", type=float, default=5.0, help="seconds before allocating and before the window"
    )
    parser.add_argument("--bookmark-interval", type=float, default=60.0)
    parser.add_argument("--gc-interval", type=float, default=20.0)
    parser.add_argument("--delete-fraction", type=float, default=0.05)
    parser.add_argument("--vanish-timeout", type=float, default=180.0)
    parser.add_argument("--initial-jitter", type=float, default=2.0)
    parser.add_argument(
        "--grace", type=float, default=0.0, help="the collector's grace period in seconds"
    )
    parser.add_argument(
        "--start-threads",
        type=int,
        default=128,
        help="nodes starting at once, all workers together (a rollout's pace)",
    )
    parser.add_argument(
        "--alloc-threads",
        type=int,
        default=1000,
        help="nodes of one worker process allocating at a time (default 1000: all)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=None,
        help=f"worker processes (default: one per {NODES_PER_PROCESS} nodes, >= one per core)",
    )
    parser.add_argument(
        "--store-dir",
        default=None,
        metavar="DIR",
        help="where the nodes' SQLite stores live (default: a directory in /dev/shm when "
        "there is one: each node has a disk of its own, this machine has one for all)",
    )
    parser.add_argument(
        "--before",
        default=None,
        metavar="DIR",
        help="also run the start and steady-state phases with the node code of this "
        "checkout (e.g. a `git worktree add --detach DIR ba1cbc7`), for comparison",
    )
    args = parser.parse_args()
    if args.processes is None:
        cores = len(os.sched_getaffinity(0))
        args.processes = max(cores, math.ceil(args.nodes / NODES_PER_PROCESS))
    args.processes = max(1, min(args.processes, args.nodes))
    if args.store_dir is None and Path("/dev/shm").is_dir():
        args.store_dir = "/dev/shm"

    if args.range is None:
        args.range = range_for(args.nodes * args.claims_per_node, 0.8)
    results: dict[str, Any] = {}
    if args.before:
        results["before"] = run(args, args.before)
    results["after"] = run(args, None)
    if args.before:
        b, a = results["before"], results["after"]
        per_node = [r["objects_per_min"] / args.nodes for r in (b, a)]
        print(
            f"  per node, objects served/min at steady state: before {per_node[0]:.2f}, "
            f"after {per_node[1]:.2f}"
        )
    bad = results["after"].get("bad") or []
    for why in bad:
        print(f"  FAILED: {why}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
