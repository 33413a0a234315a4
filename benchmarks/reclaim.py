"""Leak-reclaiming benchmark: what one collection run costs against the Kubernetes API.

Against the loopback Kubernetes API emulator, prints for a node with N
allocations in a cluster with M claims:

1. a run by name (gen2 allocations: one GET per claim on the node);
2. a run by UID (gen1 allocations: one complete list of every claim in the
   cluster, 500 a page);

each with the run time, the requests sent and how many allocations it freed
(10 % of the node's claims are deleted before the run);

2b. a run by UID with the node's pods view (:class:`NodeClaims`, what
   ``serve --gc-kubernetes`` runs): the claims of the node's live pods are
   judged with no call, the deleted ones by one GET each; then a steady-state
   run (nothing changed), whose requests and objects served are 0;

3. a run by name against a slow API (30 ms a request) whose budget runs out
   before every claim is judged: claims are proven and freed in batches, so
   the run keeps what it freed before the budget ran out (an all-or-nothing
   run freed none).

Run: ``python benchmarks/reclaim.py [--quick]`` (inside ``unshare -n`` like
every manual run).  Figures, not assertions.
"""

from __future__ import annotations

import argparse
import logging
import time
from datetime import datetime, timedelta, timezone

from dranet_cloud.ipam import MemoryStore, Owner
from dranet_cloud.ipam.node.reclaim import KubernetesClaims, NothingProven, RunCutShort, reclaim
from dranet_cloud.ipam.node_claims import NodeClaims
from dranet_cloud.kube import KubeClient
from dranet_cloud.testing.kubernetes import KubernetesEmulator
from dranet_cloud.toolkit.iprange import ip_range_from_cidr
from dranet_cloud.wire.claims import ClaimReference

RANGES = [ip_range_from_cidr("10.0.0.0/16")]
OLD = datetime.now(timezone.utc) - timedelta(hours=1)


def one(node_claims: int, cluster_claims: int, *, named: bool) -> None:
    with KubernetesEmulator() as kube:
        store = MemoryStore(clock=lambda: OLD)
        for i in range(cluster_claims):
            claim = kube.add_claim(f"ns{i % 50}", f"claim-{i}")
            if i < node_claims:
                uid = claim["metadata"]["uid"]
                ref = ClaimReference(uid, f"ns{i % 50}", f"claim-{i}") if named else None
                store.allocate(Owner("local-ipam", "mac:0c:42:a1:00:00:11", uid), RANGES, claim=ref)
        for i in range(0, node_claims, 10):
            kube.delete_claim(f"ns{i % 50}", f"claim-{i}")
        with KubeClient(str(kube.write_kubeconfig())) as client:
            started = time.perf_counter()
            result = reclaim(store, KubernetesClaims(client), grace=timedelta(0))
            elapsed = time.perf_counter() - started
        kind = "by name" if named else "by UID "
        print(
            f"{kind}: {node_claims:5d} allocations, {cluster_claims:6d} claims in the cluster: "
            f"{elapsed * 1000:8.1f} ms, {kube.emulator.request_count:5d} requests, "
            f"freed {len(result.freed)}"
        )


def pods_view(node_claims: int, cluster_claims: int) -> None:
    with KubernetesEmulator() as kube:
        store = MemoryStore(clock=lambda: OLD)
        for i in range(cluster_claims):
            ns, name = f"ns{i % 50}", f"claim-{i}"
            claim = kube.add_claim(ns, name)
            node = "node-a" if i < node_claims else f"node-{i % 97}"
            kube.add_pod(ns, f"pod-{i}", node=node, claims=(("nic", name),))
            if i < node_claims:
                uid = claim["metadata"]["uid"]
                store.allocate(Owner("local-ipam", "mac:0c:42:a1:00:00:11", uid), RANGES)
        with KubeClient(str(kube.write_kubeconfig())) as client:
            view = NodeClaims(client, "node-a", grace=timedelta(0)).start()
            try:
                informer = view.informer
                assert informer is not None and informer.wait_synced(30)
                deadline = time.monotonic() + 30
                while view.stats.claim_gets < node_claims and time.monotonic() < deadline:
                    time.sleep(0.01)  # the resolver reads each claim name once
                for i in range(0, node_claims, 10):
                    kube.delete_pod(f"ns{i % 50}", f"pod-{i}")
                    kube.delete_claim(f"ns{i % 50}", f"claim-{i}")
                while len(view.used()) > node_claims - len(range(0, node_claims, 10)):
                    time.sleep(0.01)
                kube.reset_calls()
                started = time.perf_counter()
                result = reclaim(store, view, grace=timedelta(0))
                elapsed = time.perf_counter() - started
                first = sum(n for v in kube.served()["requests"].values() for n in v.values())
                kube.reset_calls()
                reclaim(store, view, grace=timedelta(0))
                served = kube.served()
            finally:
                view.stop()
        steady = {
            res: n
            for res, verbs in served["objects"].items()
            if (n := sum(c for v, c in verbs.items() if not (res == "pods" and v == "watch")))
        }
        print(
            f"pods view: {node_claims:5d} allocations, {cluster_claims:6d} claims in the "
            f"cluster: {elapsed * 1000:8.1f} ms, {first:5d} requests, freed "
            f"{len(result.freed)}; a run with nothing changed: objects served {steady or 0}"
        )


def slow_api(node_claims: int, budget: float) -> None:
    with KubernetesEmulator(latency=0.03) as kube:
        store = MemoryStore(clock=lambda: OLD)
        for i in range(node_claims):
            uid = kube.add_claim("team", f"claim-{i}")["metadata"]["uid"]
            ref = ClaimReference(uid, "team", f"claim-{i}")
            store.allocate(Owner("local-ipam", "mac:0c:42:a1:00:00:11", uid), RANGES, claim=ref)
        for i in range(0, node_claims, 10):
            kube.delete_claim("team", f"claim-{i}")
        with KubeClient(str(kube.write_kubeconfig())) as client:
            source = KubernetesClaims(client, run_timeout=budget)
            started = time.perf_counter()
            try:
                freed = len(reclaim(store, source, grace=timedelta(0)).freed)
                how = "finished"
            except RunCutShort as exc:
                freed, how = len(exc.result.freed), "budget ran out"
            except NothingProven:
                freed, how = 0, "budget ran out in the first batch"
            elapsed = time.perf_counter() - started
        print(
            f"slow API (30 ms a request), {node_claims} allocations, budget {budget:g} s: "
            f"{how} after {elapsed:.1f} s, {kube.emulator.request_count} requests, "
            f"freed {freed} of {len(range(0, node_claims, 10))} leaked"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    quick = parser.parse_args().quick
    logging.getLogger("dranet_cloud").setLevel(logging.ERROR)  # "recorded cluster" each run
    for node, cluster in [(20, 1000), (200, 1000)] if quick else [(20, 5000), (200, 20000)]:
        one(node, cluster, named=True)
        one(node, cluster, named=False)
        pods_view(node, cluster)
    slow_api(400, 6.0) if quick else slow_api(2000, 20.0)


if __name__ == "__main__":
    main()
