"""Cluster scope: local-ipam addresses as IPAddress objects on the Kubernetes API emulator.

Real parts: the emulator over loopback HTTP, the real client, real SQLite
journals (one per simulated node).
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest

from dranet_cloud.ipam.base import Owner
from dranet_cloud.ipam.cluster.allocator import ClusterIpam, open_cluster_ipam
from dranet_cloud.ipam.cluster.api import (
    CLAIM_UID_ANNOTATION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    NODE_LABEL,
)
from dranet_cloud.ipam.cluster.journal import BOUND, PENDING, RELEASING
from dranet_cloud.ipam.node.reclaim import KubernetesClaims, reclaim
from dranet_cloud.kube import KubeClient
from dranet_cloud.testing.kubernetes import KubernetesEmulator
from dranet_cloud.toolkit.errors import (
    AddressConflict,
    ProfileDenied,
    ProviderUnavailable,
    RangeExhausted,
)
from dranet_cloud.toolkit.iprange import IPRange
from dranet_cloud.wire.claims import ClaimReference

from .waiting import wait_until

RANGE = IPRange.parse("10.9.0.0/24")


def owner(claim: str, device: str = "mac:0c:42:a1:00:00:11") -> Owner:
    return Owner("local-ipam", device, claim)


def ref(kube: KubernetesEmulator, claim: str, node: str = "node-a") -> ClaimReference:
    """The claim as gen2 DRANET sends it, created in the emulator with UID ``claim``."""
    kube.add_claim("team", f"c-{claim}", uid=claim, node=node)
    return ClaimReference(uid=claim, namespace="team", name=f"c-{claim}")


@pytest.fixture
def nodes(tmp_path: Path, kube: KubernetesEmulator) -> Iterator[dict[str, ClusterIpam]]:
    config = str(kube.write_kubeconfig())
    made: dict[str, ClusterIpam] = {}

    def node(name: str) -> ClusterIpam:
        if name not in made:
            made[name] = open_cluster_ipam(
                str(tmp_path / f"{name}.db"), node=name, kubeconfig=config
            )
        return made[name]

    yield _Nodes(node)  # type: ignore[misc]
    for ipam in made.values():
        ipam.close()


class _Nodes(dict):  # type: ignore[type-arg]
    def __init__(self, make):  # type: ignore[no-untyped-def]
        super().__init__()
        self._make = make

    def __missing__(self, name: str) -> ClusterIpam:
        ipam: ClusterIpam = self._make(name)
        self[name] = ipam
        return ipam


def objects(kube: KubernetesEmulator) -> dict[str, dict]:  # type: ignore[type-arg]
    return {o["metadata"]["name"]: o for o in kube.ip_addresses()}


def test_an_allocation_is_an_ipaddress_naming_its_claim_and_a_retry_asks_nothing(
    kube: KubernetesEmulator, nodes: dict[str, ClusterIpam]
) -> None:
    a = nodes["node-a"]
    claim = ref(kube, "uid-1")
    got = a.allocate(owner("uid-1"), [RANGE], claim=claim)
    assert len(got) == 1 and got[0].endswith("/32")
    name = got[0].removesuffix("/32")
    obj = objects(kube)[name]
    assert obj["spec"]["parentRef"] == {
        "group": "resource.k8s.io",
        "resource": "resourceclaims",
        "namespace": "team",
        "name": "c-uid-1",
    }
    labels = obj["metadata"]["labels"]
    assert labels[MANAGED_BY_LABEL] == MANAGED_BY != "ipallocator.k8s.io"
    assert labels["ipaddress.kubernetes.io/ip-family"] == "IPv4"
    assert labels[NODE_LABEL] == "node-a"
    notes = obj["metadata"]["annotations"]
    assert notes[CLAIM_UID_ANNOTATION] == "uid-1"
    assert notes["dranet-cloud.dra.net/device"] == "mac:0c:42:a1:00:00:11"
    assert [r.state for r in a.journal.rows(owner("uid-1"))] == [BOUND]
    # The retry asks nothing once the watch has delivered the create (until then
    # one GET decides, by design): wait for it, the client may be quicker.
    wait_until(
        lambda: any(v.get("events", 0) + v.get("list_objects", 0) for v in a.view_states()),
        "the node's watch shows the new IPAddress",
    )
    kube.reset_calls()
    assert a.allocate(owner("uid-1"), [RANGE], claim=claim) == got
    assert a.allocate(owner("uid-1"), [RANGE], claim=ClaimReference("uid-1")) == got
    assert kube.calls() == {}


def test_three_nodes_one_range_never_share_an_address(
    kube: KubernetesEmulator, nodes: dict[str, ClusterIpam]
) -> None:
    names = ["node-a", "node-b", "node-c"]
    claims = {f"u{i}": ref(kube, f"u{i}", names[i % 3]) for i in range(60)}

    def run(uid: str) -> str:
        ipam = nodes[names[int(uid[1:]) % 3]]
        return ipam.allocate(owner(uid), [RANGE], claim=claims[uid])[0]

    for n in names:
        nodes[n]  # opened before the threads start
    with ThreadPoolExecutor(12) as pool:
        got = list(pool.map(run, claims))
    assert len(set(got)) == 60
    held = objects(kube)
    assert sorted(held) == sorted(a.removesuffix("/32") for a in got)
    for uid, addr in zip(claims, got, strict=True):
        assert held[addr.removesuffix("/32")]["spec"]["parentRef"]["name"] == f"c-{uid}"


def test_an_address_someone_else_holds_is_never_handed_out(
    kube: KubernetesEmulator, nodes: dict[str, ClusterIpam]
) -> None:
    small = IPRange.parse("10.9.1.1-10.9.1.4")
    for last in (1, 2, 4):
        kube.add_ip_address(f"10.9.1.{last}")  # the API server's own (a Service ClusterIP)
    got = nodes["node-a"].allocate(owner("u1"), [small], claim=ref(kube, "u1"))
    assert got == ["10.9.1.3/32"]
    with pytest.raises(RangeExhausted, match=r"10\.9\.1\.1-10\.9\.1\.4"):
        nodes["node-a"].allocate(owner("u2"), [small], claim=ref(kube, "u2"))
    # The range was full: no row is left behind for the refused claim.
    assert nodes["node-a"].journal.rows(owner("u2")) == []


def test_a_stale_view_costs_a_409_and_another_candidate(
    kube: KubernetesEmulator, nodes: dict[str, ClusterIpam]
) -> None:
    a, b = nodes["node-a"], nodes["node-b"]
    small = IPRange.parse("10.9.2.1-10.9.2.3")
    first = a.allocate(owner("u1"), [small], claim=ref(kube, "u1"))
    b.allocate(owner("u2"), [small], claim=ref(kube, "u2"))  # b listed after a's create
    # a's view predates b's object: a may try b's address first, then gets the last one.
    third = a.allocate(owner("u3"), [small], claim=ref(kube, "u3"))
    assert len({first[0], third[0], *b.journal.list()[0].address.split()}) == 3
    assert len(objects(kube)) == 3


def test_a_lost_create_reply_is_adopted_on_the_next_try(
    kube: KubernetesEmulator, nodes: dict[str, ClusterIpam]
) -> None:
    a = nodes["node-a"]
    claim = ref(kube, "u1")
    a.allocate(owner("warm"), [RANGE], claim=ref(kube, "warm"))  # the view is listed
    kube.lose_replies(1, verb="create")
    with pytest.raises(ProviderUnavailable, match="intent is kept"):
        a.allocate(owner("u1"), [RANGE], claim=claim)
    (row,) = a.journal.rows(owner("u1"))
    assert row.state == PENDING and row.name in objects(kube)  # committed, reply lost
    kube.reset_calls()
    got = a.allocate(owner("u1"), [RANGE], claim=claim)
    assert got == [row.address]
    assert kube.calls() == {"get": 1}  # read back and adopted: no second create
    assert len(objects(kube)) == 2
    assert [r.state for r in a.journal.rows(owner("u1"))] == [BOUND]


def test_a_pending_intent_held_by_someone_else_moves_on(
    kube: KubernetesEmulator, nodes: dict[str, ClusterIpam]
) -> None:
    a = nodes["node-a"]
    claim = ref(kube, "u1")
    a.allocate(owner("warm"), [RANGE], claim=ref(kube, "warm"))
    kube.fail(503, verb="create")
    with pytest.raises(ProviderUnavailable):
        a.allocate(owner("u1"), [RANGE], claim=claim)
    (row,) = a.journal.rows(owner("u1"))
    assert row.state == PENDING and row.name not in objects(kube)
    kube.add_ip_address(row.name)  # someone took it meanwhile
    got = a.allocate(owner("u1"), [RANGE], claim=claim)
    assert got != [row.address]
    assert objects(kube)[got[0].removesuffix("/32")]["spec"]["parentRef"]["name"] == "c-u1"


def test_api_down_new_claims_fail_known_claims_answer(
    kube: KubernetesEmulator, nodes: dict[str, ClusterIpam]
) -> None:
    a = nodes["node-a"]
    known = a.allocate(owner("u1"), [RANGE], claim=ref(kube, "u1"))
    claim = ref(kube, "u2")
    kube.fail(503, times=None)
    with pytest.raises(ProviderUnavailable):
        a.allocate(owner("u2"), [RANGE], claim=claim)
    assert a.allocate(owner("u1"), [RANGE], claim=ref(kube, "u1")) == known
    kube.clear_faults()
    got = a.allocate(owner("u2"), [RANGE], claim=claim)
    assert got != known and len(objects(kube)) == 2


def test_release_deletes_the_object_and_a_failed_delete_is_retried(
    kube: KubernetesEmulator, nodes: dict[str, ClusterIpam]
) -> None:
    a = nodes["node-a"]
    got = a.allocate(owner("u1"), [RANGE], claim=ref(kube, "u1"))
    other = a.allocate(owner("u2"), [RANGE], claim=ref(kube, "u2"))
    a.watch_ranges([RANGE])  # what /metrics counts
    assert a.tally.pools() == {"local-ipam": 2} and a.tally.ranges() == {RANGE: 2}
    assert a.release(owner("u1")) == got
    assert got[0].removesuffix("/32") not in objects(kube)
    assert a.journal.rows(owner("u1")) == []
    assert a.tally.pools() == {"local-ipam": 1} and a.tally.ranges() == {RANGE: 1}
    kube.fail(503, verb="delete")
    with pytest.raises(ProviderUnavailable, match="collector retries"):
        a.release(owner("u2"))
    assert [r.state for r in a.journal.rows(owner("u2"))] == [RELEASING]
    assert a.retry_releases() == (other, 0)
    assert objects(kube) == {} and a.list() == []
    assert a.tally.pools() == {} and a.health().ok


def test_static_addresses_are_reserved_cluster_wide(
    kube: KubernetesEmulator, nodes: dict[str, ClusterIpam]
) -> None:
    a, b = nodes["node-a"], nodes["node-b"]
    assert a.reserve(owner("u1"), ["10.9.0.50/24"], claim=ref(kube, "u1")) == ["10.9.0.50/32"]
    assert "10.9.0.50" in objects(kube)
    kube.reset_calls()  # a retry is the journal's answer, once one GET shows the object
    assert a.reserve(owner("u1"), ["10.9.0.50/24"], claim=ref(kube, "u1")) == ["10.9.0.50/32"]
    assert kube.calls() == {"get": 1}  # no range view holds a static address: one GET
    with pytest.raises(AddressConflict, match=r"10\.9\.0\.50.*c-u1"):
        b.reserve(owner("u2"), ["10.9.0.50"], claim=ref(kube, "u2", "node-b"))
    assert b.list() == []
    # A dynamic allocation on b never lands on it either.
    small = IPRange.parse("10.9.0.50-10.9.0.51")
    assert b.allocate(owner("u3"), [small], claim=ref(kube, "u3")) == ["10.9.0.51/32"]


def gen1_claim(kube: KubernetesEmulator, namespace: str, name: str, uid: str, node: str) -> None:
    """A claim and the running pod on ``node`` that uses it, as the kubelet sees them."""
    kube.add_claim(namespace, name, uid=uid, node=node)
    kube.add_pod(namespace, f"{name}-pod", node=node, claims=(("nic", name),))


def test_a_gen1_claim_known_only_by_uid_gets_its_parent_ref_from_this_nodes_pods(
    kube: KubernetesEmulator, nodes: dict[str, ClusterIpam]
) -> None:
    a = nodes["node-a"]
    uids = [f"g{i}" for i in range(12)]
    for i, uid in enumerate(uids):  # in two namespaces, as the kubelet would see them
        gen1_claim(kube, f"ns-{i % 2}", f"claim-{uid}", uid, "node-a")
    for i in range(30):  # the other nodes' claims: never read by node-a
        gen1_claim(kube, "other", f"theirs-{i}", f"t{i}", f"node-{i % 3 + 2}")
    kube.reset_calls()
    with ThreadPoolExecutor(6) as pool:  # concurrent gen1 requests share the look-ups
        got = dict(
            zip(
                uids,
                pool.map(lambda u: a.allocate(owner(u), [RANGE], claim=ClaimReference(u))[0], uids),
                strict=True,
            )
        )
    claims = kube.calls("resourceclaims")
    assert "list" not in claims  # no list of every claim in the cluster
    assert 12 <= claims["get"] <= 24  # one GET per claim name of node-a (a race: two)
    assert kube.calls("pods").get("list", 0) <= 2  # the informer's list, one for a miss
    found = objects(kube)
    for i, uid in enumerate(uids):
        obj = found[got[uid].removesuffix("/32")]
        assert obj["spec"]["parentRef"] == {
            "group": "resource.k8s.io",
            "resource": "resourceclaims",
            "namespace": f"ns-{i % 2}",
            "name": f"claim-{uid}",
        }
        assert obj["metadata"]["annotations"][CLAIM_UID_ANNOTATION] == uid
        (row,) = a.journal.rows(owner(uid))
        assert row.allocation.claim == ClaimReference(uid, f"ns-{i % 2}", f"claim-{uid}")
    # Retries of journal-known claims ask the API nothing.
    kube.reset_calls()
    assert a.allocate(owner("g3"), [RANGE], claim=ClaimReference("g3")) == [got["g3"]]
    assert kube.calls("resourceclaims") == {} and kube.calls() == {}
    # A pod scheduled later: its claim is named from the watch (or this node's pods).
    gen1_claim(kube, "ns-late", "late", "late", "node-a")
    late = a.allocate(owner("late"), [RANGE], claim=ClaimReference("late"))[0]
    assert objects(kube)[late.removesuffix("/32")]["spec"]["parentRef"]["name"] == "late"
    assert "list" not in kube.calls("resourceclaims")
    # A static address of a gen1 claim is reserved the same way.
    gen1_claim(kube, "ns-static", "fixed", "fixed", "node-a")
    assert a.reserve(owner("fixed"), ["10.9.0.250"], claim=ClaimReference("fixed")) == [
        "10.9.0.250/32"
    ]
    assert objects(kube)["10.9.0.250"]["spec"]["parentRef"]["namespace"] == "ns-static"
    assert "list" not in kube.calls("resourceclaims")


def test_a_gen1_uid_no_pod_of_this_node_names_is_a_500_and_never_an_address(
    kube: KubernetesEmulator, nodes: dict[str, ClusterIpam]
) -> None:
    a = nodes["node-a"]
    a.claims.min_interval = 0.1
    gen1_claim(kube, "team", "real", "real", "node-a")
    gen1_claim(kube, "team", "theirs", "theirs", "node-b")  # a claim of another node's pod
    for uid in ("ghost", "theirs"):
        with pytest.raises(ProviderUnavailable, match="no live pod of node node-a") as err:
            a.allocate(owner(uid), [RANGE], claim=ClaimReference(uid))
        assert not isinstance(err.value, ProfileDenied)  # temporary: the kubelet retries
    assert objects(kube) == {} and a.list() == []
    # A list of this node's pods that fails proves nothing: still a 500, nothing written.
    time.sleep(0.1)
    kube.fail(503, times=None, verb="list", resource="pods")
    with pytest.raises(ProviderUnavailable, match="listing this node's pods failed"):
        a.allocate(owner("ghost2"), [RANGE], claim=ClaimReference("ghost2"))
    assert objects(kube) == {} and a.list() == []
    # A claim the view showed needs no call; the API back, new UIDs resolve.
    kube.reset_calls()
    got = a.allocate(owner("real"), [RANGE], claim=ClaimReference("real"))
    assert kube.calls("resourceclaims") == {} and kube.calls("pods") == {}
    assert objects(kube)[got[0].removesuffix("/32")]["spec"]["parentRef"]["name"] == "real"
    kube.clear_faults()
    gen1_claim(kube, "team", "later", "ghost2", "node-a")
    assert a.allocate(owner("ghost2"), [RANGE], claim=ClaimReference("ghost2"))
    # Unknown UIDs asked again and again list this node's pods at most once per min_interval.
    a.claims.min_interval = 30.0
    kube.reset_calls()
    for _ in range(3):
        with pytest.raises(ProviderUnavailable):
            a.allocate(owner("ghost"), [RANGE], claim=ClaimReference("ghost"))
    assert kube.calls("pods").get("list", 0) <= 1 and kube.calls("resourceclaims") == {}
    assert len(objects(kube)) == 2


def test_gc_deletes_this_nodes_orphans_and_never_another_nodes_objects(
    kube: KubernetesEmulator, nodes: dict[str, ClusterIpam]
) -> None:
    a, b = nodes["node-a"], nodes["node-b"]
    live = a.allocate(owner("live"), [RANGE], claim=ref(kube, "live"))
    gone_a = a.allocate(owner("gone-a"), [RANGE], claim=ref(kube, "gone-a"))
    orphan = a.allocate(owner("orphan"), [RANGE], claim=ref(kube, "orphan"))
    gone_b = b.allocate(owner("gone-b"), [RANGE], claim=ref(kube, "gone-b", "node-b"))
    b_live = b.allocate(owner("b-live"), [RANGE], claim=ref(kube, "b-live", "node-b"))
    # node-a's journal loses the row of "orphan" (a journal restored from an old copy).
    a.journal.forget(a.journal.rows(owner("orphan")))
    for name in ("c-gone-a", "c-gone-b", "c-orphan"):
        kube.delete_claim("team", name)
    with KubeClient(str(kube.write_kubeconfig()), timeout=5) as client:
        source = KubernetesClaims(client)
        # A claim lookup that fails proves nothing: nothing is deleted.
        kube.fail(500, times=None, verb="get", resource="resourceclaims")
        with pytest.raises(Exception, match="nothing"):
            a.cluster_reclaim(source, grace=timedelta(0))
        kube.clear_faults()
        assert len(objects(kube)) == 5
        result = reclaim(a, source, grace=timedelta(0))
        assert [x.address for x in result.freed] == gone_a
        # The release's DELETED reaches node-a's watch before its own sweep looks.
        watch = a._watch_for_name(gone_a[0].removesuffix("/32"))
        wait_until(
            lambda: watch is None or watch.lookup(gone_a[0].removesuffix("/32")) is None,
            "node-a's watch to see its released object go",
        )
        kube.reset_calls()
        swept = a.cluster_reclaim(source, grace=timedelta(0))
    # Its own orphan goes, judged from its watched blocks: no list of IPAddress objects.
    assert swept.sweep.deleted == [orphan[0].removesuffix("/32")]
    assert "list" not in kube.calls()
    # node-b's objects are node-b's (or, once it vanished, the Lease holder's), never node-a's.
    left = sorted(objects(kube))
    assert left == sorted(x.removesuffix("/32") for x in live + gone_b + b_live)
    assert ipaddress.ip_interface(live[0]) and a.list()[0].owner.claim_uid == "live"


def test_api_calls_never_run_on_an_event_loop(
    kube: KubernetesEmulator, nodes: dict[str, ClusterIpam]
) -> None:
    """On a thread running a loop (the server's store lane) a journal answer is fine,
    but anything that would call the API raises WouldBlock before touching anything."""
    import asyncio

    from dranet_cloud.toolkit.errors import WouldBlock

    a = nodes["node-a"]
    known = a.allocate(owner("u1"), [RANGE], claim=ref(kube, "u1"))
    claim = ref(kube, "u2")

    async def on_the_loop() -> list[str]:
        with pytest.raises(WouldBlock):
            a.allocate(owner("u2"), [RANGE], claim=claim)
        with pytest.raises(WouldBlock):
            a.release(owner("u1"))
        return a.allocate(owner("u1"), [RANGE], claim=ref(kube, "u1"))

    kube.reset_calls()
    assert asyncio.run(on_the_loop()) == known
    assert kube.calls() == {} and a.journal.rows(owner("u2")) == []
