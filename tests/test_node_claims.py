"""NodeClaims: a node's claims from the watch of its own pods, as leak reclaiming's proof.

Real parts: the Kubernetes API emulator over loopback HTTP (pods made with its
``add_pod``, counted per verb and resource), the real client and informer, and
real stores.  What is asserted is what the API served, from the emulator's
counters, and what the store still holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from dranet_cloud.ipam import MemoryStore, Owner, SqliteStore
from dranet_cloud.ipam.base import IpamStore
from dranet_cloud.ipam.node.reclaim import NothingProven, reclaim
from dranet_cloud.ipam.node_claims import NodeClaims, pod_claims, pod_is_live
from dranet_cloud.kube import KubeClient
from dranet_cloud.testing.kubernetes import KubernetesEmulator
from dranet_cloud.toolkit.iprange import ip_range_from_cidr
from dranet_cloud.wire.claims import ClaimReference

RANGES = [ip_range_from_cidr("10.41.0.0/24")]
HOUR_AGO = datetime.now(timezone.utc) - timedelta(hours=1)
GRACE = timedelta(minutes=2)
NODE = "node-a"


def wait_until(check: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def client(kube: KubernetesEmulator) -> Iterator[KubeClient]:
    with KubeClient(str(kube.write_kubeconfig()), timeout=5) as made:
        yield made


@pytest.fixture
def views() -> Iterator[list[NodeClaims]]:
    made: list[NodeClaims] = []
    yield made
    for view in made:
        view.stop()


def started(views: list[NodeClaims], client: KubeClient, **options: object) -> NodeClaims:
    view = NodeClaims(client, NODE, grace=GRACE, **options)  # type: ignore[arg-type]
    views.append(view.start())
    informer = view.informer
    assert informer is not None and informer.wait_synced(10)
    return view


def claimed_pod(
    kube: KubernetesEmulator, name: str, *, node: str = NODE, uid: str | None = None
) -> str:
    """A claim ``team/<name>`` and a running pod ``team/<name>-pod`` on ``node`` using it."""
    claim = kube.add_claim("team", name, uid=uid, node=node)
    kube.add_pod("team", f"{name}-pod", node=node, claims=(("nic", name),))
    uid_of: str = claim["metadata"]["uid"]
    return uid_of


def allocate(store: IpamStore, uid: str, name: str | None) -> None:
    ref = ClaimReference(uid, "team", name) if name else None  # None: gen1, UID only
    store.allocate(Owner("local-ipam", "eth1", uid), RANGES, claim=ref)


def held(store: IpamStore) -> set[str]:
    return {a.owner.claim_uid for a in store.list()}


def others(kube: KubernetesEmulator) -> dict[str, dict[str, int]]:
    """Requests of every resource but the pods watch (the informer's own)."""
    found: dict[str, dict[str, int]] = {}
    for resource, verbs in kube.served()["requests"].items():
        rest = {v: n for v, n in verbs.items() if n and not (resource == "pods" and v == "watch")}
        if rest:
            found[resource] = rest
    return found


def test_a_pod_names_its_claims_and_only_a_running_pod_is_live() -> None:
    pod = {
        "metadata": {"namespace": "team", "name": "p"},
        "spec": {"resourceClaims": [{"name": "a", "resourceClaimName": "direct"}, {"name": "b"}]},
        "status": {
            "phase": "Running",
            "resourceClaimStatuses": [{"name": "b", "resourceClaimName": "p-b-x7k2q"}],
        },
    }
    assert pod_claims(pod) == {"team/direct", "team/p-b-x7k2q"}
    assert pod_is_live(pod)
    assert not pod_is_live({**pod, "status": {"phase": "Succeeded"}})
    assert not pod_is_live({**pod, "status": {"phase": "Failed"}})
    assert not pod_is_live({**pod, "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})


def test_steady_state_runs_ask_the_api_nothing_but_the_pods_watch(
    kube: KubernetesEmulator, client: KubeClient, views: list[NodeClaims]
) -> None:
    store = MemoryStore(clock=lambda: HOUR_AGO)
    for i in range(10):  # half sent by gen2 (named), half by gen1 (UID only)
        uid = claimed_pod(kube, f"c{i}")
        allocate(store, uid, f"c{i}" if i % 2 else None)
    for i in range(20):  # another node's pods and claims: never read by this one
        claimed_pod(kube, f"theirs{i}", node="node-b")
    view = started(views, client)
    wait_until(lambda: all(view.cached(u) for u in held(store)), "every claim resolved")
    assert view.stats.claim_gets == 10  # one GET per claim name, none for node-b's
    first = reclaim(store, view, grace=GRACE)
    assert first.freed == [] and len(held(store)) == 10
    # The gen1 rows learned their names: from now on they are proven by name.
    assert all(a.claim is not None and a.claim.qualified_name for a in store.list())
    kube.reset_calls()
    for _ in range(5):
        result = reclaim(store, view, grace=GRACE)
        assert result.freed == [] and result.checked == 10
    assert others(kube) == {}  # no GET, no list, not even the cluster check
    assert kube.calls("resourceclaims") == {}
    assert view.stats.judged_from_view >= 50 and view.stats.claim_lists == 0


def test_a_deleted_pod_and_claim_are_freed_at_the_next_run_uid_only_included(
    kube: KubernetesEmulator, client: KubeClient, views: list[NodeClaims], tmp_path: Path
) -> None:
    store = SqliteStore(str(tmp_path / "ipam.db"))
    try:
        uids = {name: claimed_pod(kube, name) for name in ("keep", "named", "gen1")}
        allocate(store, uids["keep"], None)
        allocate(store, uids["named"], "named")
        allocate(store, uids["gen1"], None)
        with store._transaction() as conn:  # allocated an hour ago: past the grace
            conn.execute("UPDATE allocations SET created_at = ?", (HOUR_AGO.timestamp(),))
        view = started(views, client)
        wait_until(lambda: all(view.cached(u) for u in uids.values()), "every claim resolved")
        for name in ("named", "gen1"):
            kube.delete_pod("team", f"{name}-pod")
            kube.delete_claim("team", name)
        wait_until(lambda: view.used() == {"team/keep"}, "the pods' deletion seen")
        kube.reset_calls()
        result = reclaim(store, view, grace=GRACE)
        assert {a.owner.claim_uid for a in result.freed} == {uids["named"], uids["gen1"]}
        assert held(store) == {uids["keep"]}
        # Two GETs proved them gone; the live claim asked nothing; nothing was listed.
        assert kube.calls("resourceclaims") == {"get": 2}
        (row,) = store.list()  # the gen1 row kept learned its name
        assert row.claim is not None and row.claim.qualified_name == "team/keep"
    finally:
        store.close()


def test_a_claim_whose_pod_is_gone_but_which_lives_is_kept(
    kube: KubernetesEmulator, client: KubeClient, views: list[NodeClaims]
) -> None:
    store = MemoryStore(clock=lambda: HOUR_AGO)
    uid = claimed_pod(kube, "shared")
    allocate(store, uid, None)
    view = started(views, client)
    wait_until(lambda: view.cached(uid) is not None, "the claim resolved")
    kube.delete_pod("team", "shared-pod")  # the claim outlives its pod
    wait_until(lambda: view.used() == frozenset(), "the pod's deletion seen")
    kube.reset_calls()
    for _ in range(2):
        result = reclaim(store, view, grace=GRACE)
        assert result.freed == [] and held(store) == {uid}
    assert kube.calls("resourceclaims") == {"get": 2}  # a GET shows it, each run


def test_a_uid_the_view_never_saw_falls_back_to_one_list_from_the_watch_cache(
    kube: KubernetesEmulator, client: KubeClient, views: list[NodeClaims]
) -> None:
    store = MemoryStore(clock=lambda: HOUR_AGO)
    gone = kube.add_claim("team", "old")["metadata"]["uid"]  # deleted before it was seen
    live = kube.add_claim("team", "elsewhere")["metadata"]["uid"]  # on no pod of this node
    here = claimed_pod(kube, "here")
    for uid in (gone, live, here):
        allocate(store, uid, None)
    kube.delete_claim("team", "old")
    view = started(views, client)
    wait_until(lambda: view.cached(here) is not None, "the pod's claim resolved")
    kube.reset_calls()
    result = reclaim(store, view, grace=GRACE)
    assert {a.owner.claim_uid for a in result.freed} == {gone}
    claims = kube.calls("resourceclaims")
    assert claims.get("list") == 1 and "list-consistent" not in claims  # the watch cache
    # The list named the claim on no pod of this node: it is proven by GET from now on.
    names = {a.owner.claim_uid: a.claim.qualified_name for a in store.list() if a.claim}
    assert names == {live: "team/elsewhere", here: "team/here"}
    kube.reset_calls()
    assert reclaim(store, view, grace=GRACE).freed == []
    assert kube.calls("resourceclaims") == {"get": 1}  # "elsewhere", by name; no list
    # A new UID-only leak the view never saw waits for the next list (an hour later).
    late = kube.add_claim("team", "late")["metadata"]["uid"]
    allocate(store, late, None)
    kube.delete_claim("team", "late")
    kube.reset_calls()
    assert reclaim(store, view, grace=GRACE).freed == [] and late in held(store)
    assert "list" not in kube.calls("resourceclaims")


def test_an_api_failure_frees_nothing(
    kube: KubernetesEmulator, client: KubeClient, views: list[NodeClaims]
) -> None:
    store = MemoryStore(clock=lambda: HOUR_AGO)
    alive = claimed_pod(kube, "alive")  # a live claim: proof of the store's cluster
    gone = claimed_pod(kube, "gone")
    never = kube.add_claim("team", "never")["metadata"]["uid"]
    for uid in (alive, gone, never):
        allocate(store, uid, None)
    kube.delete_claim("team", "never")
    view = started(views, client)
    wait_until(lambda: view.cached(gone) and view.cached(alive), "the claims resolved")
    kube.delete_pod("team", "gone-pod")
    kube.delete_claim("team", "gone")
    wait_until(lambda: view.used() == {"team/alive"}, "the pod's deletion seen")
    kube.fail(503, times=None, verb="get", resource="resourceclaims")
    kube.fail(503, times=None, verb="list", resource="resourceclaims")
    with pytest.raises(NothingProven, match="503"):
        reclaim(store, view, grace=GRACE)
    assert held(store) == {alive, gone, never}
    kube.clear_faults()
    view._next_list = 0.0  # the failed list is retried sooner than the hour; now, here
    assert {a.owner.claim_uid for a in reclaim(store, view, grace=GRACE).freed} == {gone, never}


def test_a_cut_or_expired_watch_frees_nothing(
    kube: KubernetesEmulator, client: KubeClient, views: list[NodeClaims]
) -> None:
    store = MemoryStore(clock=lambda: HOUR_AGO)
    uids = [claimed_pod(kube, f"w{i}") for i in range(4)]
    for uid in uids:
        allocate(store, uid, None)
    view = started(views, client)
    informer = view.informer
    assert informer is not None
    wait_until(lambda: all(view.cached(u) for u in uids), "every claim resolved")
    assert reclaim(store, view, grace=GRACE).freed == []
    # The watch is cut and the history dropped: the informer relists (410).
    kube.delete_pod("team", "w0-pod")  # its claim lives on
    # a change this watch does not see moves the API's RV past the watch's last one, so
    # the history dropped at that RV is history the watch would need: 410 on resume
    kube.add_pod("elsewhere", "other-pod", node="node-z")
    kube.compact()
    kube.cut_watches()
    for _ in range(3):  # runs while the view may be between streams
        assert reclaim(store, view, grace=GRACE).freed == []
    wait_until(lambda: informer.stats.relists >= 1, "the relist after 410")
    wait_until(lambda: "team/w0" not in view.used(), "the relist's DELETED")
    assert reclaim(store, view, grace=GRACE).freed == []
    assert held(store) == set(uids)


def test_ipam_gc_with_a_node_name_lists_this_nodes_pods_once(
    kube: KubernetesEmulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from dranet_cloud.cli.ipam_cmd import register

    def run(*argv: str) -> int:
        top = argparse.ArgumentParser(prog="dranet-cloud")
        register(top.add_subparsers(dest="command", required=True))
        args = top.parse_args(["ipam", "gc", "--ipam-db", str(path), "--kubernetes", *argv])
        code: int = args.func(args)
        return code

    path = tmp_path / "ipam.db"
    config = str(kube.write_kubeconfig())
    with SqliteStore(str(path), clock=lambda: HOUR_AGO) as store:
        in_use = [claimed_pod(kube, f"u{i}") for i in range(3)]
        for uid in in_use:
            allocate(store, uid, None)
        named = claimed_pod(kube, "named")
        allocate(store, named, "named")
    kube.delete_pod("team", "named-pod")
    kube.delete_claim("team", "named")
    kube.reset_calls()
    assert run("--kubeconfig", config, "--node-name", NODE, "-o", "json") == 0
    assert "freed 1 of 4" in capsys.readouterr().err
    assert kube.calls("pods") == {"list": 1}  # this node's pods, once, from the watch cache
    assert kube.calls("resourceclaims") == {"get": 4}  # three names resolved, one proven gone
    with SqliteStore(str(path), clock=lambda: HOUR_AGO) as store:  # gen1 rows learned names
        assert {a.claim.qualified_name for a in store.list() if a.claim} == {
            "team/u0",
            "team/u1",
            "team/u2",
        }
        early = kube.add_claim("team", "early")["metadata"]["uid"]  # a UID no pod names
        allocate(store, early, None)
    kube.delete_claim("team", "early")
    kube.reset_calls()
    assert run("--kubeconfig", config, "--node-name", NODE) == 0
    assert "freed 1 of 4" in capsys.readouterr().err
    claims = kube.calls("resourceclaims")
    assert claims["list"] == 1 and "list-consistent" not in claims  # the UID-only fall-back


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_stores_record_names_only_on_rows_that_know_just_the_uid(kind: str, tmp_path: Path) -> None:
    store: IpamStore = SqliteStore(str(tmp_path / "ipam.db")) if kind == "sqlite" else MemoryStore()
    try:
        allocate(store, "u1", None)
        allocate(store, "u2", "given")
        names = {"u1": ("team", "learned"), "u2": ("team", "other"), "u3": ("x", "y")}
        assert store.record_claim_names(names) == 1  # type: ignore[attr-defined]
        got = {a.owner.claim_uid: a.claim.qualified_name for a in store.list() if a.claim}
        assert got == {"u1": "team/learned", "u2": "team/given"}  # a recorded name stays
        assert store.record_claim_names(names) == 0  # type: ignore[attr-defined]
    finally:
        store.close()


def test_a_claim_the_api_did_not_show_yet_is_asked_again_after_its_back_off(
    kube: KubernetesEmulator,
    client: KubeClient,
    views: list[NodeClaims],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The resolver sleeps until a retry is due (no one-second timer), and the retry comes."""
    import dranet_cloud.ipam.node_claims as node_claims

    monkeypatch.setattr(node_claims, "RETRY_FIRST", 0.3)
    # The pod names its claim before the claim exists (the API shows it later).
    kube.add_pod("team", "late-pod", node=NODE, claims=(("nic", "late"),))
    view = started(views, client)
    wait_until(lambda: kube.calls("resourceclaims").get("get", 0) >= 1, "the first GET (404)")
    assert view.cached("late-uid") is None
    kube.add_claim("team", "late", uid="late-uid", node=NODE)
    wait_until(lambda: view.cached("late-uid") is not None, "the retry to resolve the claim")
    gets = kube.calls("resourceclaims").get("get", 0)
    assert gets >= 2
    # Resolved: no more GETs of it, however long the resolver sleeps.
    time.sleep(1.0)
    assert kube.calls("resourceclaims").get("get", 0) == gets
