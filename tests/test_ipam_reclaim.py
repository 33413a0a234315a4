"""Reclaiming leaked allocations: only claims the API (or a complete file) proves gone.

Every test runs against the Kubernetes API emulator over loopback HTTP.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from dranet_cloud.cli.gc_flags import COMPLETE_MARKER_HELP
from dranet_cloud.cli.ipam_cmd import register
from dranet_cloud.ipam import MemoryStore, Owner, SqliteStore
from dranet_cloud.ipam.base import IpamStore
from dranet_cloud.ipam.node.reclaim import (
    COMPLETE_MARKER,
    ClaimsFile,
    KubernetesClaims,
    NothingProven,
    parse_claims_text,
    reclaim,
)
from dranet_cloud.kube import KubeClient
from dranet_cloud.server.collector import CollectorSettings, PeriodicCollector
from dranet_cloud.testing.kubernetes import KubernetesEmulator
from dranet_cloud.toolkit.iprange import ip_range_from_cidr
from dranet_cloud.wire.claims import ClaimReference, PodReference

RANGES = [ip_range_from_cidr("10.40.0.0/24"), ip_range_from_cidr("fd00:40::/64")]
HOUR_AGO = datetime.now(timezone.utc) - timedelta(hours=1)
CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
NAMESPACED = "/apis/resource.k8s.io/v1/namespaces/"
KUBE_SYSTEM = "/api/v1/namespaces/kube-system"


def run_cli(argv: list[str]) -> int:
    top = argparse.ArgumentParser(prog="dranet-cloud")
    register(top.add_subparsers(dest="command", required=True))
    args = top.parse_args(argv)
    code: int = args.func(args)
    return code


def scenario(kube: KubernetesEmulator, store: IpamStore, *, named: bool) -> dict[str, str]:
    """Claim A live, B deleted, C deleted and recreated under its name; all allocated an hour ago.

    Returns the UIDs by role: ``a``, ``b``, ``old_c``, ``new_c``.
    """
    uids: dict[str, str] = {}
    for name in ("a", "b", "c"):
        claim = kube.add_claim("team", name, pods=[(f"{name}-pod", f"{name}-pod-uid")])
        uid = claim["metadata"]["uid"]
        uids["old_c" if name == "c" else name] = uid
        ref = ClaimReference(uid, "team", name, (PodReference(f"{name}-pod"),)) if named else None
        store.allocate(Owner("local-ipam", "eth1", uid), RANGES, claim=ref)
    kube.delete_claim("team", "b")
    kube.delete_claim("team", "c")
    uids["new_c"] = kube.add_claim("team", "c")["metadata"]["uid"]
    return uids


def held_uids(store: IpamStore) -> set[str]:
    return {a.owner.claim_uid for a in store.list()}


@pytest.mark.parametrize("named", [True, False], ids=["by-name", "uid-only"])
def test_only_deleted_and_replaced_claims_are_freed(
    kube: KubernetesEmulator, kube_client: KubeClient, named: bool
) -> None:
    store = MemoryStore(clock=lambda: HOUR_AGO)
    uids = scenario(kube, store, named=named)
    result = reclaim(store, KubernetesClaims(kube_client, page_size=1), grace=timedelta(minutes=2))
    assert {a.owner.claim_uid for a in result.freed} == {uids["b"], uids["old_c"]}
    assert len(result.freed) == 4  # two families each
    assert held_uids(store) == {uids["a"]}
    assert store.get_meta("cluster_uid") == kube.cluster_uid  # recorded on first contact
    requests = kube.emulator.requests()
    assert requests[0].path == KUBE_SYSTEM  # the cluster is checked before anything else
    requests = requests[1:]
    if named:  # one GET per claim, no list
        assert sorted(r.path for r in requests) == [
            f"{NAMESPACED}team/resourceclaims/{n}" for n in ("a", "b", "c")
        ]
    else:  # one complete list, page by page
        assert {r.path for r in requests} == {CLAIMS}
        assert [("continue" in r.query) for r in requests] == [False, True]  # a, new c
    assert "judged by" in result.summary() and "freed 4 of 6" in result.summary()


@pytest.mark.parametrize(
    ("named", "fault", "message"),
    [
        (True, "500", "answered 500 InternalError"),
        (True, "500-on-the-last-get", "answered 500 InternalError"),
        (True, "timeout", "did not finish within"),
        # A 404 that is not NotFound for this claim (resource.k8s.io/v1 not served,
        # a proxy's 404 page) proves nothing: freeing on it frees every live claim.
        (True, "404-without-details", "answered 404"),
        (True, "404-plain-text", "answered 404"),
        (False, "500", "answered 500 InternalError"),
        (False, "mid-pagination", "answered 500 InternalError"),
        (False, "expired-forever", "410 Expired"),
        (False, "timeout", "did not finish within"),
        (False, "dropped", "failed"),
        (False, "garbage", "not the expected object"),
    ],
)
def test_a_failing_api_frees_nothing_and_says_so(
    kube: KubernetesEmulator, named: bool, fault: str, message: str
) -> None:
    store = MemoryStore(clock=lambda: HOUR_AGO)
    uids = scenario(kube, store, named=named)
    before = store.list()
    if fault == "500":
        kube.fail(500, times=100)
    elif fault == "500-on-the-last-get":
        kube.fail(500, path=f"{NAMESPACED}team/resourceclaims/c")
    elif fault == "timeout":
        kube.faults.load("delay=2")
    elif fault == "404-without-details":
        kube.fail(404, times=100)  # a Status NotFound naming no object, as for an unserved path
    elif fault == "404-plain-text":
        kube.faults.load("status=" + ",".join(["404"] * 100))
    elif fault == "mid-pagination":
        kube.fail(500, continue_only=True)
    elif fault == "expired-forever":
        kube.fail(410, continue_only=True, times=100)
    elif fault == "dropped":
        kube.faults.load("drop=100")
    else:
        kube.faults.load("malformed")
    with KubeClient(str(kube.write_kubeconfig()), timeout=0.5) as c:
        source = KubernetesClaims(c, page_size=1, run_timeout=5)
        with pytest.raises(NothingProven, match=message) as err:
            reclaim(store, source, grace=timedelta(0))
    assert "nothing was freed" in str(err.value) and err.value.exit_code == 5
    assert store.list() == before
    assert uids["b"] in held_uids(store)


def test_grace_keeps_allocations_newer_than_the_evidence(
    kube: KubernetesEmulator, kube_client: KubeClient
) -> None:
    store = MemoryStore()  # allocations made just now
    uids = scenario(kube, store, named=False)
    result = reclaim(store, KubernetesClaims(kube_client), grace=timedelta(minutes=2))
    assert result.freed == [] and len(result.kept_recent) == 4
    assert "younger than the grace period" in result.summary()
    assert len(held_uids(store)) == 3
    result = reclaim(store, KubernetesClaims(kube_client), grace=timedelta(0))
    assert {a.owner.claim_uid for a in result.freed} == {uids["b"], uids["old_c"]}


def test_dry_run_lists_and_frees_nothing(kube: KubernetesEmulator, kube_client: KubeClient) -> None:
    store = MemoryStore(clock=lambda: HOUR_AGO)
    uids = scenario(kube, store, named=True)
    result = reclaim(store, KubernetesClaims(kube_client), grace=timedelta(0), dry_run=True)
    assert {a.owner.claim_uid for a in result.freed} == {uids["b"], uids["old_c"]}
    assert "would free 4 of 6" in result.summary()
    assert len(store.list()) == 6


def test_no_allocations_no_api_call(kube: KubernetesEmulator, kube_client: KubeClient) -> None:
    kube.fail(500, times=100)
    result = reclaim(MemoryStore(), KubernetesClaims(kube_client))
    assert result.freed == [] and result.checked == 0
    assert kube.emulator.request_count == 0


# --- the command --------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path, kube: KubernetesEmulator) -> Iterator[tuple[Path, dict[str, str]]]:
    path = tmp_path / "ipam.db"
    with SqliteStore(path, clock=lambda: HOUR_AGO) as store:
        uids = scenario(kube, store, named=True)
    yield path, uids


def test_ipam_gc_kubernetes_dry_run_then_free(
    db: tuple[Path, dict[str, str]],
    kube: KubernetesEmulator,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, uids = db
    argv = ["ipam", "gc", "--ipam-db", str(path), "--kubernetes"]
    argv += ["--kubeconfig", str(kube.write_kubeconfig())]
    assert run_cli([*argv, "--dry-run", "-o", "json"]) == 0
    captured = capsys.readouterr()
    assert {x["claim_uid"] for x in json.loads(captured.out)} == {uids["b"], uids["old_c"]}
    assert "would free 4 of 6" in captured.err
    with SqliteStore(path) as store:
        assert len(store.list()) == 6
    assert run_cli([*argv, "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("would free 4 allocation(s):")

    kube.fail(500, times=100)
    assert run_cli(argv) == 5
    err = capsys.readouterr().err
    assert "500 InternalError" in err and "nothing was freed" in err
    with SqliteStore(path) as store:
        assert len(store.list()) == 6
    kube.clear_faults()

    assert run_cli([*argv, "--grace", "0s"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("freed 4 allocation(s):")
    with SqliteStore(path) as store:
        assert held_uids(store) == {uids["a"]}


def test_ipam_gc_kubernetes_uses_kubeconfig_from_the_environment(
    db: tuple[Path, dict[str, str]],
    kube: KubernetesEmulator,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, uids = db
    monkeypatch.setenv("KUBECONFIG", str(kube.write_kubeconfig()))
    assert run_cli(["ipam", "gc", "--ipam-db", str(path), "--kubernetes", "-o", "json"]) == 0
    assert {x["claim_uid"] for x in json.loads(capsys.readouterr().out)} == {
        uids["b"],
        uids["old_c"],
    }


def test_ipam_list_shows_claim_names_and_pods(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ipam.db"
    with SqliteStore(path) as store:
        ref = ClaimReference("u-1", "team", "nic", (PodReference("trainer-0"),))
        store.allocate(Owner("local-ipam", "eth1", "u-1"), RANGES[:1], claim=ref)
        store.allocate(Owner("local-ipam", "eth1", "u-2"), RANGES[:1])
        recorded = {a.owner.claim_uid: a.claim for a in store.list()}
    assert run_cli(["ipam", "list", "--ipam-db", str(path), "-o", "json"]) == 0
    listed = {x["claim_uid"]: x for x in json.loads(capsys.readouterr().out)}
    assert listed["u-2"]["claim"] is None and listed["u-2"]["pods"] == []
    assert recorded["u-1"] is not None  # the store persists claim references
    assert listed["u-1"]["claim"] == "team/nic"
    assert listed["u-1"]["pods"] == ["trainer-0"]
    assert run_cli(["ipam", "list", "--ipam-db", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "NAMESPACE/NAME" in lines[0] and "POD" in lines[0]
    assert any("team/nic" in ln and "trainer-0" in ln for ln in lines)


def test_ipam_list_table_with_memory_claims() -> None:
    # The table's cells come from Allocation.claim whatever store holds it.
    from dranet_cloud.cli.ipam_cmd import _claim_name, _pods

    store = MemoryStore()
    ref = ClaimReference("u-1", "team", "nic", (PodReference("p0"), PodReference("p1")))
    store.allocate(Owner("p", "eth1", "u-1"), RANGES[:1], claim=ref)
    store.allocate(Owner("p", "eth1", "u-2"), RANGES[:1])
    by_uid = {a.owner.claim_uid: a for a in store.list()}
    assert (_claim_name(by_uid["u-1"]), _pods(by_uid["u-1"])) == ("team/nic", "p0,p1")
    assert (_claim_name(by_uid["u-2"]), _pods(by_uid["u-2"])) == ("-", "-")


# --- files ---------------------------------------------------------------------------


def kubectl_json(uids: list[str], **meta: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "metadata": {"resourceVersion": "", **meta},
            "items": [
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {"name": f"c{i}", "namespace": "team", "uid": uid},
                }
                for i, uid in enumerate(uids)
            ],
        },
        indent=4,
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "is empty, which proves nothing"),
        ("\n  \n", "is empty, which proves nothing"),
        ("TRUNCATE", "is not complete JSON"),
        ("uid-a\nuid-b\n", "does not end with the line '# complete'"),
        ("uid-a\n# complete\nuid-b\n", "does not end with the line '# complete'"),
        ("PAGED", "is one page of a paged list"),
        ('{"kind": "PodList", "items": []}', "not a ResourceClaimList"),
        ("uid a\n# complete\n", "is not a claim UID"),
        # `kubectl get resourceclaims -A -o name` names claims, not UIDs: read as
        # UIDs, no live claim would match and every allocation would be freed.
        ("resourceclaim.resource.k8s.io/a\n# complete\n", "is not a claim UID"),
        ("team/a\n# complete\n", "is not a claim UID"),
    ],
)
def test_unusable_claims_files_free_nothing(
    db: tuple[Path, dict[str, str]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    message: str,
) -> None:
    path, uids = db
    if content == "TRUNCATE":
        full = kubectl_json([uids["a"]])
        content = full[: len(full) // 2]
    elif content == "PAGED":
        content = kubectl_json([uids["a"]], **{"continue": "eyJ2Ijoi"})
    live = tmp_path / "live"
    live.write_text(content)
    argv = ["ipam", "gc", "--ipam-db", str(path), "--live-claims", str(live), "--grace", "0s"]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "nothing was freed" in err
    with SqliteStore(path) as store:
        assert len(store.list()) == 6


@pytest.mark.parametrize("form", ["kubectl-json", "marked-uids"])
def test_complete_claims_files_free_the_missing(
    db: tuple[Path, dict[str, str]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    form: str,
) -> None:
    path, uids = db
    live_uids = [uids["a"], uids["new_c"]]
    live = tmp_path / "live"
    if form == "kubectl-json":
        live.write_text(kubectl_json(live_uids))
    else:
        live.write_text("# from kubectl\n" + "\n".join(live_uids) + f"\n{COMPLETE_MARKER}\n")
    argv = ["ipam", "gc", "--ipam-db", str(path), "--live-claims", str(live), "--grace", "0s"]
    assert run_cli([*argv, "-o", "json"]) == 0
    freed = {x["claim_uid"] for x in json.loads(capsys.readouterr().out)}
    assert freed == {uids["b"], uids["old_c"]}


def test_empty_kubectl_list_is_complete_and_marker_is_documented() -> None:
    assert parse_claims_text(kubectl_json([]), "f") == frozenset()
    assert COMPLETE_MARKER_HELP == COMPLETE_MARKER


def test_claims_file_from_stdin() -> None:
    source = ClaimsFile("-", read_stdin=lambda: "")
    with pytest.raises(NothingProven, match="on standard input is empty"):
        source.read()


# --- the server's collector with the API -------------------------------------------------


def test_collector_with_kubernetes_logs_failures_and_frees_on_proof(
    kube: KubernetesEmulator, kube_client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore(clock=lambda: HOUR_AGO)
    uids = scenario(kube, store, named=False)
    collector = PeriodicCollector(
        lambda: store,
        CollectorSettings(
            60, source=KubernetesClaims(kube_client, page_size=1), grace=timedelta(0)
        ),
    )
    kube.fail(500, continue_only=True)
    with caplog.at_level(logging.INFO, logger="dranet_cloud.server.collector"):
        assert collector.collect_once() is None
        assert len(store.list()) == 6
        assert "ipam gc freed nothing" in caplog.text and "500 InternalError" in caplog.text
        result = collector.collect_once()
    assert result is not None
    assert {a.owner.claim_uid for a in result.freed} == {uids["b"], uids["old_c"]}
    assert held_uids(store) == {uids["a"]}
    assert f"(claim uid {uids['b']} is gone)" in caplog.text
    assert collector.failed_runs == 1 and collector.freed_total == 4


def test_serve_warns_when_age_alone_frees(caplog: pytest.LogCaptureFixture) -> None:
    """The unsafe opt-in frees running claims' addresses: the log must say so at start-up."""
    from dranet_cloud.cli import serve_cmd

    top = argparse.ArgumentParser(prog="dranet-cloud")
    serve_cmd.register(top.add_subparsers(dest="command", required=True))
    base = ["serve", "--ipam-memory", "--ipam-range", "10.0.0.0/24", "--gc-interval", "1m"]
    with caplog.at_level(logging.WARNING, logger="dranet_cloud"):
        serve_cmd._gc_settings(top.parse_args([*base, "--gc-live-claims", "/nonexistent"]))
        assert "unsafe" not in caplog.text.lower()
        settings, _ = serve_cmd._gc_settings(
            top.parse_args([*base, "--gc-unsafe-free-by-age", "24h"])
        )
    assert settings.unsafe_free_by_age == timedelta(hours=24)
    assert "--gc-unsafe-free-by-age" in caplog.text and "--gc-kubernetes" in caplog.text
