"""The informer against the Kubernetes API emulator over real loopback HTTP.

What is checked is what a node costs and what it sees: one LIST then a WATCH,
a cut stream resumed without a new list, a relist only after 410 with the
changes of the gap reported as events, bookmarks, selector changes, and a
stop that ends at once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from dranet_cloud.kube import (
    IPADDRESSES,
    NODES,
    PODS,
    Informer,
    KubeClient,
    LineTooLong,
    Resource,
)
from dranet_cloud.kube.stream import LineStream
from dranet_cloud.testing.kubernetes import KubernetesEmulator

from .waiting import wait_until

DEADLINE = 10.0  # generous: only a hang fails a test


class Recorder:
    """on_event's calls, thread-safe, as (type, key) pairs."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def __call__(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
        with self._lock:
            self.events.append((kind, key))

    def seen(self, kind: str, key: str) -> bool:
        with self._lock:
            return (kind, key) in self.events

    def snapshot(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self.events)


@pytest.fixture
def informers() -> Iterator[list[Informer]]:
    """Informers a test starts, stopped at its end whatever happens."""
    made: list[Informer] = []
    yield made
    for informer in made:
        informer.stop()


def start(made: list[Informer], client: KubeClient, resource: Resource, **kw: Any) -> Informer:
    informer = Informer(client, resource, **kw)
    made.append(informer)
    informer.start()
    assert informer.wait_synced(DEADLINE), informer.last_error
    return informer


def start_watching(
    kube: KubernetesEmulator, client: KubeClient, made: list[Informer], seen: Recorder
) -> Informer:
    """An IP address informer with quick retries, its watch open: where the fault cases start."""
    informer = start(
        made, client, IPADDRESSES, on_event=seen, backoff=(0.05, 0.2), watch_timeout=30
    )
    wait_until(lambda: kube.served()["watches_open"].get("ipaddresses", 0) == 1, "a watch opens")
    return informer


def test_resource_paths() -> None:
    assert PODS.path() == "/api/v1/pods"
    assert PODS.path("team-a") == "/api/v1/namespaces/team-a/pods"
    assert NODES.path("ignored") == "/api/v1/nodes"
    assert IPADDRESSES.path() == "/apis/networking.k8s.io/v1/ipaddresses"
    assert IPADDRESSES.qualified == "ipaddresses.networking.k8s.io"


def test_list_objects_follows_pages_and_returns_the_version(
    kube: KubernetesEmulator, kube_client: KubeClient
) -> None:
    for i in range(7):
        kube.add_ip_address(f"10.0.0.{i}", labels={"team": "a" if i % 2 else "b"})
    items, rv = kube_client.list_objects(IPADDRESSES.path(), page_size=2, resource_version="0")
    assert sorted(i["metadata"]["name"] for i in items) == [f"10.0.0.{i}" for i in range(7)]
    assert rv.isdigit()
    only_a, _ = kube_client.list_objects(IPADDRESSES.path(), label_selector="team=a", page_size=2)
    assert {i["metadata"]["labels"]["team"] for i in only_a} == {"a"} and len(only_a) == 3
    kube.fail(410, continue_only=True, times=1)  # the snapshot behind a continue is gone
    again, _ = kube_client.list_objects(IPADDRESSES.path(), page_size=2, resource_version="0")
    assert len(again) == 7  # started over, complete


def test_a_line_over_the_cap_is_refused_and_lines_are_split_across_chunks() -> None:
    class Body:
        def __init__(self, chunks: list[bytes]) -> None:
            self.chunks = chunks

        def iter_bytes(self) -> Iterator[bytes]:
            yield from self.chunks

        def shutdown(self) -> None:
            self.chunks = []

    lines = LineStream(Body([b'{"a":', b'1}\n\n{"b"', b":2}\n{", b'"c":3}']), 64, "watch x")
    assert list(lines.lines()) == [b'{"a":1}', b'{"b":2}', b'{"c":3}']
    long = LineStream(Body([b"x" * 40, b"y" * 40, b"\n"]), 64, "watch x")
    with pytest.raises(LineTooLong) as caught:
        list(long.lines())
    assert "64-byte limit" in str(caught.value) and caught.value.head.startswith(b"x")


def test_list_then_watch_sees_creates_and_deletes(
    kube: KubernetesEmulator, kube_client: KubeClient, informers: list[Informer]
) -> None:
    kube.add_ip_address("10.0.0.1")
    seen = Recorder()
    informer = start(informers, kube_client, IPADDRESSES, on_event=seen, watch_timeout=30)
    assert informer.keys() == ["10.0.0.1"] and seen.seen("ADDED", "10.0.0.1")
    kube.add_ip_address("10.0.0.2")
    kube.delete_ip_address("10.0.0.1")
    wait_until(lambda: seen.seen("DELETED", "10.0.0.1"), "the delete reaches the informer")
    assert informer.keys() == ["10.0.0.2"]
    assert seen.snapshot() == [
        ("ADDED", "10.0.0.1"),
        ("ADDED", "10.0.0.2"),
        ("DELETED", "10.0.0.1"),
    ]
    assert informer.get("10.0.0.2") is not None and informer.get("10.0.0.1") is None
    stats = informer.stats
    assert (stats.lists, stats.list_objects, stats.watches, stats.relists) == (1, 1, 1, 0)
    assert stats.events == 2 and stats.errors == 0 and informer.last_error is None
    assert kube.calls("ipaddresses").get("watch") == 1


def test_a_cut_stream_is_resumed_without_a_list(
    kube: KubernetesEmulator, kube_client: KubeClient, informers: list[Informer]
) -> None:
    seen = Recorder()
    informer = start_watching(kube, kube_client, informers, seen)
    kube.cut_watches()
    kube.add_ip_address("10.0.0.7")  # during the cut or after: either way it must arrive
    wait_until(lambda: seen.seen("ADDED", "10.0.0.7"), "the event after the cut arrives")
    wait_until(lambda: informer.stats.watches >= 2, "a second watch")
    assert informer.stats.lists == 1 and informer.stats.relists == 0
    assert kube.calls("ipaddresses").get("list") == 1
    assert seen.snapshot().count(("ADDED", "10.0.0.7")) == 1  # not twice either


def test_410_relists_and_reports_what_changed_meanwhile(
    kube: KubernetesEmulator, kube_client: KubeClient, informers: list[Informer]
) -> None:
    kube.add_ip_address("10.0.0.1", labels={"v": "1"})
    kube.add_ip_address("10.0.0.2")
    seen = Recorder()
    informer = start_watching(kube, kube_client, informers, seen)
    kube.fail(503, verb="watch", resource="ipaddresses", times=None)  # no stream meanwhile
    kube.cut_watches()
    wait_until(lambda: informer.stats.errors >= 2, "a refused watch")
    kube.delete_ip_address("10.0.0.2")
    kube.add_ip_address("10.0.0.1", labels={"v": "2"})  # a change
    kube.add_ip_address("10.0.0.3")
    kube.compact()  # the informer's version is gone from the window
    kube.clear_faults()
    wait_until(lambda: informer.stats.relists == 1, "a relist after 410")
    wait_until(lambda: seen.seen("ADDED", "10.0.0.3"), "the synthetic events")
    assert seen.snapshot()[2:] == [
        ("DELETED", "10.0.0.2"),
        ("MODIFIED", "10.0.0.1"),
        ("ADDED", "10.0.0.3"),
    ]
    assert sorted(informer.keys()) == ["10.0.0.1", "10.0.0.3"]
    assert informer.get("10.0.0.1")["metadata"]["labels"] == {"v": "2"}  # type: ignore[index]
    assert informer.stats.lists == 2
    kube.add_ip_address("10.0.0.4")  # and the watch goes on from the new list
    wait_until(lambda: seen.seen("ADDED", "10.0.0.4"), "events after the relist")


def test_an_http_410_on_a_watch_relists(
    kube: KubernetesEmulator, kube_client: KubeClient, informers: list[Informer]
) -> None:
    seen = Recorder()
    informer = start_watching(kube, kube_client, informers, seen)
    kube.fail(410, verb="watch", resource="ipaddresses", times=1)
    kube.cut_watches()
    wait_until(lambda: informer.stats.relists == 1, "a relist after the 410 answer")
    kube.add_ip_address("10.0.0.5")
    wait_until(lambda: seen.seen("ADDED", "10.0.0.5"), "events after the relist")
    assert informer.stats.lists == 2


def test_bookmarks_move_the_version(informers: list[Informer]) -> None:
    with (
        KubernetesEmulator(bookmark_interval=0.1) as kube,
        KubeClient(str(kube.write_kubeconfig()), timeout=5) as client,
    ):
        informer = start(informers, client, IPADDRESSES, watch_timeout=30)
        listed = informer.resource_version
        kube.add_node("n1")  # another resource: the ipaddress stream carries only a bookmark
        wait_until(lambda: informer.stats.bookmarks >= 1, "a bookmark")
        wait_until(lambda: int(informer.resource_version) > int(listed), "the version moves")
        assert informer.stats.events == 0 and informer.keys() == []
        informer.stop()


def test_a_selector_change_relists_with_the_differences(
    kube: KubernetesEmulator, kube_client: KubeClient, informers: list[Informer]
) -> None:
    kube.add_ip_address("10.0.0.1", labels={"pool": "a"})
    kube.add_ip_address("10.0.0.2", labels={"pool": "b"})
    seen = Recorder()
    informer = start(informers, kube_client, IPADDRESSES, label_selector="pool=a", on_event=seen)
    assert informer.keys() == ["10.0.0.1"]
    informer.set_selectors(label_selector="pool=b")
    wait_until(lambda: seen.seen("ADDED", "10.0.0.2"), "the other pool's object")
    assert seen.snapshot() == [
        ("ADDED", "10.0.0.1"),
        ("DELETED", "10.0.0.1"),
        ("ADDED", "10.0.0.2"),
    ]
    assert informer.keys() == ["10.0.0.2"] and informer.stats.relists == 1
    kube.add_ip_address("10.0.0.3", labels={"pool": "a"})  # the watch has the new selector
    kube.add_ip_address("10.0.0.4", labels={"pool": "b"})
    wait_until(lambda: seen.seen("ADDED", "10.0.0.4"), "an event of the new selector")
    assert not seen.seen("ADDED", "10.0.0.3")


def test_pods_of_one_node_by_field_selector(
    kube: KubernetesEmulator, kube_client: KubeClient, informers: list[Informer]
) -> None:
    kube.add_pod("team-a", "p1", node="n1", claims=(("nic", "c1"),))
    kube.add_pod("team-a", "p2", node="n2")
    seen = Recorder()
    informer = start(informers, kube_client, PODS, field_selector="spec.nodeName=n1", on_event=seen)
    assert informer.keys() == ["team-a/p1"]
    assert informer.get("team-a/p1")["spec"]["resourceClaims"][0]["resourceClaimName"] == "c1"  # type: ignore[index]
    kube.add_pod("team-b", "p3", node="n1")
    kube.add_pod("team-b", "p4", node="n2")
    kube.delete_pod("team-a", "p1")
    wait_until(lambda: seen.seen("DELETED", "team-a/p1"), "the delete of the node's pod")
    assert informer.keys() == ["team-b/p3"]
    assert not seen.seen("ADDED", "team-b/p4")
    pods = kube_client.list_pods(field_selector="spec.nodeName=n2")
    assert sorted(p["metadata"]["name"] for p in pods) == ["p2", "p4"]
    in_ns = kube_client.list_pods(field_selector="spec.nodeName=n1", namespace="team-a")
    assert in_ns == []


def test_metadata_only_stores_metadata(
    kube: KubernetesEmulator, kube_client: KubeClient, informers: list[Informer]
) -> None:
    kube.add_pod("team-a", "p1", node="n1")
    informer = start(informers, kube_client, PODS, metadata_only=True)
    stored = informer.get("team-a/p1")
    assert stored is not None and "spec" not in stored and stored["metadata"]["name"] == "p1"
    kube.add_pod("team-a", "p2", node="n1")
    wait_until(lambda: informer.get("team-a/p2") is not None, "a watched pod")
    assert "spec" not in informer.get("team-a/p2")  # type: ignore[operator]


def test_an_event_over_the_cap_drops_the_stream(
    kube: KubernetesEmulator, kube_client: KubeClient, informers: list[Informer]
) -> None:
    informer = start(informers, kube_client, IPADDRESSES, max_event_bytes=2048, backoff=(0.05, 0.1))
    kube.add_ip_address("10.0.0.9", annotations={"big": "\n" + "x" * 4096})
    wait_until(lambda: informer.stats.errors >= 1, "the long line is refused")
    assert informer.last_error is not None and "2048-byte limit" in informer.last_error
    assert "\n" not in informer.last_error and len(informer.last_error) < 1000
    assert informer.get("10.0.0.9") is None
    assert informer.stats.lists == 1  # a resume, never a relist


def test_stop_ends_a_waiting_stream_at_once(
    kube: KubernetesEmulator, kube_client: KubeClient
) -> None:
    informer = Informer(kube_client, IPADDRESSES, watch_timeout=600).start()
    assert informer.wait_synced(DEADLINE)
    wait_until(lambda: kube.served()["watches_open"].get("ipaddresses", 0) == 1, "a watch opens")
    informer.stop()
    assert informer._thread is not None and not informer._thread.is_alive()
    assert informer.stats.errors == 0 and informer.last_error is None  # an end, not a failure


def test_errors_name_the_resource_and_back_off(
    kube: KubernetesEmulator, kube_client: KubeClient
) -> None:
    kube.fail(403, verb="list", resource="ipaddresses", times=None)
    informer = Informer(kube_client, IPADDRESSES, label_selector="a=b", backoff=(0.05, 0.1))
    with informer:
        wait_until(lambda: informer.stats.errors >= 2, "failed lists")
        assert not informer.synced
    error = informer.last_error or ""
    assert "ipaddresses.networking.k8s.io" in error and "labelSelector=a=b" in error
    assert "403" in error and "grant list and watch on ipaddresses" in error
    assert kube.url in error


def test_initial_jitter_delays_the_first_list(kube_client: KubeClient) -> None:
    informer = Informer(kube_client, IPADDRESSES, initial_jitter=60.0).start()
    assert not informer.wait_synced(0.05) or informer.stats.lists == 1
    informer.stop()  # the wait for the jitter ends at once too
    assert informer._thread is not None and not informer._thread.is_alive()


def test_a_widened_selector_lists_only_what_it_adds_and_loses_no_event(
    kube: KubernetesEmulator, kube_client: KubeClient, informers: list[Informer]
) -> None:
    kube.add_ip_address("10.0.0.1", labels={"pool": "a"})
    kube.add_ip_address("10.0.0.2", labels={"pool": "b"})
    kube.add_ip_address("10.0.0.9", labels={"pool": "c"})
    seen = Recorder()
    informer = start(
        informers, kube_client, IPADDRESSES, label_selector="pool in (a)", on_event=seen
    )
    assert informer.listed == 0
    ticket = informer.widen("pool in (a,b)", "pool in (b)")
    assert ticket == 1
    wait_until(lambda: informer.listed >= ticket, "the added part listed")
    assert sorted(informer.keys()) == ["10.0.0.1", "10.0.0.2"]
    stats = informer.stats
    # Two lists: the first (one object) and the added part alone (one object).
    assert (stats.lists, stats.list_objects, stats.widenings, stats.relists) == (2, 2, 1, 0)
    lists = kube.calls()["list"]
    kube.add_ip_address("10.0.0.3", labels={"pool": "a"})  # both parts are watched
    kube.add_ip_address("10.0.0.4", labels={"pool": "b"})
    kube.add_ip_address("10.0.0.5", labels={"pool": "c"})
    wait_until(lambda: seen.seen("ADDED", "10.0.0.4"), "an event of the added part")
    wait_until(lambda: seen.seen("ADDED", "10.0.0.3"), "an event of the old part")
    assert not seen.seen("ADDED", "10.0.0.5") and not seen.seen("ADDED", "10.0.0.9")
    assert kube.calls()["list"] == lists  # no relist of the old part
    assert informer.widen("pool in (a,b)", "pool in (b)") == ticket  # nothing new


def test_a_widening_keeps_the_old_parts_events_of_its_list_time(
    kube: KubernetesEmulator,
    kube_client: KubeClient,
    informers: list[Informer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The old part changes after the stream was cut for the widening and before the
    # added part's list: the list's resourceVersion is past that change, and only a
    # watch resumed from where the informer stood brings it.
    kube.add_ip_address("10.0.0.1", labels={"pool": "a"})
    kube.add_ip_address("10.0.0.2", labels={"pool": "b"})
    seen = Recorder()
    informer = start(
        informers, kube_client, IPADDRESSES, label_selector="pool in (a)", on_event=seen
    )
    real = kube_client.list_objects

    def list_after_a_change(*args: Any, **kw: Any) -> Any:
        if kw.get("not_older_than"):
            kube.delete_ip_address("10.0.0.1")
        return real(*args, **kw)

    monkeypatch.setattr(kube_client, "list_objects", list_after_a_change)
    ticket = informer.widen("pool in (a,b)", "pool in (b)")
    wait_until(lambda: informer.listed >= ticket, "the added part listed")
    wait_until(lambda: seen.seen("DELETED", "10.0.0.1"), "the old part's delete")
    assert informer.keys() == ["10.0.0.2"]
    assert informer.stats.relists == 0
