"""Cluster identity as proof (issue 33): a store adopts a cluster only from evidence.

A first ``ipam gc`` against another cluster (a second emulator, whose claims are
not the store's) frees nothing and says why, in node scope and in cluster scope;
a run refused by the ``--force`` guard records nothing, so the next run against
the right cluster frees exactly the claims that are gone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dranet_cloud.ipam import Owner, SqliteStore
from dranet_cloud.ipam.cluster.allocator import open_cluster_ipam
from dranet_cloud.ipam.cluster.journal import ClusterJournal
from dranet_cloud.ipam.node.reclaim import CLUSTER_UID_KEY
from dranet_cloud.kube import KubeClient
from dranet_cloud.testing.kubernetes import KubernetesEmulator
from dranet_cloud.toolkit.iprange import ip_range_from_cidr
from dranet_cloud.wire.claims import ClaimReference

from .test_ipam_reclaim import run_cli

V4 = ip_range_from_cidr("10.61.0.0/24")
NODE = "node-a"


@pytest.fixture
def other() -> Iterator[KubernetesEmulator]:
    """A second cluster, with claims of its own (none of them the store's)."""
    with KubernetesEmulator() as emu:
        for i in range(3):
            emu.add_claim("team", f"theirs-{i}")
        yield emu


def allocate(home: KubernetesEmulator, db: Path, scope: str, count: int) -> list[str]:
    """``count`` claims of ``home``, each holding one address in a store of ``scope``
    that records no cluster (as ``profile get`` and older releases left it)."""
    uids = [home.add_claim("team", f"c{i}", node=NODE)["metadata"]["uid"] for i in range(count)]
    refs = [ClaimReference(uid, "team", f"c{i}") for i, uid in enumerate(uids)]
    if scope == "node":
        with SqliteStore(db, create=True) as store:
            for ref in refs:
                store.allocate(Owner("local-ipam", "eth1", ref.uid), [V4], claim=ref)
    else:
        with KubeClient(str(home.write_kubeconfig())) as client:
            with open_cluster_ipam(str(db), node=NODE, api=client, create=True) as cluster:
                for ref in refs:
                    cluster.allocate(Owner("local-ipam", "eth1", ref.uid), [V4], claim=ref)
            assert len(home.ip_addresses()) == count
    return uids


def gc(db: Path, scope: str, kube: KubernetesEmulator, tmp: Path, *extra: str) -> int:
    config = kube.write_kubeconfig(tmp / f"{kube.cluster_uid}.kubeconfig")
    argv = ["ipam", "gc", "--ipam-db", str(db), "--kubernetes", "--grace", "0s"]
    argv += ["--kubeconfig", str(config), *extra]
    if scope == "cluster":
        argv += ["--ipam-scope", "cluster", "--node-name", NODE]
    return run_cli(argv)


def held(db: Path) -> set[str]:
    with ClusterJournal(str(db)) as journal:
        return {a.owner.claim_uid for a in journal.list()}


def recorded(db: Path) -> str | None:
    with SqliteStore(db) as store:
        return store.get_meta(CLUSTER_UID_KEY)


@pytest.mark.parametrize("scope", ["node", "cluster"])
def test_a_first_gc_against_another_cluster_frees_nothing_and_says_why(
    scope: str,
    kube: KubernetesEmulator,
    other: KubernetesEmulator,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = tmp_path / "ipam.db"
    uids = allocate(kube, db, scope, 9)
    capsys.readouterr()
    for extra in ([], ["--force"], ["--dry-run"]):
        assert gc(db, scope, other, tmp_path, *extra) == 2, extra
        err = capsys.readouterr().err
        assert "this store records no cluster yet" in err
        assert f"none of its 9 claim(s) is live in cluster {other.cluster_uid}" in err
        assert "nothing was freed and no cluster was recorded" in err
        assert "--adopt-cluster" in err and "context emulator" in err
        assert held(db) == set(uids) and recorded(db) is None
    # The home cluster's objects (cluster scope) were never touched.
    assert len(kube.ip_addresses()) == (9 if scope == "cluster" else 0)
    assert not [r for r in other.emulator.requests() if "ipaddresses" in r.path]
    # The right cluster: every claim is live, which proves it; it is recorded.
    assert gc(db, scope, kube, tmp_path) == 0
    err = capsys.readouterr().err
    assert "freed 0 of 9" in err and f"recorded cluster {kube.cluster_uid}" in err
    assert recorded(db) == kube.cluster_uid and held(db) == set(uids)
    # From now on the other cluster is a mismatch (named both ways), not a first contact.
    assert gc(db, scope, other, tmp_path) == 2
    err = capsys.readouterr().err
    assert f"is cluster {other.cluster_uid}" in err
    assert f"came from cluster {kube.cluster_uid}" in err


@pytest.mark.parametrize("scope", ["node", "cluster"])
def test_a_refused_run_records_nothing_and_the_right_cluster_frees_exactly_the_gone(
    scope: str,
    kube: KubernetesEmulator,
    other: KubernetesEmulator,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = tmp_path / "ipam.db"
    uids = allocate(kube, db, scope, 12)
    gone = {uids[i] for i in (1, 4, 7, 10)}
    for i in (1, 4, 7, 10):
        assert kube.delete_claim("team", f"c{i}")
    capsys.readouterr()
    # Another cluster: every claim looks gone; the --force guard refuses, and says
    # that --force alone would not do either.
    assert gc(db, scope, other, tmp_path) == 2
    err = capsys.readouterr().err
    assert "every one of the 12 claim(s)" in err and "--force alone frees nothing" in err
    assert held(db) == set(uids) and recorded(db) is None
    assert gc(db, scope, other, tmp_path, "--force") == 2
    assert "no cluster was recorded" in capsys.readouterr().err
    assert held(db) == set(uids) and recorded(db) is None
    # The right cluster, no --force needed: live claims prove it.
    assert gc(db, scope, kube, tmp_path) == 0
    err = capsys.readouterr().err
    assert "freed 4 of 12" in err and f"recorded cluster {kube.cluster_uid}" in err
    assert held(db) == set(uids) - gone and recorded(db) == kube.cluster_uid
    if scope == "cluster":
        parents = {o["spec"]["parentRef"]["name"] for o in kube.ip_addresses()}
        assert parents == {f"c{i}" for i in range(12) if i not in (1, 4, 7, 10)}


def test_adopt_cluster_records_a_store_whose_claims_are_all_gone(
    kube: KubernetesEmulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--adopt-cluster is the operator's word: the run frees and records without a live claim."""
    db = tmp_path / "ipam.db"
    allocate(kube, db, "node", 3)
    for i in range(3):
        kube.delete_claim("team", f"c{i}")
    assert gc(db, "node", kube, tmp_path) == 2
    capsys.readouterr()
    assert gc(db, "node", kube, tmp_path, "--adopt-cluster") == 0
    assert "freed 3 of 3" in capsys.readouterr().err
    assert held(db) == set() and recorded(db) == kube.cluster_uid
