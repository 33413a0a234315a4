"""Three ``dranet-cloud serve`` processes in cluster scope: one range, three journals,
one Kubernetes API emulator (issue 24's acceptance, as DRANET's Go client drives it).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from dranet_cloud.ipam.cluster.allocator import EXIT_AFTER_CREATE_ENV
from dranet_cloud.testing.kubernetes import KubernetesEmulator

from .test_cluster_cli import cluster_flags
from .test_server_cli import GoLikeClient, ServeProcess, listed_claims, servers
from .waiting import wait_until

__all__ = ["servers"]  # a fixture, used by name

RANGE = "10.7.0.0/24"
MAC = "0c:42:a1:00:00:11"


def start(tmp: Path, kube: KubernetesEmulator, node: str, *extra: str, **env: str) -> ServeProcess:
    (tmp / node).mkdir(exist_ok=True)
    return ServeProcess(tmp / node, *cluster_flags(kube, node), *extra, ranges=(RANGE,), env=env)


def claim_doc(kube: KubernetesEmulator, n: int, node: str) -> dict[str, Any]:
    """A ResourceClaim created in the emulator, as gen2 DRANET sends it."""
    stored = kube.add_claim("team", f"claim-{n}", uid=f"uid-{n}", node=node)
    return {"metadata": {k: stored["metadata"][k] for k in ("namespace", "name", "uid")}}


def ask(client: GoLikeClient, claim: dict[str, Any], *, release: bool = False) -> httpx.Response:
    device = {"mac_address": MAC, "name": "eth1"}
    config = {"profile": "local-ipam", "interface": {}}
    if release:  # both generations release by claim UID
        uid = claim["metadata"]["uid"]
        return client.post(
            "/ReleaseProfileConfig", {"device": device, "claim_uid": uid, "config": config}
        )
    return client.post("/GetProfileConfig", {"device": device, "claim": claim, "config": config})


def address(client: GoLikeClient, claim: dict[str, Any]) -> str:
    r = ask(client, claim)
    assert r.status_code == 200, r.text
    (addr,) = r.json()["interface"]["addresses"]
    return str(addr)


def objects(kube: KubernetesEmulator) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in kube.ip_addresses()}


def test_three_servers_one_range_one_address_per_pod(
    tmp_path: Path, kube: KubernetesEmulator, servers: list[ServeProcess]
) -> None:
    # Someone else (the API server's ClusterIP allocator) holds 20 addresses of the range.
    foreign = {f"10.7.0.{i}" for i in range(1, 21)}
    for name in foreign:
        kube.add_ip_address(name)
    nodes = ["node-0", "node-1", "node-2"]
    gc = ("--gc-interval", "0.5s", "--gc-kubernetes", "--gc-grace", "0s")
    with ThreadPoolExecutor(3) as pool:
        servers += pool.map(lambda n: start(tmp_path, kube, n, *gc), nodes)
    clients = [s.client() for s in servers]
    claims = [claim_doc(kube, i, nodes[i % 3]) for i in range(45)]
    local = threading.local()

    def prepare(i: int) -> str:
        if not hasattr(local, "clients"):
            local.clients = [s.client() for s in servers]
        return address(local.clients[i % 3], claims[i])

    with ThreadPoolExecutor(15) as pool:
        got = list(pool.map(prepare, range(45)))
    assert len(set(got)) == 45
    assert not {a.removesuffix("/32") for a in got} & foreign
    held = objects(kube)
    for i, addr in enumerate(got):
        parent = held[addr.removesuffix("/32")]["spec"]["parentRef"]
        assert parent == {
            "group": "resource.k8s.io",
            "resource": "resourceclaims",
            "namespace": "team",
            "name": f"claim-{i}",
        }
    writes = kube.calls().get("create", 0)
    # Retries are answered from the journals: same answers, no API write.
    assert [address(clients[i % 3], claims[i]) for i in range(45)] == got
    assert kube.calls().get("create", 0) == writes

    # kill -9 one server; restarted on the same journal it gives the same answers.
    servers[1].kill()
    servers[1] = start(tmp_path, kube, "node-1", *gc)
    clients[1] = servers[1].client()
    assert [address(clients[1], claims[i]) for i in range(1, 45, 3)] == got[1::3]

    # A release deletes the object.
    assert ask(clients[2], claims[2], release=True).status_code == 200
    assert got[2].removesuffix("/32") not in objects(kube)

    # The API fails: a new claim gets an error the kubelet retries, known claims answer.
    new = claim_doc(kube, 99, "node-0")
    kube.fail(503, times=None, resource="ipaddresses")
    r = ask(clients[0], new)
    assert r.status_code == 500, r.text
    assert address(clients[0], claims[0]) == got[0]
    kube.clear_faults()
    fresh = address(clients[0], new)
    assert fresh not in got and fresh.removesuffix("/32") not in foreign

    # Leaks: the claims of 5 pods are deleted without a release (DRANET never retries
    # one).  Each node's collector deletes its own (no node sweeps another's), and no other.
    gone = [3, 4, 5, 7, 8]
    for i in gone:
        kube.delete_claim("team", f"claim-{i}")
    gone_names = {got[i].removesuffix("/32") for i in gone}
    wait_until(lambda: not gone_names & set(objects(kube)), "the collector to delete the leaks")
    live = {a.removesuffix("/32") for i, a in enumerate(got) if i not in gone and i != 2}
    assert set(objects(kube)) == live | foreign | {fresh.removesuffix("/32")}
    # node-0's own journal row goes too, right after its object (the same collector run).
    wait_until(lambda: "uid-3" not in listed_claims(servers[0].db), "node-0's journal row to go")
    assert servers[0].terminate() == 0  # the collector stops cleanly too


def test_a_server_killed_between_the_create_and_its_journal_commit_adopts_the_object(
    tmp_path: Path, kube: KubernetesEmulator, servers: list[ServeProcess]
) -> None:
    claim = claim_doc(kube, 1, "node-0")
    server = start(tmp_path, kube, "node-0", **{EXIT_AFTER_CREATE_ENV: "1"})
    servers.append(server)
    with pytest.raises(httpx.HTTPError):
        ask(server.client(), claim)
    assert server.proc.wait(30) != 0
    (name,) = objects(kube)  # the create was committed, the journal never heard of it
    server = start(tmp_path, kube, "node-0")
    servers.append(server)
    kube.reset_calls()
    assert address(server.client(), claim) == f"{name}/32"
    calls = kube.calls()
    assert calls["get"] == 1 and "create" not in calls  # read back and adopted
    assert list(objects(kube)) == [name]
    assert ask(server.client(), claim, release=True).status_code == 200
    assert objects(kube) == {}
    assert server.terminate() == 0
