"""What DRANET sends and reads, for tests: a realistic ResourceClaim and a
check that an emitted NetworkConfig is gen2 in Go's omit-empty shape.

Used by the core's and the plugins' tests, so that every emitted config
(``describe``, ``profile get``, ``serve`` answers) is held to one definition
of "what DRANET's Go structs would have written".
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from dranet_cloud.host.assembly import HostConfig, IpamConfig, build_host
from dranet_cloud.host.provider_host import ProviderHost

TYPES = ("Passthrough", "IPVLAN")
ADDRESSINGS = ("Static", "DHCP", "Unnumbered")
_TOP = {"profile", "interface", "routes", "rules", "neighbors", "ethtool"}
_INTERFACE = {
    "name",
    "type",
    "addressing",
    "addresses",
    "mtu",
    "hardwareAddr",
    "gsoMaxSize",
    "groMaxSize",
    "gsoIPv4MaxSize",
    "groIPv4MaxSize",
    "disableEbpfPrograms",
    "forwarding",
    "arpIgnore",
    "arpAnnounce",
    "vrf",
    "ipvlan",
}
# Go value (non-pointer) fields: present only when non-zero.
_VALUE_FIELDS = {
    "": {"profile", "routes", "rules", "neighbors"},
    "interface": {"name", "type", "addressing", "addresses"},
    "vrf": {"name"},
    "ipvlan": {"mode", "flag"},
    "route": {"destination", "gateway", "source", "scope", "table"},
    "rule": {"priority", "source", "destination", "table"},
    "neighbor": {"destination", "hardwareAddr"},
    "ethtool": {"features", "privateFlags"},
}


_EXACTLY_ONE = {"deviceClassName": "dranet", "allocationMode": "ExactCount", "count": 1}


@contextmanager
def served_on_unix_socket(host: ProviderHost, directory: Path) -> Iterator[httpx.Client]:
    """``host`` (started) behind a real ``serve`` server on ``directory/hook.sock``."""
    from dranet_cloud.server.runner import ServeOptions, WebhookServer

    with WebhookServer(host, ServeOptions(listen=f"unix://{directory}/hook.sock")) as server:
        assert server.bound is not None and server.bound.path is not None
        transport = httpx.HTTPTransport(uds=server.bound.path)
        with httpx.Client(transport=transport, base_url="http://localhost", timeout=30) as c:
            yield c


@contextmanager
def served_local_ipam(
    directory: Path, specs: list[str], host_root: Path | None = None
) -> Iterator[tuple[ProviderHost, httpx.Client]]:
    """A started host serving only ``local-ipam`` (``--ipam-range`` ``specs``) on a real
    socket in ``directory``, with its SQLite store there; ``host_root`` defaults to it."""

    host = build_host(
        HostConfig(
            cloud_provider_hint="none",
            profile_provider="none",
            host_root=str(host_root or directory),
            env={},
            load_entry_points=False,
            ipam=IpamConfig(ranges=tuple(specs), db=str(directory / "ipam.db")),
        )
    )
    try:
        with served_on_unix_socket(host, directory) as client:
            yield host, client
    finally:
        host.close()


def get_profile_config(client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /GetProfileConfig`` to a test server: the answer, asserted 200 and gen2-shaped."""
    r = client.post("/GetProfileConfig", json=body)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    problems = go_shape_problems(answer, "answer")
    assert problems == [], problems
    return answer


def resource_claim(
    uid: str,
    *,
    namespace: str = "team-a",
    name: str = "trainer-0-nic",
    node: str = "node-a",
    device: str = "pci-0000-00-05-0",
    pods: tuple[tuple[str, str], ...] = (("trainer-0", "5b0c2f4e-8a11-4f3e-9d2c-7e6a1b2c3d4e"),),
) -> dict[str, Any]:
    """A ``resource.k8s.io/v1`` ResourceClaim as gen2 DRANET (PR #282) sends it.

    Allocated by ``dra.net`` on ``node`` (the pool) to DRA device ``device``,
    reserved for ``pods`` (name, uid).
    """
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": "184467",
            "creationTimestamp": "2026-12-03T09:00:00Z",
            "annotations": {"resource.kubernetes.io/pod-claim-name": "nic"},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pods[0][0] if pods else "owner",
                    "uid": pods[0][1] if pods else "0",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "devices": {
                "requests": [{"name": "nic", "exactly": dict(_EXACTLY_ONE)}],
                "config": [
                    {
                        "requests": ["nic"],
                        "opaque": {
                            "driver": "dra.net",
                            "parameters": {"interface": {"type": "IPVLAN"}},
                        },
                    }
                ],
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "nic", "driver": "dra.net", "pool": node, "device": device}
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": n, "uid": u} for n, u in pods],
        },
    }


def _zero(value: Any) -> bool:
    if isinstance(value, bool):
        return value is False
    return value in ("", 0, [], {}) or value is None


def _values(doc: dict[str, Any], kind: str, where: str) -> list[str]:
    return [
        f"{where}.{key}: {value!r} is a zero value Go would omit"
        for key, value in doc.items()
        if key in _VALUE_FIELDS[kind] and _zero(value)
    ]


def go_shape_problems(doc: Any, where: str = "config") -> list[str]:
    """Why ``doc`` is not a NetworkConfig as gen2 DRANET writes it (empty: it is).

    Checks: only gen2 spellings (``type``, ``addressing``, ipvlan ``L2``/``Bridge``;
    no ``unnumbered``, no deprecated ``dhcp``), ``interface`` present, no field
    Go's ``omitempty`` would have dropped, no null anywhere.
    """
    if not isinstance(doc, dict):
        return [f"{where}: not an object"]
    problems = [f"{where}.{k}: not a NetworkConfig field" for k in doc if k not in _TOP]
    problems += _values(doc, "", where)
    iface = doc.get("interface")
    if not isinstance(iface, dict):
        return [*problems, f"{where}.interface: missing (Go always writes it)"]
    at = f"{where}.interface"
    problems += [f"{at}.{k}: not a gen2 interface field" for k in iface if k not in _INTERFACE]
    problems += _values(iface, "interface", at)
    problems += [f"{at}.{k}: null" for k, v in iface.items() if v is None]
    if "type" in iface and iface["type"] not in TYPES:
        problems.append(f"{at}.type: {iface['type']!r} is not gen2 ({'/'.join(TYPES)})")
    if "addressing" in iface and iface["addressing"] not in ADDRESSINGS:
        problems.append(f"{at}.addressing: {iface['addressing']!r} is not gen2")
    ipvlan = iface.get("ipvlan")
    if ipvlan is not None:
        problems += _values(ipvlan, "ipvlan", f"{at}.ipvlan")
        if ipvlan.get("mode", "L2") != "L2" or ipvlan.get("flag", "Bridge") != "Bridge":
            problems.append(f"{at}.ipvlan: {ipvlan!r} is not gen2 (L2, Bridge)")
    if isinstance(iface.get("vrf"), dict):
        problems += _values(iface["vrf"], "vrf", f"{at}.vrf")
    for key, kind in (("routes", "route"), ("rules", "rule"), ("neighbors", "neighbor")):
        for i, entry in enumerate(doc.get(key) or []):
            problems += _values(entry, kind, f"{where}.{key}[{i}]")
    if isinstance(doc.get("ethtool"), dict):
        problems += _values(doc["ethtool"], "ethtool", f"{where}.ethtool")
    return problems
