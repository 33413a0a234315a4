"""Lease election against the Kubernetes API emulator over real loopback HTTP.

Short timings (lease 1.5 s, renew 1 s, retry 0.2 s, candidates poll 0.3 s)
keep the suite fast; deadlines are generous, no test asserts a duration.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from dranet_cloud.kube import (
    CANDIDATES_ANNOTATION,
    KubeClient,
    KubeConflict,
    KubeNotFound,
    LeaseElector,
)
from dranet_cloud.kube.lease import micro_time, parse_micro_time
from dranet_cloud.testing.kubernetes import KubernetesEmulator

from .waiting import wait_until

NS, NAME = "kube-system", "dranet-cloud-reclaimer"
FAST: dict[str, Any] = {
    "lease_duration": 1.5,
    "renew_deadline": 1.0,
    "retry_period": 0.2,
    "candidate_poll": 0.3,
}
DEADLINE = 10.0


class Electors:
    """Electors a test starts (each with its own client), stopped at its end."""

    def __init__(self, kube: KubernetesEmulator) -> None:
        self.kube = kube
        self.made: list[LeaseElector] = []
        self.clients: list[KubeClient] = []
        self.log: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def start(self, identity: str, **kw: Any) -> LeaseElector:
        client = KubeClient(str(self.kube.write_kubeconfig()), timeout=2)
        self.clients.append(client)
        options = {**FAST, **kw}
        elector = LeaseElector(
            client,
            namespace=NS,
            name=NAME,
            identity=identity,
            on_started=lambda: self._note("started", identity),
            on_stopped=lambda: self._note("stopped", identity),
            **options,
        )
        self.made.append(elector)
        return elector.start()

    def _note(self, what: str, identity: str) -> None:
        with self._lock:
            self.log.append((what, identity))

    def leaders(self) -> list[str]:
        return [e.identity for e in self.made if e.is_leader]

    def close(self) -> None:
        for elector in self.made:
            elector.stop()
        for client in self.clients:
            client.close()


@pytest.fixture
def electors(kube: KubernetesEmulator) -> Iterator[Electors]:
    made = Electors(kube)
    yield made
    made.close()


def test_micro_time_round_trips() -> None:
    text = micro_time(1_700_000_000.25)
    assert text == "2023-11-14T22:13:20.250000Z"
    assert parse_micro_time(text) == pytest.approx(1_700_000_000.25)
    assert parse_micro_time("2023-11-14T22:13:20Z") == pytest.approx(1_700_000_000)
    assert parse_micro_time("yesterday") is None and parse_micro_time(None) is None


def test_timings_that_cannot_be_safe_are_refused(kube_client: KubeClient) -> None:
    with pytest.raises(ValueError, match="renew_deadline"):
        LeaseElector(kube_client, namespace=NS, name=NAME, identity="a", renew_deadline=20.0)


def test_lease_calls_and_a_stale_update_loses(kube_client: KubeClient) -> None:
    with pytest.raises(KubeNotFound):
        kube_client.get_lease(NS, "x")
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "x", "namespace": NS},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": micro_time()},
    }
    created = kube_client.create_lease(NS, body)
    with pytest.raises(KubeConflict):
        kube_client.create_lease(NS, body)  # AlreadyExists
    read = kube_client.get_lease(NS, "x")
    assert read["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    first = {**read, "spec": {**read["spec"], "holderIdentity": "b"}}
    second = {**read, "spec": {**read["spec"], "holderIdentity": "c"}}
    kube_client.update_lease(NS, "x", first)
    with pytest.raises(KubeConflict) as lost:
        kube_client.update_lease(NS, "x", second)  # the version it read is gone
    assert lost.value.status == 409
    assert kube_client.get_lease(NS, "x")["spec"]["holderIdentity"] == "b"


def test_one_of_three_leads(electors: Electors, kube_client: KubeClient) -> None:
    for name in ("a", "b", "c"):
        electors.start(name)
    wait_until(lambda: len(electors.leaders()) == 1, "one leader")
    time.sleep(1.0)  # a few renewals and polls later there is still exactly one
    leaders = electors.leaders()
    assert len(leaders) == 1
    lease = kube_client.get_lease(NS, NAME)
    assert lease["spec"]["holderIdentity"] == leaders[0]
    assert lease["spec"]["leaseDurationSeconds"] == 2  # 1.5 s rounded up to whole seconds
    assert parse_micro_time(lease["spec"]["renewTime"]) is not None
    wait_until(
        lambda: all(e.holder == leaders[0] for e in electors.made), "everyone sees the holder"
    )
    assert electors.log == [("started", leaders[0])]
    holder = next(e for e in electors.made if e.is_leader)
    assert holder.stats["transitions"] == 1 and holder.stats["updates"] >= 3


@pytest.mark.parametrize("release", [False, True], ids=["crash", "release"])
def test_leadership_moves_when_the_holder_goes(
    electors: Electors, kube_client: KubeClient, release: bool
) -> None:
    for name in ("a", "b", "c"):
        electors.start(name)
    wait_until(lambda: len(electors.leaders()) == 1, "one leader")
    first = next(e for e in electors.made if e.is_leader)
    before = kube_client.get_lease(NS, NAME)["spec"].get("leaseTransitions", 0)
    first.stop(release=release)  # release=False: as a crashed holder, it just stops renewing
    assert not first.is_leader and ("stopped", first.identity) in electors.log
    if release:
        assert kube_client.get_lease(NS, NAME)["spec"]["holderIdentity"] == ""
    # Within about lease_duration + candidate_poll; the deadline is generous.
    wait_until(lambda: len(electors.leaders()) == 1, "a successor leads", limit=8.0)
    second = electors.leaders()[0]
    assert second != first.identity
    lease = kube_client.get_lease(NS, NAME)
    assert lease["spec"]["holderIdentity"] == second
    assert lease["spec"]["leaseTransitions"] == before + 1


def test_a_holder_that_cannot_renew_steps_down(
    electors: Electors, kube: KubernetesEmulator
) -> None:
    holder = electors.start("a")
    wait_until(lambda: holder.is_leader, "a leads")
    kube.fail(503, verb="update", resource="leases", times=None)
    wait_until(lambda: ("stopped", "a") in electors.log, "a steps down")
    assert not holder.is_leader and holder.last_error is not None
    assert "503" in holder.last_error
    kube.clear_faults()
    wait_until(lambda: holder.is_leader, "a takes it again")  # its own, not expired
    assert electors.log == [("started", "a"), ("stopped", "a"), ("started", "a")]


def test_candidates_poll_at_their_own_pace(
    electors: Electors, kube: KubernetesEmulator, kube_client: KubeClient
) -> None:
    holder = electors.start("a", candidates=lambda: 50)
    wait_until(lambda: holder.is_leader, "a leads")
    wait_until(
        lambda: (
            kube_client.get_lease(NS, NAME)["metadata"]
            .get("annotations", {})
            .get(CANDIDATES_ANNOTATION)
            == "50"
        ),
        "the holder writes the candidate count",
    )
    candidate = electors.start("b")  # candidate_poll 0.3 s
    derived = electors.start("c", candidate_poll=None)
    time.sleep(1.5)
    assert not candidate.is_leader and not derived.is_leader
    # About 1.5 / 0.3 = 5 looks; a candidate polling at the holder's 2 s pace would not
    # be allowed, nor one polling in a tight loop.
    assert 2 <= candidate.stats["gets"] <= 9
    # Without candidate_poll: 0.6 s x 50 candidates = 30 s (jittered): one look so far.
    assert derived.stats["gets"] == 1
    assert 24.0 <= derived._poll_interval() <= 36.0
    assert holder.stats["gets"] == 1  # its first look; it renews from its own last write
