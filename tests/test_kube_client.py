"""The Kubernetes client facade against the API emulator over real loopback HTTP."""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from dranet_cloud.kube import KubeClient, KubeError, KubeNotFound, ParentRef, load_config
from dranet_cloud.testing.drip import DrippingServer
from dranet_cloud.testing.environ import isolated_environ
from dranet_cloud.testing.kubernetes import KubernetesEmulator
from dranet_cloud.toolkit.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "dranet_cloud.cli.main"]
CLAIMS_PATH = "/apis/resource.k8s.io/v1/resourceclaims"


def test_emulator_speaks_kubernetes_json(kube: KubernetesEmulator) -> None:
    claim = kube.add_claim("team-a", "nic", uid="u-1", pods=[("trainer-0", "p-1")])
    headers = {"Authorization": f"Bearer {kube.token}"}
    with httpx.Client(base_url=kube.url, headers=headers) as http:
        got = http.get("/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/nic")
        assert got.status_code == 200 and got.json() == claim
        assert got.json()["metadata"]["resourceVersion"].isdigit()
        assert got.json()["status"]["reservedFor"] == [
            {"resource": "pods", "name": "trainer-0", "uid": "p-1"}
        ]
        missing = http.get("/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/x")
        assert missing.status_code == 404
        assert missing.headers["content-type"] == "application/json"
        status = missing.json()
        assert (status["kind"], status["reason"], status["code"]) == ("Status", "NotFound", 404)
        assert status["details"] == {
            "name": "x",
            "group": "resource.k8s.io",
            "kind": "resourceclaims",
        }
        listed = http.get(CLAIMS_PATH).json()
        assert listed["kind"] == "ResourceClaimList"
        assert listed["apiVersion"] == "resource.k8s.io/v1"
        assert "kind" not in listed["items"][0]  # list items carry no kind, as from the API
        assert listed["metadata"]["resourceVersion"].isdigit()
        ns = http.get("/apis/resource.k8s.io/v1/namespaces/other/resourceclaims").json()
        assert ns["items"] == []
        refused = httpx.get(kube.url + CLAIMS_PATH)
        assert refused.status_code == 401 and refused.json()["reason"] == "Unauthorized"


def test_emulator_paginates_from_a_snapshot(kube: KubernetesEmulator) -> None:
    for i in range(5):
        kube.add_claim("ns", f"c{i}")
    headers = {"Authorization": f"Bearer {kube.token}"}
    with httpx.Client(base_url=kube.url, headers=headers) as http:
        first = http.get(CLAIMS_PATH, params={"limit": 2}).json()
        assert len(first["items"]) == 2 and first["metadata"]["remainingItemCount"] == 3
        kube.add_claim("ns", "late")  # created after the list began: not in later pages
        kube.delete_claim("ns", "c4")  # deleted meanwhile: still in the snapshot
        names = [i["metadata"]["name"] for i in first["items"]]
        token = first["metadata"]["continue"]
        while token:
            page = http.get(CLAIMS_PATH, params={"limit": 2, "continue": token}).json()
            names += [i["metadata"]["name"] for i in page["items"]]
            token = page["metadata"].get("continue")
        assert names == ["c0", "c1", "c2", "c3", "c4"]
        kube.expire_lists()
        gone = http.get(CLAIMS_PATH, params={"limit": 2, "continue": first["metadata"]["continue"]})
        assert gone.status_code == 410 and gone.json()["reason"] == "Expired"


def test_client_gets_lists_and_reads_nodes(
    kube: KubernetesEmulator, kube_client: KubeClient
) -> None:
    for i in range(7):
        kube.add_claim("ns", f"c{i}", uid=f"u{i}")
    kube.add_node("node-1", labels={"topology.kubernetes.io/zone": "z1"}, provider_id="cw://n1")
    listing = kube_client.list_resource_claims(page_size=3)
    assert sorted(listing.uids) == [f"u{i}" for i in range(7)] and listing.restarts == 0
    pages = kube.emulator.requests(CLAIMS_PATH)
    assert [r.query.get("limit") for r in pages] == [["3"]] * 3
    assert [("continue" in r.query) for r in pages] == [False, True, True]
    claim = kube_client.get_resource_claim("ns", "c1")
    assert claim is not None and (claim.namespace, claim.name, claim.uid) == ("ns", "c1", "u1")
    assert kube_client.get_resource_claim("ns", "nope") is None
    node = kube_client.get_node("node-1")
    assert node["spec"]["providerID"] == "cw://n1"
    assert node["metadata"]["labels"] == {"topology.kubernetes.io/zone": "z1"}
    with pytest.raises(KubeNotFound, match="node node-2"):
        kube_client.get_node("node-2")


def test_client_restarts_expired_lists_a_bounded_number_of_times(
    kube: KubernetesEmulator, kube_client: KubeClient
) -> None:
    for i in range(4):
        kube.add_claim("ns", f"c{i}")
    kube.fail(410, continue_only=True, times=2)
    listing = kube_client.list_resource_claims(page_size=2)
    assert len(listing.claims) == 4 and listing.restarts == 2
    kube.fail(410, continue_only=True, times=10)
    with pytest.raises(KubeError, match="410 Expired") as err:
        kube_client.list_resource_claims(page_size=2, max_restarts=3)
    assert err.value.status == 410


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("500", "answered 500 InternalError"),
        ("mid-500", "answered 500 InternalError"),
        ("slow", "did not finish within 0.3 s"),
        ("text-500", "answered 500 without a Status object"),
        ("403", "grant get and list on resourceclaims.resource.k8s.io"),
        ("truncated", "not the expected object"),
    ],
)
def test_client_turns_every_failure_into_an_error(
    kube: KubernetesEmulator, kube_client: KubeClient, fault: str, expected: str
) -> None:
    for i in range(4):
        kube.add_claim("ns", f"c{i}")
    if fault == "500":
        kube.fail(500)
    elif fault == "mid-500":
        kube.fail(500, continue_only=True)
    elif fault == "slow":
        kube.faults.load("delay=1")
    elif fault == "text-500":
        kube.faults.load("status=500")
    elif fault == "403":
        kube.fail(403)
    else:
        kube.faults.load("malformed")
    started = time.monotonic()
    with pytest.raises(KubeError, match=expected):
        kube_client.list_resource_claims(page_size=2, deadline=0.3 if fault == "slow" else None)
    assert time.monotonic() - started < 5  # a guard against hanging, not a timing assertion


def test_client_caps_response_size(kube: KubernetesEmulator) -> None:
    kube.add_claim("ns", "c0")
    kube.faults.load("oversize=100000")
    with (
        KubeClient(str(kube.write_kubeconfig()), max_bytes=50000) as small,
        pytest.raises(KubeError, match="over the 50000-byte limit"),
    ):
        small.list_resource_claims()


def test_config_comes_from_flag_env_or_service_account(
    tmp_path: Path, kube: KubernetesEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    sa = tmp_path / "sa"
    with pytest.raises(ConfigError, match="not in a pod"):
        load_config(service_account_dir=str(sa))
    with pytest.raises(ConfigError, match="no kubeconfig file at /nonexistent"):
        load_config("/nonexistent")
    path = kube.write_kubeconfig(tmp_path / "kc")
    monkeypatch.setenv("KUBECONFIG", str(path))
    config, where = load_config(service_account_dir=str(sa))
    assert where == f"kubeconfig {path} -> {kube.url}"
    monkeypatch.delenv("KUBECONFIG")
    # In a pod: the service account's token, CA and namespace, the service's host and port.
    sa.mkdir()
    (sa / "token").write_text(kube.token)
    (sa / "namespace").write_text("kube-system")
    (sa / "ca.crt").write_text("")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", kube.url.rsplit(":", 1)[1])
    config, where = load_config(service_account_dir=str(sa))
    assert where.startswith("in-cluster service account") and config.cluster.server.startswith(
        "https://127.0.0.1:"
    )
    assert config.user is not None and config.user.token_file == str(sa / "token")


def test_emulate_kubernetes_command(tmp_path: Path) -> None:
    fixture = tmp_path / "objects.json"
    fixture.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [
                    {
                        "apiVersion": "resource.k8s.io/v1",
                        "kind": "ResourceClaim",
                        "metadata": {"name": "nic", "namespace": "ns", "uid": "u-9"},
                        "spec": {"devices": {"requests": []}},
                    },
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {"name": "node-9", "uid": "n-9"},
                        "spec": {"providerID": "x://9"},
                    },
                ],
            }
        )
    )
    proc = subprocess.Popen(
        [
            *CLI,
            "emulate",
            "kubernetes",
            "--fixture",
            str(fixture),
            "--latency",
            "0.001",
            "--api-faults",
            "fail=create:503",
            "--cluster-uid",
            "cluster-9",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=isolated_environ(),
    )
    try:
        assert proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        assert sel.select(30), "no ready line"
        ready = json.loads(proc.stdout.readline())
        kubeconfig = ready["env"]["KUBECONFIG"]
        assert os.path.isfile(kubeconfig)
        with KubeClient(kubeconfig) as c:
            assert c.source.endswith(ready["url"])
            claim = c.get_resource_claim("ns", "nic")
            assert claim is not None and claim.uid == "u-9"
            assert c.get_node("node-9")["spec"]["providerID"] == "x://9"
            assert c.cluster_uid() == "cluster-9"
            claim_ref = ParentRef.resource_claim("ns", "nic")
            with pytest.raises(KubeError) as planned:
                c.create_ip_address("10.9.0.1", claim_ref)
            assert planned.value.status == 503
            assert c.create_ip_address("10.9.0.1", claim_ref).parent == claim_ref
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert proc.returncode == 0
    assert not os.path.exists(kubeconfig)  # removed on stop


@pytest.mark.parametrize(
    "text",
    ["", "- a\n", "clusters: 5\ncontexts: []\nusers: []\n", "a: [\n", "apiVersion: v1\n"],
    ids=["empty", "list", "bad-clusters", "bad-yaml", "no-clusters"],
)
def test_malformed_kubeconfig_is_a_config_error_naming_the_file(
    tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broken kubeconfig is the operator's to fix (exit 2, the file named), not a bug."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    path = tmp_path / "kc"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"kubeconfig {path}.*kubectl config view"):
        load_config(str(path))


def test_a_refused_node_read_names_the_node_permission(
    kube: KubernetesEmulator, kube_client: KubeClient
) -> None:
    """A 403 on the Node (CKS) must say to grant get on nodes, not lead with claims."""
    kube.fail(403)
    with pytest.raises(KubeError, match=r"answered 403.*; grant get on nodes \(core group\)"):
        kube_client.get_node("n1")


def _kubeconfig_for(kube: KubernetesEmulator, url: str, path: Path) -> str:
    """The emulator's kubeconfig, pointed at another server."""
    path.write_text(kube.write_kubeconfig().read_text().replace(kube.url, url))
    return str(path)


@pytest.mark.parametrize("phase", ["headers", "body"])
def test_an_api_server_that_drips_its_answer_is_cut_off_at_the_deadline(
    kube: KubernetesEmulator, tmp_path: Path, phase: str
) -> None:
    """One byte every 0.1 s never trips a per-read timeout; the call's deadline ends it."""
    with DrippingServer(phase=phase, interval=0.1) as drip:
        kubeconfig = _kubeconfig_for(kube, drip.url, tmp_path / "kc")
        with KubeClient(kubeconfig, timeout=30) as client:
            start = time.monotonic()
            with pytest.raises(KubeError, match=r"did not finish within 0\.5 s") as err:
                client.get_node("n1", deadline=0.5)
            took = time.monotonic() - start
    assert err.value.transient
    assert took < 0.5 + 2.0, f"a 0.5 s deadline held the caller {took:.2f} s"


def test_an_unreachable_api_server_is_worded_like_every_client(
    kube: KubernetesEmulator, tmp_path: Path
) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = _kubeconfig_for(kube, f"http://127.0.0.1:{port}", tmp_path / "kc")
    with (
        KubeClient(kubeconfig, timeout=5) as client,
        pytest.raises(KubeError, match=r"GET node n1 failed: connection refused \(kubeconfig"),
    ):
        client.get_node("n1")
