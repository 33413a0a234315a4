"""Leak reclaiming guards (issue 26): the node's own cluster, --force, batches, a named budget."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from dranet_cloud.ipam import MemoryStore, Owner, SqliteStore
from dranet_cloud.ipam.base import IpamStore
from dranet_cloud.ipam.node.reclaim import (
    ClusterMismatch,
    KubernetesClaims,
    RunCutShort,
    reclaim,
)
from dranet_cloud.kube import KubeClient
from dranet_cloud.testing.kubernetes import KubernetesEmulator
from dranet_cloud.toolkit.iprange import ip_range_from_cidr
from dranet_cloud.wire.claims import ClaimReference

from . import test_server_cli
from .test_ipam_reclaim import run_cli
from .test_server_cli import CLI, REPO, ServeProcess, listed_claims
from .waiting import wait_until

servers = test_server_cli.servers  # the fixture that kills what a test left running
V4 = ip_range_from_cidr("10.60.0.0/16")
START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def stepping_clock() -> Callable[[], datetime]:
    """Each allocation a second after the previous one, all long before now."""
    state = {"n": 0}

    def now() -> datetime:
        state["n"] += 1
        return START + timedelta(seconds=state["n"])

    return now


def allocate_claims(
    kube: KubernetesEmulator, store: IpamStore, count: int, *, live: Callable[[int], bool]
) -> dict[int, str]:
    """``count`` named claims with one address each (claim ``i`` is the ``i``-th oldest);
    those for which ``live(i)`` stay in the API, the others are deleted (leaked)."""
    uids: dict[int, str] = {}
    for i in range(count):
        uid = kube.add_claim("team", f"c{i}")["metadata"]["uid"]
        store.allocate(
            Owner("local-ipam", "eth1", uid), [V4], claim=ClaimReference(uid, "team", f"c{i}")
        )
        if not live(i):
            assert kube.delete_claim("team", f"c{i}")
        uids[i] = uid
    return uids


def held(store: IpamStore) -> set[str]:
    return {a.owner.claim_uid for a in store.list()}


# --- the cluster ------------------------------------------------------------------------


def test_gc_against_another_cluster_frees_nothing_and_names_both(
    tmp_path: Path, servers: list[ServeProcess]
) -> None:
    """A real ``serve`` records its cluster at its first collection; ``ipam gc`` pointed at
    a second API (other claims, none of this node's) then frees nothing (exit 2)."""
    with KubernetesEmulator() as home, KubernetesEmulator() as other:
        home_config = home.write_kubeconfig(tmp_path / "home.kubeconfig")
        other_config = other.write_kubeconfig(tmp_path / "other.kubeconfig")
        for i in range(3):
            other.add_claim("team", f"theirs-{i}")
        serve = ServeProcess(
            tmp_path,
            "--gc-interval",
            "0.2s",
            "--gc-kubernetes",
            "--node-name",
            "node-1",
            "--kubeconfig",
            str(home_config),
        )
        servers.append(serve)
        client = serve.client()
        uids = [home.add_claim("team", f"mine-{i}")["metadata"]["uid"] for i in range(3)]
        for uid in uids:
            assert client.address(uid)
        client.close()
        wait_until(
            lambda: any(
                r.path == "/api/v1/namespaces/kube-system" for r in home.emulator.requests()
            ),
            "the server's collector reached its API",
        )
        wait_until(lambda: "recorded cluster" in serve.stderr(), "the cluster recorded")
        assert serve.terminate() == 0
        assert f"recorded cluster {home.cluster_uid}" in serve.stderr()
        for argv in ([], ["--dry-run"], ["--grace", "0s", "--force"]):
            gc = [*CLI, "ipam", "gc", "--ipam-db", str(serve.db), "--kubernetes"]
            out = subprocess.run(
                [*gc, "--kubeconfig", str(other_config), *argv],
                capture_output=True,
                text=True,
                cwd=REPO,
                timeout=60,
            )
            assert out.returncode == 2, out.stderr
            assert f"is cluster {other.cluster_uid}" in out.stderr
            assert f"came from cluster {home.cluster_uid}" in out.stderr
            assert str(other_config) in out.stderr and "nothing was freed" in out.stderr
            assert "context emulator)" in out.stderr
        assert sorted(listed_claims(serve.db)) == sorted(uids)
        assert [r.path for r in other.emulator.requests()].count(
            "/api/v1/namespaces/kube-system"
        ) == 3
        assert not [r for r in other.emulator.requests() if "resourceclaims" in r.path]


def test_uid_only_claims_are_guarded_too_and_adopt_cluster_moves_the_store(
    kube: KubernetesEmulator, tmp_path: Path
) -> None:
    store = MemoryStore(clock=stepping_clock())
    store.set_meta("cluster_uid", "the-old-cluster")
    for i in range(3):
        store.allocate(Owner("local-ipam", "eth1", f"uid-{i}"), [V4])  # known by UID only
    with KubeClient(str(kube.write_kubeconfig())) as client:
        with pytest.raises(ClusterMismatch) as info:
            reclaim(store, KubernetesClaims(client), grace=timedelta(0))
        assert info.value.exit_code == 2 and "--adopt-cluster" in str(info.value)
        assert len(store.list()) == 3
        assert [r.path for r in kube.emulator.requests()] == ["/api/v1/namespaces/kube-system"]
        result = reclaim(store, KubernetesClaims(client, adopt=True), grace=timedelta(0))
    assert len(result.freed) == 3 and store.get_meta("cluster_uid") == kube.cluster_uid


# --- everything at once ----------------------------------------------------------------


def test_freeing_every_allocation_of_a_store_asks_for_force(
    kube: KubernetesEmulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "ipam.db"
    with SqliteStore(db, clock=stepping_clock()) as store:
        store.set_meta("cluster_uid", kube.cluster_uid)
        allocate_claims(kube, store, 12, live=lambda i: False)
    argv = ["ipam", "gc", "--ipam-db", str(db), "--kubernetes", "--grace", "0s"]
    argv += ["--kubeconfig", str(kube.write_kubeconfig())]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert "every one of the 12 claim(s)" in err and "--force to free the 12" in err
    assert run_cli([*argv, "--dry-run"]) == 0
    assert "a real run stops and asks for --force" in capsys.readouterr().err
    with SqliteStore(db) as store:
        assert len(store.list()) == 12
    assert run_cli([*argv, "--force"]) == 0
    assert "freed 12 of 12" in capsys.readouterr().err
    with SqliteStore(db) as store:
        assert store.list() == []


def test_a_small_store_or_one_live_claim_needs_no_force(kube: KubernetesEmulator) -> None:
    small = MemoryStore(clock=stepping_clock())
    small.set_meta("cluster_uid", kube.cluster_uid)  # recorded: no live claim is needed
    allocate_claims(kube, small, 9, live=lambda i: False)
    big = MemoryStore(clock=stepping_clock())
    uids = allocate_claims(kube, big, 30, live=lambda i: i == 0)  # only the oldest lives
    with KubeClient(str(kube.write_kubeconfig())) as client:
        assert len(reclaim(small, KubernetesClaims(client), grace=timedelta(0)).freed) == 9
        # Newest first in batches of 10: the first two batches are all gone and wait;
        # the last shows the live claim, and then everything proven gone is freed.
        result = reclaim(big, KubernetesClaims(client, batch=10), grace=timedelta(0))
    assert len(result.freed) == 29 and held(big) == {uids[0]}


# --- batches and the budget --------------------------------------------------------------


def test_a_late_error_keeps_the_batches_freed_before_it(kube: KubernetesEmulator) -> None:
    store = MemoryStore(clock=stepping_clock())
    # 40 claims, newest first in batches of 10: c39..c30, c29..c20, c19..c10, c9..c0.
    uids = allocate_claims(kube, store, 40, live=lambda i: i % 4 == 3)
    kube.fail(500, path="/apis/resource.k8s.io/v1/namespaces/team/resourceclaims/c15")
    with KubeClient(str(kube.write_kubeconfig())) as client, pytest.raises(RunCutShort) as info:
        reclaim(store, KubernetesClaims(client, batch=10), grace=timedelta(0))
    freed = {a.owner.claim_uid for a in info.value.result.freed}
    assert freed == {uids[i] for i in range(20, 40) if i % 4 != 3}
    assert held(store) == {uids[i] for i in range(40) if i % 4 == 3 or i < 20}
    message = str(info.value)
    assert info.value.exit_code == 5 and "500" in message
    assert "the 15 allocation(s) of claims proven gone before it were freed" in message


def test_an_exhausted_budget_keeps_the_batches_freed_before_it() -> None:
    store = MemoryStore(clock=stepping_clock())
    with KubernetesEmulator(latency=0.02) as kube:
        uids = allocate_claims(kube, store, 200, live=lambda i: i % 2 == 1)
        with KubeClient(str(kube.write_kubeconfig())) as client:
            source = KubernetesClaims(client, batch=10, run_timeout=1.0, budget_flag="--gc-budget")
            with pytest.raises(RunCutShort) as info:
                reclaim(store, source, grace=timedelta(0))
    message = str(info.value)
    assert "longer than its budget (--gc-budget 1s)" in message, message
    freed = {a.owner.claim_uid for a in info.value.result.freed}
    print(f"budget 1 s at 20 ms a call, batches of 10: freed {len(freed)} of 100 leaked")
    assert 0 < len(freed) < 100 and len(freed) % 5 == 0  # whole batches (5 leaks each)
    assert held(store) == set(uids.values()) - freed


def test_the_budget_flag_is_named_in_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "ipam.db"
    with KubernetesEmulator(latency=0.15) as kube:
        with SqliteStore(db, clock=stepping_clock()) as store:
            allocate_claims(kube, store, 3, live=lambda i: i == 0)
        argv = ["ipam", "gc", "--ipam-db", str(db), "--kubernetes", "--grace", "0s"]
        argv += ["--kubeconfig", str(kube.write_kubeconfig()), "--budget", "0.25s"]
        assert run_cli(argv) == 5
        assert run_cli([*argv[:-1], "0s"]) == 2
    err = capsys.readouterr().err
    assert "longer than its budget (--budget 0.25s)" in err and "raise --budget" in err
    assert "--budget '0s' must be longer than 0s" in err
    assert not re.search(r"\d\.\d{4,}", err), err  # never "within 0.00954098 s"
    with SqliteStore(db) as store:
        assert len(store.list()) == 3
