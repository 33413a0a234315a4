"""Every request DRANET would send about a plugin's sample node, and its answers compared.

A sidecar answers from the node files its pod mounts under ``--host-root``.
To prove a deployment mounts enough, a test cuts the sample node down to the
mounted directories (:func:`copy_host_paths`), sends each request
(:func:`sample_requests`: attributes and config of every device DRANET
publishes, for a cloud plugin; each claim the sample offers, and its release,
for a profile plugin) and requires the answers to be the whole node's
(:func:`compare`).  Addresses drawn from a range (GCE starts at a random
point) are compared by family and prefix length; everything else exactly.

Used by tests/test_deploy_overlays.py (the rendered overlays) and by the
conformance suite (a plugin's ``host_paths`` declaration).  Standard library
and the core only; it does not import pytest.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from dranet_cloud.contract.context import ProviderOptions, SampleHost
from dranet_cloud.host.attribute_budget import dranet_devices
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import MemoryStore
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.testing.dranet_wire import served_on_unix_socket
from dranet_cloud.toolkit.errors import DranetCloudError

__all__ = [
    "Answer",
    "SampleRequest",
    "answers_in_process",
    "compare",
    "copy_host_paths",
    "sample_requests",
    "send",
]

# Bounds: a sample answer is small; a runaway one is a failure, not a hog.
MAX_ANSWER_CHARS = 64 << 10
MAX_REQUESTS = 512


@dataclass(frozen=True)
class SampleRequest:
    """One POST DRANET sends the sidecar, with a label naming the device and claim."""

    path: str
    body: dict[str, Any]
    label: str
    must_succeed: bool = True  # a 200 on the whole node (releases, claims, devices)


@dataclass(frozen=True)
class Answer:
    """What came back: the status and the body (JSON when it parses, else text)."""

    label: str
    status: int
    body: Any

    def shape(self) -> tuple[int, Any]:
        """What must match the whole node's answer (error text names paths: status only)."""
        if self.status != 200:
            return self.status, None
        return self.status, _drawn_addresses(self.body)


def _drawn_addresses(body: Any) -> Any:
    """``body`` with each address of ``interface.addresses`` replaced by its shape.

    The claim's addresses are drawn from a range (at a random point for
    GCE), and they reappear in the answer's rules and routes (a source
    address): every mention becomes ``<IPv6/128 #0>``, so the comparison
    keeps the family, the prefix length and where the address is used.
    """
    iface = body.get("interface") if isinstance(body, dict) else None
    drawn = iface.get("addresses") if isinstance(iface, dict) else None
    if not isinstance(drawn, list):
        return body
    names: dict[str, str] = {}
    for n, text in enumerate(drawn):
        try:
            addr = ipaddress.ip_interface(str(text))
        except ValueError:
            continue
        names[str(addr.ip)] = f"<IPv{addr.version}/{addr.network.prefixlen} #{n}>"
    return _replace(body, names)


def _replace(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _replace(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, names) for v in value]
    if isinstance(value, str):
        ip, slash, _ = value.partition("/")
        if ip in names:
            return names[ip] if slash else names[ip].partition("/")[0] + ">"
    return value


def copy_host_paths(source: Path, dest: Path, paths: Iterable[str]) -> Path:
    """A copy of node root ``source`` under ``dest`` holding only ``paths`` (node directories).

    Symlinks are copied as links (sysfs links are relative and stay inside
    ``/sys``), so the copy reads as the original does wherever it is mounted.
    A path the source does not hold is simply absent, as a hostPath of a
    directory the node lacks would be empty.
    """
    dest.mkdir(parents=True, exist_ok=True)
    for path in sorted(set(paths)):
        rel = path.strip("/")
        src = source / rel
        if not src.exists():
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, target, symlinks=True, dirs_exist_ok=True)
    return dest


def sample_requests(
    registry: PluginRegistry, plugin: str, sample: SampleHost
) -> list[SampleRequest]:
    """The requests DRANET would send the sidecar on ``sample`` with ``plugin`` as its cloud.

    Cloud role: ``GetDeviceAttributes`` and ``GetDeviceConfig`` for every
    device DRANET publishes on the node (PCI functions without a netdev
    too).  Profile role: the sample's IPVLAN claim on ``claim_device`` (the
    demo's ``<plugin>-subinterface`` claim) and the own-address profile's
    claim on each of ``own_address_nics`` (else the ``own_address_claim``
    NIC), each followed by its release.
    """
    devices = dranet_devices(HostRoot(sample.root))
    by_name = {d.name: d for d in devices if d.name}
    roles = registry.roles(plugin)
    out: list[SampleRequest] = []
    if "cloud" in roles:
        for dev in devices:
            label = dev.label()
            out.append(SampleRequest("/GetDeviceAttributes", dev.to_wire(), f"attributes {label}"))
            out.append(SampleRequest("/GetDeviceConfig", dev.to_wire(), f"config {label}"))
    claims: list[tuple[str, dict[str, Any]]] = []
    if "profile" in roles and sample.claim_device:
        ipvlan = {"profile": f"{plugin}-subinterface", "interface": {"type": "IPVLAN"}}
        claims.append((sample.claim_device, ipvlan))
    if "profile" in roles and sample.own_address_claim is not None:
        nic, profile = sample.own_address_claim
        for name in sample.own_address_nics or (nic,):
            claims.append((name, {"profile": profile}))
    for n, (nic, config) in enumerate(claims):
        claimed = by_name.get(nic)
        if claimed is None:
            raise ValueError(
                f"plugin {plugin}: the sample names claim NIC {nic!r}, which the sample node "
                f"does not have (it has {', '.join(sorted(by_name)) or 'none'})"
            )
        uid = f"00000000-0000-4000-8000-{n:012d}"
        label = f"claim {uid[-4:]} on {nic} ({config['profile']})"
        body = {"device": claimed.to_wire(), "claim_uid": uid, "config": config}
        out.append(SampleRequest("/GetProfileConfig", body, label))
        release = {"device": claimed.to_wire(), "claim_uid": uid}
        out.append(SampleRequest("/ReleaseProfileConfig", release, f"release of {label}"))
    if len(out) > MAX_REQUESTS:
        raise ValueError(f"plugin {plugin}: {len(out)} sample requests, over {MAX_REQUESTS}")
    return out


def send(client: httpx.Client, requests: Sequence[SampleRequest]) -> list[Answer]:
    """POST each request on ``client`` (a sidecar's socket) in order; collect the answers."""
    out: list[Answer] = []
    for req in requests:
        r = client.post(f"http://localhost{req.path}", json=req.body)
        text = r.text[:MAX_ANSWER_CHARS]
        try:
            body: Any = json.loads(text) if text else None
        except ValueError:
            body = text
        out.append(Answer(req.label, r.status_code, body))
    return out


def answers_in_process(
    registry: PluginRegistry,
    plugin: str,
    root: Path,
    env: dict[str, str],
    requests: Sequence[SampleRequest],
    *,
    detect: bool = True,
    probe_timeout: float = 10.0,
) -> list[Answer]:
    """``requests`` answered by a real ``serve`` server in this process for ``plugin`` on ``root``.

    The reference a sidecar's answers are held to (and cheaper than a
    process when a test compares many cut-down roots).  ``detect``: the
    cloud is auto-detected from ``root``, as a sidecar without
    ``--cloud-provider-hint`` does (the overlays' flags), so DMI counts;
    otherwise ``plugin`` is named explicitly.  A host that cannot start, or
    that detects another cloud, answers every request 503 with the reason,
    so a cut that breaks start-up reads as a difference, not a crash.
    """
    host = ProviderHost(
        cloud_provider_hint="" if detect else plugin,
        host_root=str(root),
        env=env,
        ipam=MemoryStore(),
        registry=registry,
        # A loaded test machine must not turn a slow first probe (CKS imports
        # its Kubernetes client) into "no cloud": the cut, not the clock, decides.
        options=ProviderOptions(probe_timeout=probe_timeout),
    )
    try:
        try:
            host.start()
        except DranetCloudError as exc:
            return [Answer(r.label, 503, f"the host did not start: {exc}") for r in requests]
        if host.cloud != plugin:  # detection on the cut root found another cloud, or none
            why = f"detection chose {host.cloud or 'no cloud'}, not {plugin}"
            return [Answer(r.label, 503, why) for r in requests]
        # A short directory of its own: a unix socket path has 107 bytes at most.
        with (
            tempfile.TemporaryDirectory(prefix="dc-") as short,
            served_on_unix_socket(host, Path(short)) as client,
        ):
            return send(client, requests)
    finally:
        host.close()


def compare(
    requests: Sequence[SampleRequest], whole: Sequence[Answer], cut: Sequence[Answer]
) -> list[str]:
    """How the answers on the cut-down node differ from the whole node's (empty: none).

    Also a request that must succeed and did not on the whole node is a
    problem: the sample itself is broken, not the cut.
    """
    problems: list[str] = []
    for req, full, got in zip(requests, whole, cut, strict=True):
        if req.must_succeed and full.status != 200:
            problems.append(
                f"{req.label}: {full.status} on the whole sample node ({_short(full.body)})"
            )
        elif got.shape() != full.shape():
            problems.append(
                f"{req.label}: answered {got.status} {_short(got.body)}; the whole node "
                f"answers {full.status} {_short(full.body)}"
            )
    return problems


def _short(body: Any, limit: int = 300) -> str:
    text = body if isinstance(body, str) else json.dumps(body, separators=(",", ":"))
    return text if len(text) <= limit else text[:limit] + "..."
