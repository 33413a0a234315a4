"""The Kubernetes emulator's watch, history, Leases, Pods and counters, over real HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from dranet_cloud.testing.kube_faults import parse_api_faults
from dranet_cloud.testing.kubernetes import CALLS_PATH, KubernetesEmulator

IP = "/apis/networking.k8s.io/v1/ipaddresses"
PODS = "/api/v1/pods"
NODES = "/api/v1/nodes"
CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
META = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
META_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


@pytest.fixture
def api() -> Iterator[tuple[KubernetesEmulator, httpx.Client]]:
    with KubernetesEmulator(bookmark_interval=0.2) as emu:
        headers = {"Authorization": f"Bearer {emu.token}"}
        with httpx.Client(base_url=emu.url, headers=headers, timeout=10) as client:
            yield emu, client


def watch(
    client: httpx.Client,
    path: str,
    *,
    until: Callable[[list[dict[str, Any]]], bool] = lambda events: False,
    headers: dict[str, str] | None = None,
    **params: str,
) -> list[dict[str, Any]]:
    """The events of one watch, read until ``until(events)`` or the stream's end."""
    events: list[dict[str, Any]] = []
    with client.stream(
        "GET", path, params={"watch": "true", **params}, headers=headers or {}
    ) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"] == "application/json"
        assert stream.headers["transfer-encoding"] == "chunked"
        for line in stream.iter_lines():
            if line:
                events.append(json.loads(line))
                if until(events):
                    break
    return events


def when_watching(kube: KubernetesEmulator, resource: str, *steps: Callable[[], object]) -> None:
    def run() -> None:
        deadline = threading.Event()
        for _ in range(500):
            if kube.watches_open(resource):
                break
            deadline.wait(0.01)
        for step in steps:
            step()

    threading.Thread(target=run, daemon=True).start()


def names(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]


def test_every_object_has_a_global_resource_version_and_changes_are_ordered(
    api: tuple[KubernetesEmulator, httpx.Client],
) -> None:
    kube, client = api
    a = kube.add_node("n1")
    b = kube.add_ip_address("10.0.0.1")
    c = kube.add_claim("ns", "c1")
    rvs = [int(o["metadata"]["resourceVersion"]) for o in (a, b, c)]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3  # one counter for every resource
    listed = client.get(IP).json()
    rv = listed["metadata"]["resourceVersion"]
    assert int(rv) == rvs[-1]

    when_watching(
        kube,
        "ipaddresses",
        lambda: kube.add_ip_address("10.0.0.2"),
        lambda: kube.add_node("n2"),  # another resource: not in this watch
        lambda: kube.add_ip_address("10.0.0.2", labels={"x": "y"}),  # an update
        lambda: kube.delete_ip_address("10.0.0.1"),
    )
    events = watch(client, IP, resourceVersion=rv, until=lambda ev: len(ev) == 3)
    assert names(events) == [
        ("ADDED", "10.0.0.2"),
        ("MODIFIED", "10.0.0.2"),
        ("DELETED", "10.0.0.1"),
    ]
    seen = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert seen == sorted(seen) and seen[0] > int(rv)
    assert events[0]["object"]["kind"] == "IPAddress"
    assert events[1]["object"]["metadata"]["labels"] == {"x": "y"}
    # the DELETED object carries the deletion's RV, after the update's
    assert seen[2] > seen[1]


def test_watch_from_an_old_rv_replays_the_history_then_follows(
    api: tuple[KubernetesEmulator, httpx.Client],
) -> None:
    kube, client = api
    rv = client.get(NODES).json()["metadata"]["resourceVersion"]
    kube.add_node("n1")
    kube.add_node("n2")
    kube.delete_node("n1")
    when_watching(kube, "nodes", lambda: kube.add_node("n3"))
    events = watch(client, NODES, resourceVersion=rv, until=lambda ev: len(ev) == 4)
    assert names(events) == [("ADDED", "n1"), ("ADDED", "n2"), ("DELETED", "n1"), ("ADDED", "n3")]


def test_watch_without_rv_starts_with_an_added_per_object(
    api: tuple[KubernetesEmulator, httpx.Client],
) -> None:
    kube, client = api
    kube.add_claim("a", "c1")
    kube.add_claim("b", "c2")
    for rv in ("", "0"):
        events = watch(client, CLAIMS, resourceVersion=rv, until=lambda ev: len(ev) == 2)
        assert sorted(names(events)) == [("ADDED", "c1"), ("ADDED", "c2")]
    one_ns = watch(
        client,
        "/apis/resource.k8s.io/v1/namespaces/b/resourceclaims",
        until=lambda ev: len(ev) == 1,
    )
    assert names(one_ns) == [("ADDED", "c2")]


def test_bookmarks_carry_the_current_rv_and_timeout_ends_the_stream(
    api: tuple[KubernetesEmulator, httpx.Client],
) -> None:
    kube, client = api
    rv = kube.resource_version
    kube.add_node("elsewhere")  # a change of another resource moves the RV too
    events = watch(client, PODS, resourceVersion=rv, allowWatchBookmarks="true", timeoutSeconds="1")
    # the stream ended by itself (timeoutSeconds) after several bookmarks (0.2 s apart)
    assert len(events) >= 2 and {e["type"] for e in events} == {"BOOKMARK"}
    mark = events[-1]["object"]
    assert mark["kind"] == "Pod" and mark["apiVersion"] == "v1"
    assert mark["metadata"]["resourceVersion"] == kube.resource_version
    assert not watch(client, PODS, resourceVersion=rv, timeoutSeconds="1")  # no bookmarks asked
    assert kube.watches_open() == 0


def test_an_rv_older_than_the_window_is_expired() -> None:
    with KubernetesEmulator(watch_window=3) as kube:
        client = httpx.Client(base_url=kube.url, headers={"Authorization": f"Bearer {kube.token}"})
        old = kube.resource_version
        for i in range(8):
            kube.add_ip_address(f"10.0.0.{i + 1}")
        events = watch(client, IP, resourceVersion=old)
        assert len(events) == 1 and events[0]["type"] == "ERROR"
        status = events[0]["object"]
        assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
        recent = str(int(kube.resource_version) - 2)
        assert names(watch(client, IP, resourceVersion=recent, until=lambda ev: len(ev) == 2)) == [
            ("ADDED", "10.0.0.7"),
            ("ADDED", "10.0.0.8"),
        ]
        kube.compact()
        assert watch(client, IP, resourceVersion=recent)[0]["object"]["code"] == 410
        client.close()


def test_selectors_filter_lists_and_watches(api: tuple[KubernetesEmulator, httpx.Client]) -> None:
    kube, client = api
    kube.add_pod("ns", "p1", node="n1", claims=[("nic", "c1")])
    kube.add_pod("ns", "p2", node="n2")
    kube.add_pod("other", "p3", node="n1")
    mine = client.get(PODS, params={"fieldSelector": "spec.nodeName=n1"}).json()
    assert [p["metadata"]["name"] for p in mine["items"]] == ["p1", "p3"]
    assert mine["items"][0]["spec"]["resourceClaims"] == [
        {"name": "nic", "resourceClaimName": "c1"}
    ]
    assert mine["items"][0]["status"]["resourceClaimStatuses"] == [
        {"name": "nic", "resourceClaimName": "c1"}
    ]
    both = client.get(
        "/api/v1/namespaces/ns/pods", params={"fieldSelector": "spec.nodeName!=n2"}
    ).json()
    assert [p["metadata"]["name"] for p in both["items"]] == ["p1"]
    bad = client.get(PODS, params={"fieldSelector": "spec.hostname=x"})
    assert bad.status_code == 400 and "field label not supported" in bad.json()["message"]
    bad = client.get(IP, params={"fieldSelector": "spec.nodeName=x"})
    assert bad.status_code == 400

    rv = mine["metadata"]["resourceVersion"]
    when_watching(
        kube,
        "pods",
        lambda: kube.add_pod("ns", "p4", node="n2"),  # another node: not seen
        lambda: kube.add_pod("ns", "p5", node="n1", labels={"app": "x"}),
        lambda: kube.delete_pod("ns", "p2"),  # another node: not seen
        lambda: kube.delete_pod("other", "p3"),
    )
    events = watch(
        client,
        PODS,
        resourceVersion=rv,
        fieldSelector="spec.nodeName=n1",
        until=lambda e: len(e) == 2,
    )
    assert names(events) == [("ADDED", "p5"), ("DELETED", "p3")]

    rv = kube.resource_version
    when_watching(
        kube,
        "pods",
        lambda: kube.add_pod("ns", "p5", node="n1", labels={"app": "y"}),  # stops matching
        lambda: kube.add_pod("ns", "p4", node="n2", labels={"app": "x"}),  # starts matching
        lambda: kube.add_pod("ns", "p6", node="n2", labels={"app": "x"}),
    )
    events = watch(
        client, PODS, resourceVersion=rv, labelSelector="app=x", until=lambda e: len(e) == 3
    )
    assert names(events) == [("DELETED", "p5"), ("ADDED", "p4"), ("ADDED", "p6")]
    assert events[0]["object"]["metadata"]["labels"] == {"app": "x"}  # its last matching state


def test_leases_have_optimistic_concurrency(api: tuple[KubernetesEmulator, httpx.Client]) -> None:
    kube, client = api
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "reclaimer"},
        "spec": {"holderIdentity": "node-a", "leaseDurationSeconds": 15},
    }
    made = client.post(LEASES, json=body)
    assert made.status_code == 201
    lease = made.json()
    assert (
        lease["metadata"]["namespace"] == "kube-system"
        and lease["spec"]["holderIdentity"] == "node-a"
    )
    taken = client.post(LEASES, json=body)
    assert taken.status_code == 409 and taken.json()["reason"] == "AlreadyExists"

    lease["spec"]["holderIdentity"] = "node-b"
    renewed = client.put(f"{LEASES}/reclaimer", json=lease)
    assert renewed.status_code == 200
    assert renewed.json()["metadata"]["uid"] == lease["metadata"]["uid"]
    stale = dict(lease, spec={"holderIdentity": "node-c"})  # still the first RV
    conflict = client.put(f"{LEASES}/reclaimer", json=stale)
    assert conflict.status_code == 409 and conflict.json()["reason"] == "Conflict"
    assert client.get(f"{LEASES}/reclaimer").json()["spec"]["holderIdentity"] == "node-b"
    blind = dict(stale, metadata={"name": "reclaimer"})  # no RV: unconditional
    assert client.put(f"{LEASES}/reclaimer", json=blind).status_code == 200
    assert kube.leases()[0]["spec"] == {"holderIdentity": "node-c"}
    assert client.put(f"{LEASES}/other", json=blind).status_code == 400  # name differs
    assert (
        client.put(f"{LEASES}/nope", json=dict(blind, metadata={"name": "nope"})).status_code == 404
    )
    listed = client.get(LEASES).json()
    assert listed["kind"] == "LeaseList" and len(listed["items"]) == 1
    assert client.delete(f"{LEASES}/reclaimer").status_code == 200
    assert client.get(f"{LEASES}/reclaimer").status_code == 404
    events = watch(
        client, LEASES, resourceVersion=lease["metadata"]["resourceVersion"], timeoutSeconds="1"
    )
    assert [e["type"] for e in events] == ["MODIFIED", "MODIFIED", "DELETED"]
    assert kube.calls("leases") == {
        "create": 2,
        "update": 5,
        "get": 2,
        "list": 1,
        "list-consistent": 1,
        "delete": 1,
        "watch": 1,
    }


def test_counters_count_requests_and_objects(api: tuple[KubernetesEmulator, httpx.Client]) -> None:
    kube, client = api
    for i in range(5):
        kube.add_node(f"n{i}")
    client.get(NODES)  # consistent: no resourceVersion
    page = client.get(NODES, params={"limit": "2"}).json()
    client.get(NODES, params={"limit": "2", "continue": page["metadata"]["continue"]})
    client.get(NODES, params={"resourceVersion": "0"})  # from the watch cache
    client.get(f"{NODES}/n1")
    client.get(f"{NODES}/missing")
    events = watch(
        client, NODES, resourceVersion="0", allowWatchBookmarks="true", timeoutSeconds="1"
    )
    bookmarks = sum(e["type"] == "BOOKMARK" for e in events)
    assert bookmarks >= 1 and len(events) == 5 + bookmarks
    assert kube.calls("nodes") == {"list": 4, "list-consistent": 2, "get": 2, "watch": 1}
    assert kube.objects("nodes") == {
        "list": 5 + 2 + 2 + 5,
        "list-consistent": 5 + 2,
        "get": 1,
        "watch": 5 + bookmarks,
    }
    doc = client.get(CALLS_PATH).json()
    assert doc["requests"]["nodes"]["watch"] == 1 and doc["objects"]["nodes"]["get"] == 1
    assert doc["watches_open"] == {}

    opened = threading.Event()
    with client.stream("GET", PODS, params={"watch": "1"}) as stream:
        assert stream.status_code == 200
        for _ in range(500):
            if client.get(CALLS_PATH).json()["watches_open"] == {"pods": 1}:
                opened.set()
                break
            threading.Event().wait(0.01)
    assert opened.is_set()
    assert client.delete(CALLS_PATH).json()["requests"] == {}
    assert kube.calls("nodes") == {} and kube.objects("nodes") == {}


def test_cut_watches_resets_every_open_stream(api: tuple[KubernetesEmulator, httpx.Client]) -> None:
    kube, client = api
    kube.add_node("n1")
    when_watching(kube, "nodes", kube.cut_watches)
    with pytest.raises(httpx.HTTPError):
        watch(client, NODES, resourceVersion="0")  # the stream breaks, no clean end
    assert kube.watches_open() == 0

    assert parse_api_faults("cut-watches=0.3").cut_watches == 0.3
    with pytest.raises(ValueError, match="cut-watches"):
        parse_api_faults("cut-watches=0")
    kube.apply_api_faults("cut-watches=0.3")
    for _ in range(2):  # cut again and again
        with pytest.raises(httpx.HTTPError):
            watch(client, NODES, resourceVersion="0", timeoutSeconds="30")
    kube.clear_faults()
    assert len(watch(client, NODES, resourceVersion="0", timeoutSeconds="1")) == 1


def test_a_watch_that_does_not_read_is_cut_off() -> None:
    with KubernetesEmulator(watch_queue_limit=5) as kube:
        headers = {"Authorization": f"Bearer {kube.token}"}
        with httpx.Client(base_url=kube.url, headers=headers, timeout=10) as client:
            rv = kube.resource_version
            params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": "30"}
            with client.stream("GET", NODES, params=params) as stream:
                assert stream.status_code == 200
                # The client reads nothing while 200 large events are committed: the
                # socket's buffers fill (about 13 MB against a few MB), then the queue.
                big = "x" * (64 << 10)
                with kube._lock:
                    for i in range(200):
                        node = {
                            "kind": "Node",
                            "apiVersion": "v1",
                            "metadata": {"name": f"n{i}", "annotations": {"pad": big}},
                        }
                        kube._commit("nodes", ("", f"n{i}"), node)
                events = [json.loads(line) for line in stream.iter_lines() if line]
            # the stream ended (not at the 30 s deadline) without the events it could not hold,
            # and what it did send (none, when the flood came before the stream slept) is
            # whole, in order
            assert len(events) < 200
            assert names(events) == [("ADDED", f"n{i}") for i in range(len(events))]
            assert kube.watches_open() == 0


def test_events_sent_while_the_watch_sleeps_and_after_it_wakes_keep_their_order(
    api: tuple[KubernetesEmulator, httpx.Client],
) -> None:
    """Events the writer sends straight to the socket and those the stream's thread
    sends (after a bookmark woke it, or a short send) arrive once each, in order."""
    kube, client = api
    rv = kube.resource_version
    steps: list[Callable[[], object]] = []
    for i in range(60):
        steps.append(lambda i=i: kube.add_node(f"n{i}"))
        if i % 20 == 19:
            steps.append(lambda: threading.Event().wait(0.3))  # a bookmark falls between
    when_watching(kube, "nodes", *steps)
    events = watch(
        client,
        NODES,
        until=lambda ev: sum(e["type"] == "ADDED" for e in ev) >= 60,
        resourceVersion=rv,
        allowWatchBookmarks="true",
        timeoutSeconds="20",
    )
    added = [n for t, n in names(events) if t == "ADDED"]
    assert added == [f"n{i}" for i in range(60)]
    assert any(e["type"] == "BOOKMARK" for e in events)
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs)


def test_metadata_only_answers(api: tuple[KubernetesEmulator, httpx.Client]) -> None:
    kube, client = api
    kube.add_pod("ns", "p1", node="n1", labels={"app": "x"})
    listed = client.get(PODS, headers={"Accept": META_LIST}).json()
    assert (listed["kind"], listed["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    item = listed["items"][0]
    assert item["kind"] == "PartialObjectMetadata" and set(item) == {
        "kind",
        "apiVersion",
        "metadata",
    }
    assert item["metadata"]["labels"] == {"app": "x"}
    one = client.get("/api/v1/namespaces/ns/pods/p1", headers={"Accept": META}).json()
    assert one["kind"] == "PartialObjectMetadata" and "spec" not in one
    full = client.get("/api/v1/namespaces/ns/pods/p1", headers={"Accept": "application/json"})
    assert full.json()["kind"] == "Pod" and full.json()["spec"]["nodeName"] == "n1"
    when_watching(kube, "pods", lambda: kube.add_pod("ns", "p2", node="n1"))
    events = watch(client, PODS, headers={"Accept": META}, until=lambda e: len(e) == 2)
    assert names(events) == [("ADDED", "p1"), ("ADDED", "p2")]
    assert all(set(e["object"]) == {"kind", "apiVersion", "metadata"} for e in events)


def test_put_and_the_delete_helpers_emit_events(
    api: tuple[KubernetesEmulator, httpx.Client],
) -> None:
    kube, client = api
    rv = kube.resource_version
    first = kube.add_claim("ns", "c1", uid="u1")
    kube.put({**first, "status": {}})  # same UID: an update
    kube.add_claim("ns", "c1", uid="u2")  # another UID: deleted and created again
    kube.delete_claim("ns", "c1")
    events = watch(client, CLAIMS, resourceVersion=rv, timeoutSeconds="1")
    assert [(e["type"], e["object"]["metadata"]["uid"]) for e in events] == [
        ("ADDED", "u1"),
        ("MODIFIED", "u1"),
        ("DELETED", "u1"),
        ("ADDED", "u2"),
        ("DELETED", "u2"),
    ]


def test_emulate_kubernetes_bookmark_interval(capsys: pytest.CaptureFixture[str]) -> None:
    from dranet_cloud.cli.main import main

    assert main(["emulate", "gce", "--bookmark-interval", "1"]) == 2
    assert "--bookmark-interval is for `emulate kubernetes` only" in capsys.readouterr().err
    cmd = [sys.executable, "-m", "dranet_cloud.cli.main", "emulate", "kubernetes"]
    proc = subprocess.Popen([*cmd, "--bookmark-interval", "0.2"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())  # the process's own start is the deadline
        with open(ready["env"]["KUBECONFIG"], encoding="utf-8") as f:
            token = json.load(f)["users"][0]["user"]["token"]
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=ready["url"], headers=headers, timeout=10) as client:
            events = watch(
                client, PODS, resourceVersion="0", allowWatchBookmarks="true", timeoutSeconds="1"
            )
            assert len(events) >= 2 and {e["type"] for e in events} == {"BOOKMARK"}
            served = client.get(CALLS_PATH).json()
            assert served["objects"]["pods"]["watch"] == len(events)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_lost_lease_update_reply_is_committed(
    api: tuple[KubernetesEmulator, httpx.Client],
) -> None:
    kube, client = api
    made = client.post(LEASES, json={"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}})
    lease = made.json()
    kube.apply_api_faults("lose-reply=update;fail=watch:503")
    lease["spec"]["holderIdentity"] = "b"
    with pytest.raises(httpx.HTTPError):
        client.put(f"{LEASES}/l", json=lease)
    assert kube.leases()[0]["spec"]["holderIdentity"] == "b"  # the write happened
    assert client.get(LEASES, params={"watch": "true"}).status_code == 503
    assert kube.calls("leases")["update"] == 1


def test_fan_out_touches_only_the_buckets_an_event_names() -> None:
    from dranet_cloud.testing.kube_rules import FieldSelector, LabelSelector
    from dranet_cloud.testing.kube_watch import WatchEvent, WatchHub

    fields = ("metadata.name", "metadata.namespace", "spec.nodeName")
    hub = WatchHub(threading.Lock(), window=10, queue_limit=10)
    with hub.lock:
        per_node = {
            n: hub.open(
                "pods",
                namespace=None,
                labels=LabelSelector(""),
                fields=FieldSelector(f"spec.nodeName={n}", fields),
            )
            for n in ("n1", "n2", "n3")
        }
        everyone = hub.open(
            "pods", namespace=None, labels=LabelSelector(""), fields=FieldSelector("", fields)
        )
        nodes = hub.open(
            "nodes", namespace=None, labels=LabelSelector(""), fields=FieldSelector("", fields)
        )
        old = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}}
        new = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n2"}}
        moved = WatchEvent("MODIFIED", "pods", "ns", "p", new, "{}", 5, old)
        buckets = hub._buckets["pods"]
        assert set(hub._candidates(moved, buckets)) == {per_node["n1"], per_node["n2"], everyone}
        hub.record(moved)
        assert [(k, prev) for k, _, prev in per_node["n1"].queue] == [("DELETED", True)]
        assert [k for k, _, _ in per_node["n2"].queue] == ["ADDED"]
        assert [k for k, _, _ in everyone.queue] == ["MODIFIED"]
        assert not per_node["n3"].queue and not nodes.queue
        assert hub.open_counts() == {"nodes": 1, "pods": 4}
        for w in (*per_node.values(), everyone, nodes):
            hub.close(w)
        assert hub.open_counts() == {} and not hub._dims["pods"]


def test_a_set_selector_watch_is_filed_under_each_of_its_values() -> None:
    """``block in (a,b)`` watchers are indexed per value: an event of block ``c``
    never reaches them, and one that moves an object across their set is the
    ADDED/DELETED the API server's watch cache sends."""
    from dranet_cloud.testing.kube_rules import FieldSelector, LabelSelector
    from dranet_cloud.testing.kube_watch import WatchEvent, WatchHub

    hub = WatchHub(threading.Lock(), window=100, queue_limit=100)

    def ip(block: str | None) -> dict[str, Any]:
        labels = {"block": block} if block is not None else {}
        return {"metadata": {"name": "10.0.0.1", "labels": labels}}

    with hub.lock:
        ab, c, other = (
            hub.open(
                "ipaddresses",
                namespace=None,
                labels=LabelSelector(text),
                fields=FieldSelector(""),
            )
            for text in ("block in (a, b)", "block in (c),role", "block notin (a)")
        )
        buckets = hub._buckets["ipaddresses"]
        assert set(buckets) == {("label", "block", v) for v in "abc"} | {None}
        steps = [
            WatchEvent("ADDED", "ipaddresses", "", "10.0.0.1", ip("a"), "{}", 1),
            WatchEvent("MODIFIED", "ipaddresses", "", "10.0.0.1", ip("b"), "{}", 2, ip("a")),
            WatchEvent("MODIFIED", "ipaddresses", "", "10.0.0.1", ip("c"), "{}", 3, ip("b")),
            WatchEvent("MODIFIED", "ipaddresses", "", "10.0.0.1", ip(None), "{}", 4, ip("c")),
            WatchEvent("MODIFIED", "ipaddresses", "", "10.0.0.1", ip("a"), "{}", 5, ip(None)),
            WatchEvent("DELETED", "ipaddresses", "", "10.0.0.1", ip("a"), "{}", 6),
        ]
        reached = [set(hub._candidates(e, buckets)) for e in steps]
        assert reached == [
            {ab, other},
            {ab, other},
            {ab, c, other},  # b -> c
            {c, other},  # c -> no label
            {ab, other},
            {ab, other},
        ]
        for e in steps:
            hub.record(e)
        seen = {w: [(k, e.rv, prev) for k, e, prev in w.queue] for w in (ab, c, other)}
        assert seen[ab] == [
            ("ADDED", 1, False),
            ("MODIFIED", 2, False),
            ("DELETED", 3, True),  # moved out of its set: its last state in it
            ("ADDED", 5, False),
            ("DELETED", 6, False),
        ]
        assert seen[c] == []  # "role" is required too: never matched
        assert seen[other] == [
            ("ADDED", 2, False),
            ("MODIFIED", 3, False),
            ("MODIFIED", 4, False),
            ("DELETED", 5, True),
        ]
        for w in (ab, c, other):
            hub.close(w)
            hub.close(w)  # twice: a no-op
        assert not hub._buckets["ipaddresses"] and not hub._dims["ipaddresses"]
        assert hub.open_counts() == {}


def test_a_set_selector_watch_over_http_sees_objects_enter_and_leave_its_set(
    api: tuple[KubernetesEmulator, httpx.Client],
) -> None:
    kube, client = api
    kube.add_ip_address("10.0.0.1", labels={"block": "a"})
    rv = kube.resource_version
    when_watching(
        kube,
        "ipaddresses",
        lambda: kube.add_ip_address("10.0.0.2", labels={"block": "c"}),  # not its set
        lambda: kube.add_ip_address("10.0.0.3", labels={"block": "b"}),
        lambda: kube.add_ip_address("10.0.0.1", labels={"block": "c"}),  # leaves
        lambda: kube.add_ip_address("10.0.0.2", labels={"block": "a"}),  # enters
        lambda: kube.delete_ip_address("10.0.0.1"),  # not in the set any more
        lambda: kube.delete_ip_address("10.0.0.3"),
    )
    events = watch(
        client,
        IP,
        resourceVersion=rv,
        labelSelector="block in (a,b)",
        until=lambda e: len(e) == 4,
    )
    assert names(events) == [
        ("ADDED", "10.0.0.3"),
        ("DELETED", "10.0.0.1"),
        ("ADDED", "10.0.0.2"),
        ("DELETED", "10.0.0.3"),
    ]
    left = events[1]["object"]["metadata"]
    assert left["labels"] == {"block": "a"}  # its last state in the set, at the move's RV
    assert int(left["resourceVersion"]) > int(events[0]["object"]["metadata"]["resourceVersion"])
    outside = watch(
        client, IP, labelSelector="block in (x)", timeoutSeconds="1", allowWatchBookmarks="false"
    )
    assert outside == []  # nothing stored in block x: no ADDED, and the stream just ends


def test_an_event_is_encoded_once_per_view_however_many_watch_it() -> None:
    """Watchers of one event share its encoded line per (type, prev?, metadata?) view."""
    from dranet_cloud.testing.kube_watch import WatchEvent, _event_line

    calls: list[tuple[bool, bool]] = []

    def encode(e: WatchEvent, use_prev: bool, metadata_only: bool) -> str:
        calls.append((use_prev, metadata_only))
        return json.dumps({"prev": use_prev, "meta": metadata_only, "rv": e.rv})

    old = {"metadata": {"name": "p"}}
    e = WatchEvent("MODIFIED", "pods", "ns", "p", {"metadata": {"name": "p"}}, "{}", 7, old)
    views = [("MODIFIED", False, False), ("MODIFIED", False, True), ("DELETED", True, False)]
    lines = [[_event_line(k, e, prev, meta, encode) for k, prev, meta in views] for _ in range(50)]
    assert all(round_ == lines[0] for round_ in lines)
    assert calls == [(False, False), (False, True), (True, False)]
    decoded = [json.loads(line) for line in lines[0]]
    assert decoded == [
        {"type": "MODIFIED", "object": {"prev": False, "meta": False, "rv": 7}},
        {"type": "MODIFIED", "object": {"prev": False, "meta": True, "rv": 7}},
        {"type": "DELETED", "object": {"prev": True, "meta": False, "rv": 7}},
    ]
    assert all(line.endswith(b"\n") for line in lines[0])


def test_a_watch_stream_closed_before_it_ran_closes_its_direct_socket() -> None:
    """The server attaches the socket, then the client is gone before the first piece:
    closing the stream releases the watch and the second descriptor it opened."""
    import socket

    from dranet_cloud.testing.kube_rules import FieldSelector, LabelSelector

    kube = KubernetesEmulator()
    hub = kube._hub
    with kube._lock:
        w = hub.open("nodes", namespace=None, labels=LabelSelector(""), fields=FieldSelector(""))
    ours, theirs = socket.socketpair()
    ours.settimeout(5.0)
    try:
        stream = hub.stream(
            w,
            [],
            encode=lambda e, prev, meta: "{}",
            bookmark=None,
            bookmark_interval=60.0,
            timeout=30.0,
            count=lambda n: None,
            count_locked=lambda n: None,
        )
        assert stream.attach_socket(ours) is True
        sink = stream._sink
        assert sink is not None and sink._sock.fileno() >= 0
        stream.close()
        assert sink._sock.fileno() == -1
        assert hub.open_counts() == {}
    finally:
        ours.close()
        theirs.close()
