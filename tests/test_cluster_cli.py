"""``--ipam-scope`` on ``profile get|release``, ``ipam gc`` and ``serve``: flags, errors, exits."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dranet_cloud.cli.main import main as cli_main
from dranet_cloud.testing.environ import isolated_environ
from dranet_cloud.testing.kubernetes import KubernetesEmulator

from .argv import serve_argv
from .test_server_cli import CLI, REPO

MAC = "0c:42:a1:00:00:11"


def cluster_flags(kube: KubernetesEmulator, node: str = "node-a") -> list[str]:
    """The flags that put a command in cluster scope, as ``node``, against the emulator."""
    kubeconfig = str(kube.write_kubeconfig())
    return ["--ipam-scope", "cluster", "--node-name", node, "--kubeconfig", kubeconfig]


def profile(tmp: Path, kube: KubernetesEmulator, action: str, claim: str, *extra: str) -> int:
    (tmp / "config.json").write_text(json.dumps({"profile": "local-ipam", "interface": {}}))
    return cli_main(
        [
            "profile",
            action,
            "--host-root",
            str(tmp),
            "--ipam-range",
            "10.33.0.0/24",
            "--ipam-db",
            str(tmp / "ipam.db"),
            *cluster_flags(kube),
            "--device",
            f"name=eth1,mac={MAC}",
            "--config",
            str(tmp / "config.json"),
            *(["--claim", claim] if claim.endswith(".json") else ["--claim-uid", claim]),
            "-o",
            "json",
            *extra,
        ]
    )


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = isolated_environ()
    env.pop("NODE_NAME", None)
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=REPO, env=env)


def claim_file(tmp: Path, kube: KubernetesEmulator, name: str) -> str:
    stored = kube.add_claim("team", name, uid=f"uid-{name}", node="node-a")
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(stored))
    return str(path)


def test_profile_get_and_release_in_cluster_scope(
    tmp_path: Path, kube: KubernetesEmulator, capsys: pytest.CaptureFixture[str]
) -> None:
    one = claim_file(tmp_path, kube, "one")
    assert profile(tmp_path, kube, "get", one) == 0
    (address,) = json.loads(capsys.readouterr().out)["interface"]["addresses"]
    (obj,) = kube.ip_addresses()
    assert f"{obj['metadata']['name']}/32" == address
    assert obj["spec"]["parentRef"]["name"] == "one"
    # A retry by UID alone is answered from the journal, once one GET shows the object
    # still there (a one-shot command keeps no watch).
    kube.reset_calls()
    assert profile(tmp_path, kube, "get", "uid-one") == 0
    assert json.loads(capsys.readouterr().out)["interface"]["addresses"] == [address]
    assert kube.calls() == {"get": 1}
    # A new claim known only by UID (gen1 DRANET): the pod of this node that uses it
    # names it for the parentRef.
    kube.add_claim("team-b", "two", uid="uid-two", node="node-a")
    kube.add_pod("team-b", "two-0", node="node-a", claims=(("net", "two"),))
    assert profile(tmp_path, kube, "get", "uid-two") == 0
    capsys.readouterr()
    parents = {o["spec"]["parentRef"]["name"]: o for o in kube.ip_addresses()}
    assert parents["two"]["spec"]["parentRef"]["namespace"] == "team-b"
    # A UID no pod of this node names: temporary (exit 5, the kubelet retries), nothing written.
    assert profile(tmp_path, kube, "get", "uid-nobody") == 5
    assert "no live pod of node node-a" in capsys.readouterr().err
    assert len(kube.ip_addresses()) == 2
    # The API's creates fail: a new claim exits 5 (temporary), nothing is handed out.
    kube.fail(503, times=None, verb="create", resource="ipaddresses")
    assert profile(tmp_path, kube, "get", claim_file(tmp_path, kube, "three")) == 5
    assert len(kube.ip_addresses()) == 2
    kube.clear_faults()
    capsys.readouterr()
    # The journal shows where each address stands with the API.
    db = str(tmp_path / "ipam.db")
    assert cli_main(["ipam", "list", "--ipam-db", db, "--ipam-scope", "cluster", "-o", "json"]) == 0
    listed = {a["claim_uid"]: a["ipaddress"] for a in json.loads(capsys.readouterr().out)}
    assert listed == {"uid-one": "bound", "uid-two": "bound", "uid-three": "pending"}
    assert profile(tmp_path, kube, "release", one) == 0
    assert json.loads(capsys.readouterr().out)["released"] is True
    assert [o["spec"]["parentRef"]["name"] for o in kube.ip_addresses()] == ["two"]


def test_ipam_gc_sweeps_the_objects_of_gone_claims(
    tmp_path: Path, kube: KubernetesEmulator, capsys: pytest.CaptureFixture[str]
) -> None:
    keep, drop = claim_file(tmp_path, kube, "keep"), claim_file(tmp_path, kube, "drop")
    assert profile(tmp_path, kube, "get", keep) == 0
    assert profile(tmp_path, kube, "get", drop) == 0
    # An object another node left behind, for a claim that is gone too.
    kube.add_ip_address(
        "10.33.0.200",
        parent={
            "group": "resource.k8s.io",
            "resource": "resourceclaims",
            "namespace": "team",
            "name": "old",
        },
        labels={"ipaddress.kubernetes.io/managed-by": "dranet-cloud.dra.net"},
        annotations={"dranet-cloud.dra.net/claim-uid": "uid-old"},
    )
    kube.delete_claim("team", "drop")
    capsys.readouterr()
    argv = [
        "ipam",
        "gc",
        "--kubernetes",
        "--grace",
        "0s",
        "--ipam-db",
        str(tmp_path / "ipam.db"),
        *cluster_flags(kube),
        "-o",
        "json",
    ]
    assert cli_main(argv) == 0
    out = capsys.readouterr()
    assert [a["claim_uid"] for a in json.loads(out.out)] == ["uid-drop"]
    # The object the journal holds ("keep") is not judged at all; the other node's is.
    assert "deleted 1 of 1 IPAddress object(s)" in out.err
    (left,) = kube.ip_addresses()
    assert left["spec"]["parentRef"]["name"] == "keep"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "--node-name"),
        (["--node-name", "n1"], "--ipam-scope cluster needs the Kubernetes API"),
        (["--node-name", "n1", "--ipam-memory", "--kubeconfig", "K"], "drop --ipam-memory"),
    ],
)
def test_serve_refuses_cluster_scope_without_what_it_needs(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    extra = [str(tmp_path / "kc") if a == "K" else a for a in extra]
    (tmp_path / "kc").write_text("{}")
    res = run_cli(
        *serve_argv(tmp_path),
        "--ipam-range",
        "10.33.0.0/24",
        "--ipam-db",
        str(tmp_path / "ipam.db"),
        "--ipam-scope",
        "cluster",
        *extra,
    )
    assert res.returncode == 2, res.stderr
    assert message in res.stderr
