"""Cluster scope on watches: views by block, repairs, conflicts, one reclaimer by Lease.

Real parts: the Kubernetes API emulator over loopback (its watch, Leases,
faults), the real client, informer and elector, real SQLite journals.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dranet_cloud.ipam.base import Owner
from dranet_cloud.ipam.cluster.allocator import ClusterIpam, open_cluster_ipam
from dranet_cloud.ipam.cluster.api import BLOCK_LABEL, NODE_LABEL, block_value
from dranet_cloud.ipam.cluster.reclaimer import Reclaimer
from dranet_cloud.ipam.node.reclaim import KubernetesClaims
from dranet_cloud.kube import KubeClient
from dranet_cloud.testing.kubernetes import KubernetesEmulator
from dranet_cloud.toolkit.errors import AddressConflict
from dranet_cloud.toolkit.iprange import IPRange
from dranet_cloud.wire.claims import ClaimReference

from .waiting import wait_until

RANGE = IPRange.parse("10.9.0.0/22")


def owner(claim: str) -> Owner:
    return Owner("local-ipam", "mac:0c:42:a1:00:00:11", claim)


def ref(kube: KubernetesEmulator, claim: str, node: str) -> ClaimReference:
    kube.add_claim("team", f"c-{claim}", uid=claim, node=node)
    return ClaimReference(uid=claim, namespace="team", name=f"c-{claim}")


@pytest.fixture
def open_node(tmp_path: Path, kube: KubernetesEmulator) -> Iterator[Any]:
    config = str(kube.write_kubeconfig())
    made: list[ClusterIpam] = []

    def node(name: str) -> ClusterIpam:
        kube.add_node(name)
        ipam = open_cluster_ipam(str(tmp_path / f"{name}.db"), node=name, kubeconfig=config)
        made.append(ipam)
        return ipam

    yield node
    for ipam in made:
        ipam.close()


def seen(ipam: ClusterIpam, name: str) -> str | None:
    """The UID of ``name`` in the node's watched view (None: the view shows none)."""
    watch = ipam._watch_for_name(name)
    obj = watch.lookup(name) if watch is not None else None
    return None if obj is None else str(obj["metadata"]["uid"])


def name_of(address: str) -> str:
    return address.removesuffix("/32")


def test_a_node_watches_only_its_blocks_and_allocation_lists_nothing_else(
    kube: KubernetesEmulator, open_node: Any
) -> None:
    a = open_node("node-a")
    got = [
        a.allocate(owner(f"u{i}"), [RANGE], claim=ref(kube, f"u{i}", "node-a"))[0]
        for i in range(20)
    ]
    assert len(set(got)) == 20
    obj = kube.ip_address(name_of(got[0]))
    assert obj is not None
    value = int(IPRange.parse(f"{name_of(got[0])}-{name_of(got[0])}").start)
    assert obj["metadata"]["labels"][BLOCK_LABEL] == block_value(
        RANGE, (value - int(RANGE.start)) // 64
    )
    # Lists: the start-up list of this node's objects (by node label) and the informer's.
    (view,) = a.view_states()
    assert view["synced"] and view["blocks"] >= 1
    lists = kube.calls().get("list", 0)
    assert lists == 1 + view["lists"]
    # Twenty more allocations: no list at all beyond the informer's (new blocks).
    before = kube.calls().get("list", 0)
    for i in range(20, 40):
        a.allocate(owner(f"u{i}"), [RANGE], claim=ref(kube, f"u{i}", "node-a"))
    (view2,) = a.view_states()
    assert kube.calls().get("list", 0) - before == view2["lists"] - view["lists"]
    # A retry with the watch synced asks the API nothing.
    kube.reset_calls()
    assert a.allocate(owner("u3"), [RANGE], claim=ref(kube, "u3", "node-a")) == [got[3]]
    assert {k: v for k, v in kube.calls().items() if k != "watch"} == {}


def test_the_collector_judges_only_this_nodes_objects_as_the_watch_shows_them(
    kube: KubernetesEmulator, open_node: Any
) -> None:
    """Nodes share blocks: a node's run sees its own objects, kept apart as events arrive."""
    a = open_node("node-a")
    mine = sorted(
        name_of(a.allocate(owner(f"a{i}"), [RANGE], claim=ref(kube, f"a{i}", "node-a"))[0])
        for i in range(3)
    )
    block = kube.ip_address(mine[0])["metadata"]["labels"][BLOCK_LABEL]  # type: ignore[index]

    def in_block(k: int) -> str:  # the k-th address of mine[0]'s block, unused by node-a
        first = int(ipaddress.ip_address(mine[0])) // 64 * 64
        free = [str(ipaddress.ip_address(first + i)) for i in range(64)]
        return [x for x in free if x not in mine and x != str(RANGE.start)][k]

    def own() -> set[str]:
        return {o.name for o in a._own_objects()}

    # Another node's object in node-a's block: node-a's view shows it, not as its own.
    theirs = in_block(5)
    kube.add_ip_address(theirs, labels={BLOCK_LABEL: block, NODE_LABEL: "node-b"})
    wait_until(lambda: seen(a, theirs) is not None, "node-a to see node-b's object")
    assert own() == set(mine)
    # An orphan naming node-a in that block (a journal that lost it) is judged too.
    orphan = in_block(7)
    labels = {BLOCK_LABEL: block, NODE_LABEL: "node-a"}
    kube.add_ip_address(orphan, labels=labels)
    wait_until(lambda: orphan in own(), "the orphan among node-a's own objects")
    # Relabelled to another node it leaves node-a's own objects; back, it returns;
    # deleted (no claim of node-a's journal: nothing re-creates it), it leaves again.
    kube.add_ip_address(orphan, labels={**labels, NODE_LABEL: "node-b"})
    wait_until(lambda: orphan not in own(), "the relabel to be seen")
    kube.add_ip_address(orphan, labels=labels)
    wait_until(lambda: orphan in own(), "the label back to be seen")
    kube.delete_ip_address(orphan)
    wait_until(lambda: own() == set(mine), "the deletion to be seen")


def test_an_object_deleted_under_a_live_claim_is_recreated_and_never_given_away(
    kube: KubernetesEmulator, open_node: Any
) -> None:
    a, b = open_node("node-a"), open_node("node-b")
    claim = ref(kube, "live", "node-a")
    (addr,) = a.allocate(owner("live"), [RANGE], claim=claim)
    first_uid = kube.ip_address(name_of(addr))["metadata"]["uid"]  # type: ignore[index]
    kube.delete_ip_address(name_of(addr))  # kubectl delete, by someone else
    # The watch saw it: the repair thread creates it again, same address, same claim.
    wait_until(
        lambda: (
            (o := kube.ip_address(name_of(addr))) is not None and o["metadata"]["uid"] != first_uid
        ),
        "the deleted object to be re-created",
    )
    again = kube.ip_address(name_of(addr))
    assert again is not None and again["spec"]["parentRef"]["name"] == "c-live"
    wait_until(lambda: a.cluster_stats()["repairs"] == 1, "the repair to be counted")
    # Deleted again, and the retry comes before the repair thread can run: the retry
    # itself re-creates it before answering.
    a.repairs.stop()
    kube.delete_ip_address(name_of(addr))
    wait_until(lambda: seen(a, name_of(addr)) is None, "the view to see the deletion")
    assert a.allocate(owner("live"), [RANGE], claim=claim) == [addr]
    assert kube.ip_address(name_of(addr)) is not None
    # Another node asking for that very address is refused; its dynamic ones avoid it.
    with pytest.raises(AddressConflict):
        b.reserve(owner("other"), [name_of(addr)], claim=ref(kube, "other", "node-b"))
    mine = {
        b.allocate(owner(f"b{i}"), [RANGE], claim=ref(kube, f"b{i}", "node-b"))[0]
        for i in range(30)
    }
    assert addr not in mine


def test_an_address_taken_by_someone_else_after_a_deletion_is_a_reported_conflict(
    kube: KubernetesEmulator, open_node: Any, caplog: pytest.LogCaptureFixture
) -> None:
    a = open_node("node-a")
    claim = ref(kube, "mine", "node-a")
    (addr,) = a.allocate(owner("mine"), [RANGE], claim=claim)
    a.repairs.stop()  # the race: someone else is quicker than the repair
    kube.delete_ip_address(name_of(addr))
    kube.add_ip_address(
        name_of(addr),
        parent={
            "group": "resource.k8s.io",
            "resource": "resourceclaims",
            "namespace": "elsewhere",
            "name": "theirs",
        },
        labels={"ipaddress.kubernetes.io/managed-by": "other-tool"},
        annotations={"dranet-cloud.dra.net/claim-uid": "uid-theirs"},
    )
    # Its object has no block label: the view sees only the deletion, a GET the holder.
    wait_until(lambda: seen(a, name_of(addr)) is None, "the view to see the deletion")
    caplog.set_level(logging.ERROR, logger="dranet_cloud.ipam.cluster.allocator")
    with pytest.raises(AddressConflict) as err:
        a.allocate(owner("mine"), [RANGE], claim=claim)
    text = str(err.value)
    assert "team/c-mine" in text and "elsewhere/theirs" in text and name_of(addr) in text
    assert any(
        r.levelno == logging.ERROR and "elsewhere/theirs" in r.getMessage() for r in caplog.records
    )
    assert any("elsewhere/theirs" in w and "team/c-mine" in w for w in a.health().warnings)
    assert a.cluster_stats()["conflicts"] == 1
    # Asked again: the same error (never the old address), counted once.
    with pytest.raises(AddressConflict):
        a.allocate(owner("mine"), [RANGE], claim=claim)
    assert a.cluster_stats()["conflicts"] == 1


def _reclaimers(kube: KubernetesEmulator, names: list[str]) -> list[tuple[Reclaimer, KubeClient]]:
    config = str(kube.write_kubeconfig())
    out = []
    for name in names:
        client = KubeClient(config, timeout=5)
        r = Reclaimer(
            client,
            KubernetesClaims(client),
            identity=name,
            namespace="kube-system",
            grace=timedelta(0),
            interval=0.3,
            lease_duration=3.0,
            renew_deadline=2.0,
            retry_period=0.5,
            candidate_poll=0.5,
        )
        out.append((r, client))
    return out


def test_a_vanished_nodes_objects_are_reclaimed_by_the_lease_holder_only(
    kube: KubernetesEmulator, open_node: Any
) -> None:
    gone = open_node("node-gone")
    kept = open_node("node-kept")
    dead = [
        gone.allocate(owner(f"g{i}"), [RANGE], claim=ref(kube, f"g{i}", "node-gone"))[0]
        for i in range(3)
    ]
    live_of_gone = gone.allocate(owner("g-live"), [RANGE], claim=ref(kube, "g-live", "node-gone"))
    alive = kept.allocate(owner("k0"), [RANGE], claim=ref(kube, "k0", "node-kept"))
    gone.close()
    for i in range(3):
        kube.delete_claim("team", f"c-g{i}")
    kube.delete_claim("team", "c-k0")  # node-kept still exists: nobody else sweeps it
    pairs = _reclaimers(kube, ["cand-1", "cand-2", "cand-3"])
    try:
        for r, _c in pairs:
            r.start()
        wait_until(lambda: sum(r.is_leader for r, _ in pairs) == 1, "one lease holder")
        kube.delete_node("node-gone")
        wait_until(
            lambda: (
                not {name_of(a) for a in dead}
                & {o["metadata"]["name"] for o in kube.ip_addresses()}
            ),
            "the holder to delete the vanished node's objects",
        )
        wait_until(lambda: sum(r.stats.deleted for r, _ in pairs) == 3, "the count")
        holders = [r for r, _ in pairs if r.stats.deleted]
        assert len(holders) == 1 and holders[0].stats.deleted == 3
        assert all(r.stats.deleted == 0 for r, _ in pairs if r is not holders[0])
        names = {o["metadata"]["name"] for o in kube.ip_addresses()}
        assert name_of(live_of_gone[0]) in names  # its claim is live: kept
        assert name_of(alive[0]) in names  # its node exists: never swept by another
        # Kill the holder (no release): another candidate takes over within 30 s.
        holder = holders[0]
        holder.elector.stop(release=False)
        holder.stop()
        t0 = time.monotonic()
        wait_until(
            lambda: any(r.is_leader for r, _ in pairs if r is not holder), "a new holder", limit=30
        )
        assert time.monotonic() - t0 < 30
        kube.delete_claim("team", "c-g-live")
        wait_until(
            lambda: (
                name_of(live_of_gone[0]) not in {o["metadata"]["name"] for o in kube.ip_addresses()}
            ),
            "the new holder to reclaim the rest",
            limit=30,
        )
        assert sum(r.stats.deleted for r, _ in pairs if r is not holder) == 1
    finally:
        for r, c in pairs:
            r.stop()
            c.close()


def test_no_live_address_is_freed_under_the_emulators_faults(
    kube: KubernetesEmulator, open_node: Any
) -> None:
    a, b = open_node("node-a"), open_node("node-b")
    live: dict[str, str] = {}
    for n, ipam in (("a", a), ("b", b)):
        for i in range(8):
            uid = f"{n}{i}"
            live[uid] = ipam.allocate(owner(uid), [RANGE], claim=ref(kube, uid, f"node-{n}"))[0]
    pairs = _reclaimers(kube, ["cand-1", "cand-2"])
    kube.cut_watches_every(1.0)
    try:
        for r, _c in pairs:
            r.start()
        deadline = time.monotonic() + 6
        n = 0
        with KubeClient(str(kube.write_kubeconfig()), timeout=5) as client:
            source = KubernetesClaims(client)
            while time.monotonic() < deadline:
                n += 1
                if n % 3 == 0:
                    kube.compact()  # the next watch from an older RV gets 410
                if n % 4 == 0:
                    kube.lose_replies(1, verb="delete")
                if n % 2 == 0:
                    kube.fail(500, times=2)  # the next two requests, whatever they are
                for node, ipam in (("a", a), ("b", b)):
                    with contextlib.suppress(Exception):
                        ipam.cluster_reclaim(source, grace=timedelta(0))
                    for uid in [u for u in live if u.startswith(node)][:4]:
                        with contextlib.suppress(Exception):
                            ipam.allocate(
                                owner(uid), [RANGE], claim=ClaimReference(uid, "team", f"c-{uid}")
                            )
                time.sleep(0.2)
    finally:
        kube.clear_faults()
        for r, c in pairs:
            r.stop()
            c.close()
    held = {o["metadata"]["name"] for o in kube.ip_addresses()}
    assert {name_of(x) for x in live.values()} <= held  # no live address was freed
    assert a.cluster_stats()["conflicts"] == 0 and b.cluster_stats()["conflicts"] == 0
