"""``serve`` and the Kubernetes API it depends on (issue 33): checked at start, in the log,
in ``/health`` and on ``/metrics``, re-checked until it answers; a cluster-scope journal of
another cluster refuses to start."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

from dranet_cloud.ipam import SqliteStore
from dranet_cloud.ipam.node.reclaim import CLUSTER_UID_KEY
from dranet_cloud.testing.environ import isolated_environ
from dranet_cloud.testing.kubernetes import KubernetesEmulator

from .test_cluster_cli import cluster_flags
from .test_cluster_serve import RANGE, address, claim_doc, start
from .test_server_cli import CLI, REPO, ServeProcess, servers
from .waiting import wait_until

__all__ = ["servers"]  # a fixture, used by name

TOKEN = "the-token-of-a-cluster-that-is-not-up-yet"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def kubeconfig_for(path: Path, port: int) -> Path:
    """A kubeconfig for an API server on ``port`` that nobody runs yet."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "later", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "later", "user": {"token": TOKEN}}],
        "contexts": [{"name": "later-ctx", "context": {"cluster": "later", "user": "later"}}],
        "current-context": "later-ctx",
    }
    path.write_text(json.dumps(doc))
    return path


def warnings_of(serve: ServeProcess) -> list[str]:
    client = serve.client()
    try:
        doc = client.http.get("/health")
        assert doc.status_code == 200, doc.text  # DRANET keeps starting (docs say why)
        found: list[str] = doc.json().get("warnings", [])
        return found
    finally:
        client.close()


def metric(serve: ServeProcess, name: str) -> str:
    client = serve.client()
    try:
        text = client.http.get("/metrics").text
    finally:
        client.close()
    (line,) = [x for x in text.splitlines() if x.startswith(name + " ")]
    return line.split()[1]


def test_an_unreachable_api_is_an_error_and_a_warning_until_it_answers(
    tmp_path: Path, servers: list[ServeProcess]
) -> None:
    port = free_port()
    config = kubeconfig_for(tmp_path / "later.kubeconfig", port)
    flags = ["--ipam-scope", "cluster", "--node-name", "node-a", "--kubeconfig", str(config)]
    serve = ServeProcess(tmp_path, *flags, ranges=(RANGE,))
    servers.append(serve)
    # The check ran before the ready line: the first /health already says it (the
    # range views, which cannot list either, may add their own warning beside it).
    (warning,) = [w for w in warnings_of(serve) if "Kubernetes API is unreachable" in w]
    assert "the Kubernetes API is unreachable" in warning
    assert f"kubeconfig {config}" in warning and "context later-ctx" in warning
    assert "fix: check that the kubeconfig's server" in warning
    err = serve.stderr()
    assert "ERROR" in err and "the Kubernetes API is unreachable" in err and str(config) in err
    assert metric(serve, "dranet_cloud_kubernetes_api_ok") == "0.0"
    # The API comes up on the kubeconfig's port: the warning goes, an INFO line says so.
    with KubernetesEmulator(listen=f"127.0.0.1:{port}", token=TOKEN) as kube:
        wait_until(lambda: warnings_of(serve) == [], "the warning cleared", limit=60)
        assert "answers again after" in serve.stderr()
        assert f"cluster {kube.cluster_uid}, the IPAM store's" in serve.stderr()
        assert metric(serve, "dranet_cloud_kubernetes_api_ok") == "1.0"
        assert metric(serve, "dranet_cloud_kubernetes_api_failed_checks_total") != "0.0"
        client = serve.client()
        (got,) = [address(client, claim_doc(kube, 1, "node-a"))]
        client.close()
        assert got.startswith("10.7.0.")
        assert serve.terminate() == 0
    with SqliteStore(serve.db) as store:
        assert store.get_meta(CLUSTER_UID_KEY) == kube.cluster_uid  # recorded at the check


def test_a_refused_credential_is_named_as_such(
    tmp_path: Path, kube: KubernetesEmulator, servers: list[ServeProcess]
) -> None:
    config = kubeconfig_for(tmp_path / "bad-token.kubeconfig", int(kube.url.rsplit(":", 1)[1]))
    serve = ServeProcess(
        tmp_path,
        "--gc-interval",
        "1h",
        "--gc-kubernetes",
        "--node-name",
        "node-1",
        "--kubeconfig",
        str(config),
    )
    servers.append(serve)
    (warning,) = warnings_of(serve)
    assert "the Kubernetes API is refusing this client" in warning and "401" in warning
    assert "renew the kubeconfig's token" in warning and "leak reclaiming frees nothing" in warning


def test_a_cluster_scope_journal_of_cluster_a_refuses_to_start_against_cluster_b(
    tmp_path: Path, servers: list[ServeProcess]
) -> None:
    with KubernetesEmulator() as a, KubernetesEmulator() as b:
        first = start(tmp_path, a, "node-a")
        servers.append(first)
        client = first.client()
        address(client, claim_doc(a, 1, "node-a"))
        client.close()
        assert first.terminate() == 0
        assert f"recorded cluster {a.cluster_uid}" in first.stderr()
        b_flags = cluster_flags(b, "node-a")
        b_config = b_flags[-1]
        argv = [
            *CLI,
            "serve",
            "--listen",
            f"unix://{tmp_path}/b.sock",
            "--cloud-provider-hint",
            "none",
            "--host-root",
            str(tmp_path / "node-a"),
            "--ipam-db",
            str(first.db),
            "--ipam-range",
            RANGE,
            *b_flags,
        ]
        out = subprocess.run(
            argv, capture_output=True, text=True, cwd=REPO, env=isolated_environ(), timeout=60
        )
        assert out.returncode == 2, out.stderr
        assert out.stdout == ""  # no ready line: DRANET never sees this server
        assert f"is cluster {b.cluster_uid}" in out.stderr
        assert f"written against cluster {a.cluster_uid}" in out.stderr
        assert b_config in out.stderr and "context emulator" in out.stderr
        assert "--adopt-cluster" in out.stderr and "--kubeconfig" in out.stderr
        assert not b.ip_addresses()
        with SqliteStore(first.db) as store:
            assert store.get_meta(CLUSTER_UID_KEY) == a.cluster_uid
        # The node really moved: --adopt-cluster starts it and records B.
        moved = start(tmp_path, b, "node-a", "--adopt-cluster")
        servers.append(moved)
        assert f"replacing {a.cluster_uid} (--adopt-cluster)" in moved.stderr()
        assert moved.terminate() == 0
        with SqliteStore(first.db) as store:
            assert store.get_meta(CLUSTER_UID_KEY) == b.cluster_uid


def test_a_cluster_found_to_be_another_later_reserves_nothing(tmp_path: Path) -> None:
    """The API came back as another cluster than the journal's (it was down at start):
    the claim's own check finds it, and nothing is reserved there."""
    import pytest

    from dranet_cloud.ipam import Owner
    from dranet_cloud.ipam.cluster.allocator import open_cluster_ipam
    from dranet_cloud.kube import KubeClient
    from dranet_cloud.server.api_health import ApiCheck, ApiHealth
    from dranet_cloud.toolkit.errors import ProviderUnavailable
    from dranet_cloud.toolkit.iprange import ip_range_from_cidr
    from dranet_cloud.wire.claims import ClaimReference

    with KubernetesEmulator() as b, KubeClient(str(b.write_kubeconfig())) as client:
        store = open_cluster_ipam(str(tmp_path / "ipam.db"), node="n", api=client, create=True)
        store.set_meta(CLUSTER_UID_KEY, "cluster-a")
        health = ApiHealth.for_server(
            store, ApiCheck(cluster_scope=True, gc_kubernetes=False), None
        )
        uid = b.add_claim("team", "c")["metadata"]["uid"]
        with pytest.raises(ProviderUnavailable) as info:
            store.allocate(
                Owner("local-ipam", "eth1", uid),
                [ip_range_from_cidr("10.62.0.0/24")],
                claim=ClaimReference(uid, "team", "c"),
            )
        message = str(info.value)
        assert f"is cluster {b.cluster_uid}" in message and "cluster cluster-a" in message
        assert "nothing was reserved" in message
        assert not b.ip_addresses() and store.list() == []
        assert health.mismatch and health.warnings() and not health.ok
        store.close()
