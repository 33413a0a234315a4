"""The deploy/ manifests, validated offline against Kubernetes' own schemas.

kubernetes-validate ships the OpenAPI-derived JSON schemas of each
Kubernetes release, so nothing is fetched.  The component is rendered on top
of a DaemonSet shaped like DRANET's (tests/fixtures/dranet-overlay): with
``kubectl kustomize`` when kubectl is installed, else by applying the two
patches the way kustomize does for these shapes.  The sidecar's arguments and
probe commands are then parsed by the real CLI, so a renamed flag breaks here
and not on a node.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate")

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
OVERLAY = REPO / "tests" / "fixtures" / "dranet-overlay"
# Native sidecars (init containers with restartPolicy: Always) need 1.29+.
K8S_VERSIONS = ("1.30.0", "1.37.0")


def load_all(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def by_name(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(i for i in items if i["name"] == name)


def render_without_kubectl() -> list[dict[str, Any]]:
    """What kustomize makes of these two patches: merge by name, append the args."""
    base = load_all(OVERLAY / "dranet-daemonset.yaml")[0]
    out = copy.deepcopy(base)
    patch = load_all(DEPLOY / "sidecar.yaml")[0]["spec"]["template"]["spec"]
    spec = out["spec"]["template"]["spec"]
    for key in ("initContainers", "volumes"):
        merged = {i["name"]: i for i in spec.get(key, [])}
        for item in patch.get(key, []):
            merged[item["name"]] = {**merged.get(item["name"], {}), **item}
        spec[key] = list(merged.values())
    for op in yaml.safe_load((DEPLOY / "dranet-args.yaml").read_text()):
        assert op["op"] == "add" and op["path"].endswith("/containers/0/args/-")
        spec["containers"][0]["args"].append(op["value"])
    return [*load_all(DEPLOY / "rbac.yaml"), out]


def render() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return render_without_kubectl()
    res = subprocess.run(
        [kubectl, "kustomize", str(OVERLAY)], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    return [d for d in yaml.safe_load_all(res.stdout) if d]


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    return render()


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_rendered_object_validates(rendered: list[dict[str, Any]], version: str) -> None:
    kinds = sorted(d["kind"] for d in rendered)
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "DaemonSet"]
    for doc in rendered:
        kubernetes_validate.validate(doc, version, strict=True)


def test_fallback_render_matches_kubectl(rendered: list[dict[str, Any]]) -> None:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed; only the fallback renderer ran")
    ours = {d["kind"]: d for d in render_without_kubectl()}
    theirs = {d["kind"]: d for d in rendered}
    spec, want = (
        theirs["DaemonSet"]["spec"]["template"]["spec"],
        ours["DaemonSet"]["spec"]["template"]["spec"],
    )
    assert spec["containers"][0]["args"] == want["containers"][0]["args"]
    assert by_name(spec["initContainers"], "dranet-cloud") == by_name(
        want["initContainers"], "dranet-cloud"
    )


def test_sidecar_shares_the_socket_and_keeps_ipam_on_the_host(
    rendered: list[dict[str, Any]],
) -> None:
    ds = next(d for d in rendered if d["kind"] == "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    sidecar = by_name(spec["initContainers"], "dranet-cloud")
    dranet = by_name(spec["containers"], "dranet")
    assert sidecar["restartPolicy"] == "Always"  # native sidecar: up before DRANET
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in sidecar["volumeMounts"]}
    dranet_mounts = {m["name"]: m["mountPath"] for m in dranet["volumeMounts"]}
    assert volumes["dranet-run"]["hostPath"]["path"] == "/var/run/dranet"
    listen = next(a for a in sidecar["args"] if a.startswith("--listen="))
    sock = listen.removeprefix("--listen=unix://")
    assert sock.startswith(mounts["dranet-run"] + "/")
    webhook = next(a for a in dranet["args"] if a.startswith("--webhook-url="))
    assert webhook == (f"--webhook-url=unix://{dranet_mounts['dranet-run']}/{Path(sock).name}"), (
        "DRANET must dial the socket the sidecar listens on"
    )
    db = next(a for a in sidecar["args"] if a.startswith("--ipam-db="))
    assert db.removeprefix("--ipam-db=").startswith(mounts["dranet-cloud-ipam"] + "/")
    assert "hostPath" in volumes["dranet-cloud-ipam"]
    assert spec["serviceAccountName"] == "dranet"
    # What plugins read through --host-root: sysfs, and the host's IPv6
    # addresses and routes under proc/net (Azure, Aliyun); nothing else of /proc.
    root = next(a for a in sidecar["args"] if a.startswith("--host-root=")).split("=", 1)[1]
    assert mounts["dranet-cloud-sys"] == f"{root}/sys"
    assert mounts["dranet-cloud-procnet"] == f"{root}/proc/net"
    assert volumes["dranet-cloud-procnet"]["hostPath"]["path"] == "/proc/1/net"


def test_sidecar_arguments_and_probes_parse_with_the_real_cli(
    rendered: list[dict[str, Any]],
) -> None:
    from dranet_cloud.cli.main import _split_global, build_parser

    ds = next(d for d in rendered if d["kind"] == "DaemonSet")
    sidecar = by_name(ds["spec"]["template"]["spec"]["initContainers"], "dranet-cloud")
    rest, _, log_format = _split_global(sidecar["args"])  # what main() does first
    args = build_parser("serve").parse_args(rest)
    assert args.command == "serve" and log_format == "json"
    for probe in ("startupProbe", "livenessProbe"):
        command = sidecar[probe]["exec"]["command"]
        assert command[:2] == ["dranet-cloud", "health"], "probes must not import the server"
        parsed = build_parser("health").parse_args(command[1:])
        assert parsed.listen == next(a for a in sidecar["args"] if a.startswith("--listen="))[9:]


def test_rbac_grants_what_leak_reclaiming_and_cks_read() -> None:
    docs = {d["kind"]: d for d in load_all(DEPLOY / "rbac.yaml")}
    rules = {
        (group, res): set(rule["verbs"])
        for rule in docs["ClusterRole"]["rules"]
        for group in rule["apiGroups"]
        for res in rule["resources"]
    }
    assert rules == {
        ("resource.k8s.io", "resourceclaims"): {"get", "list"},
        ("", "nodes"): {"get"},
        ("", "namespaces"): {"get"},  # only kube-system: the cluster's identity
        # --ipam-scope cluster: addresses as IPAddress objects, reclaimed when claims go
        ("networking.k8s.io", "ipaddresses"): {"create", "get", "list", "watch", "delete"},
    }
    namespaces = next(r for r in docs["ClusterRole"]["rules"] if "namespaces" in r["resources"])
    assert namespaces["resourceNames"] == ["kube-system"]
    subject = docs["ClusterRoleBinding"]["subjects"][0]
    assert (subject["kind"], subject["name"], subject["namespace"]) == (
        "ServiceAccount",
        "dranet",
        "kube-system",
    )


def test_containerfile_installs_every_plugin() -> None:
    text = (REPO / "Containerfile").read_text()
    assert '".[server]" plugins/*/' in text  # every plugin directory becomes a wheel
    assert "/tmp/wheels/dranet_cloud_*.whl" in text  # and every plugin wheel is installed
    assert "USER 65532" in text and 'ENTRYPOINT ["dranet-cloud"]' in text
