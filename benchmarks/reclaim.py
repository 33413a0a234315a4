"""Leak-reclaiming benchmark: what one collection run costs against the Kubernetes API.

Against the loopback Kubernetes API emulator, prints for a node with N
allocations in a cluster with M claims:

1. a run by name (gen2 allocations: one GET per claim on the node);
2. a run by UID (gen1 allocations: one complete list of every claim in the
   cluster, 500 a page);

each with the run time, the requests sent and how many allocations it freed
(10 % of the node's claims are deleted before the run).

Run: ``python benchmarks/reclaim.py [--quick]`` (inside ``unshare -n`` like
every manual run).  Figures, not assertions.
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timedelta, timezone

from dranet_cloud.claims import ClaimReference
from dranet_cloud.ipam import MemoryStore, Owner
from dranet_cloud.ipam.reclaim import KubernetesClaims, reclaim
from dranet_cloud.iprange import ip_range_from_cidr
from dranet_cloud.kube import KubeClient
from dranet_cloud.testing.kubernetes import KubernetesEmulator

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    quick = parser.parse_args().quick
    for node, cluster in [(20, 1000), (200, 1000)] if quick else [(20, 5000), (200, 20000)]:
        one(node, cluster, named=True)
        one(node, cluster, named=False)


if __name__ == "__main__":
    main()
