"""The GCE instance snapshot and its parsing from the recursive metadata tree.

Everything the plugin needs comes from one document, the answer to
``GET /computeMetadata/v1/?recursive=true&alt=json``.  Parsing is tolerant on
purpose: a NIC entry the plugin cannot understand is skipped with a warning
instead of failing the whole node, because one odd NIC must not stop DRANET
from publishing the other eight.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dranet_cloud.contract.context import InstanceSnapshot
from dranet_cloud.toolkit.hwaddr import entry_mac, warn_no_usable_nic
from dranet_cloud.toolkit.value_checks import require_shape
from dranet_cloud.wire.models import DeviceIdentifiers

from .machines import gpudirect_for

PLUGIN = "gce"
log = logging.getLogger(__name__)

# GCE hands every VM a /96 of its subnet's IPv6 range; a metadata entry
# without a prefix length is read as the start of that /96.
DEFAULT_VM_IPV6_PREFIX = 96

_NETWORK_RE = re.compile(r"projects/(?P<project>[^/]+)/networks/(?P<name>[^/]+)$")


class GceNic(BaseModel):
    """One entry of ``instance/network-interfaces``, normalized."""

    model_config = ConfigDict(frozen=True)

    index: int
    mac: str
    ip: str | None = None
    subnetmask: str | None = None
    gateway: str | None = None
    mtu: int | None = None
    network: str | None = None
    network_name: str | None = None
    network_project_number: int | None = None
    ip_aliases: list[str] = Field(default_factory=list)
    ipv6_ranges: list[str] = Field(default_factory=list)

    def subnet(self) -> ipaddress.IPv4Network | None:
        """The NIC's subnet from ``ip`` and ``subnetmask`` (``None`` if unknown)."""
        if not self.ip or not self.subnetmask:
            return None
        try:
            return ipaddress.IPv4Network(f"{self.ip}/{self.subnetmask}", strict=False)
        except ValueError:
            return None


class GceInstance(InstanceSnapshot):
    """What the GCE plugin knows about the VM, loaded in one metadata request."""

    provider: str = PLUGIN
    name: str | None = None
    instance_id: str | None = None
    hostname: str | None = None
    machine_type: str | None = None
    zone: str | None = None
    project_id: str | None = None
    project_number: int | None = None
    physical_host: str | None = None
    block: str | None = None
    sub_block: str | None = None
    host: str | None = None
    gpu_direct: str | None = None
    nics: list[GceNic] = Field(default_factory=list)

    def known_macs(self) -> frozenset[str]:
        return frozenset(nic.mac for nic in self.nics)

    def nic_for(self, device: DeviceIdentifiers) -> GceNic | None:
        """The metadata NIC whose MAC matches ``device`` (compared normalized)."""
        mac = device.mac
        if mac is None:
            return None
        for nic in self.nics:
            if nic.mac == mac:
                return nic
        return None


# --- parsing ---------------------------------------------------------------------


def _base_name(value: Any) -> str | None:
    """``projects/1/machineTypes/a3-megagpu-8g`` -> ``a3-megagpu-8g``."""
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip().rstrip("/").rsplit("/", 1)[-1] or None


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _as_str(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _str_list(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [v.strip() for v in value if isinstance(v, str) and v.strip()]


def split_topology(physical_host: str | None) -> tuple[str, str, str] | None:
    """``/block/subBlock/host`` -> its three parts, or ``None`` when malformed."""
    if not physical_host:
        return None
    parts = physical_host.strip().strip("/").split("/")
    if len(parts) != 3 or not all(parts):
        return None
    return parts[0], parts[1], parts[2]


def parse_network(network: str | None) -> tuple[int | None, str | None]:
    """``projects/<number>/networks/<name>`` -> (project number, network name)."""
    if not network:
        return None, None
    match = _NETWORK_RE.search(network.strip())
    if match is None:
        return None, _base_name(network)
    return _as_int(match["project"]), match["name"]


def _networks(raw: Any, index: int, *, version: int, field: str) -> list[str]:
    """The IPv``version`` networks of a metadata list, as CIDR strings.

    A bare address is a /32 (IPv4 alias) or the VM's /96 (IPv6); an entry
    that is no network of that version is skipped with a warning naming it.
    """
    default = 32 if version == 4 else DEFAULT_VM_IPV6_PREFIX
    out: list[str] = []
    for entry in _str_list(raw):
        text = entry if "/" in entry else f"{entry}/{default}"
        try:
            net = ipaddress.ip_network(text, strict=False)
        except ValueError:
            log.warning("gce: NIC %d: ignoring unparsable %s entry %r", index, field, entry)
            continue
        if net.version != version:
            log.warning("gce: NIC %d: ignoring non-IPv%d %s entry %r", index, version, field, entry)
            continue
        out.append(str(net))
    return out


def parse_nic(index: int, raw: Any, document: str = "the metadata tree") -> GceNic | None:
    """One NIC, or ``None`` (one warning naming it) when it has no usable MAC."""
    entry = f"instance/network-interfaces/{index}"
    if not isinstance(raw, dict):
        log.warning("gce: %s in %s is not an object; skipped", entry, document)
        return None
    mac = entry_mac(raw.get("mac"), plugin=PLUGIN, entry=f"{entry}/mac", document=document)
    if mac is None:
        return None
    network = _as_str(raw.get("network"))
    project_number, network_name = parse_network(network)
    # Both spellings exist: the metadata server's ``ipv6s`` and the ``ipv6``
    # that DRANET's Go structs (and some proxies) use.
    ipv6_raw = _str_list(raw.get("ipv6s")) + _str_list(raw.get("ipv6"))
    mtu = _as_int(raw.get("mtu"))
    return GceNic(
        index=index,
        mac=mac,
        ip=_as_str(raw.get("ip")),
        subnetmask=_as_str(raw.get("subnetmask")),
        gateway=_as_str(raw.get("gateway")),
        mtu=mtu if mtu and mtu > 0 else None,
        network=network,
        network_name=network_name,
        network_project_number=project_number,
        ip_aliases=_networks(raw.get("ipAliases"), index, version=4, field="ipAliases"),
        ipv6_ranges=list(dict.fromkeys(_networks(ipv6_raw, index, version=6, field="IPv6"))),
    )


# Machine types and zones are lower-case names: a3-megagpu-8g, us-central1-a.
_GCE_NAME = re.compile(r"[a-z][a-z0-9-]{0,62}")


def parse_instance(tree: Any, endpoint: str | None = None) -> GceInstance:
    """Build the snapshot from the recursive ``{"instance": ..., "project": ...}`` tree.

    Raises ``ValueError`` when the document is not that shape at all (the
    caller turns it into a ``ProviderUnavailable`` naming the endpoint).  A
    NIC list with no usable entry is no such error: the snapshot then has no
    NICs, and one warning says so.
    """
    if not isinstance(tree, dict) or not isinstance(tree.get("instance"), dict):
        raise ValueError("the recursive metadata answer has no 'instance' object")
    inst: dict[str, Any] = tree["instance"]
    project: dict[str, Any] = _as_dict(tree.get("project"))
    attributes: dict[str, Any] = _as_dict(inst.get("attributes"))

    machine_type = _base_name(inst.get("machineType"))
    zone = _base_name(inst.get("zone"))
    require_shape(machine_type, "machineType", "a machine type", _GCE_NAME)
    require_shape(zone, "zone", "a GCE zone", _GCE_NAME)
    physical_host = _as_str(attributes.get("physical_host"))
    topology = split_topology(physical_host)
    if physical_host and topology is None:
        log.warning(
            "gce: physical_host %r is not /block/subBlock/host; topology attributes skipped",
            physical_host,
        )

    raw_nics = inst.get("networkInterfaces")
    entries = raw_nics if isinstance(raw_nics, list) else []
    document = f"the metadata tree from {endpoint or 'the metadata server'}"
    nics: list[GceNic] = []
    seen: set[str] = set()
    for index, raw in enumerate(entries):
        nic = parse_nic(index, raw, document)
        if nic is None:
            continue
        if nic.mac in seen:
            log.warning("gce: NIC %d repeats MAC %s; the first entry wins", index, nic.mac)
            continue
        seen.add(nic.mac)
        nics.append(nic)
    if not nics:
        # The instance is still GCE's (its machine type and zone passed the
        # shape checks above): publish its facts, warn that no NIC has its own.
        warn_no_usable_nic(PLUGIN, f"instance/network-interfaces of {document}", len(entries))

    return GceInstance(
        endpoint=endpoint,
        name=_as_str(inst.get("name")),
        instance_id=_as_str(inst.get("id")),
        hostname=_as_str(inst.get("hostname")),
        machine_type=machine_type,
        zone=zone,
        project_id=_as_str(project.get("projectId")),
        project_number=_as_int(project.get("numericProjectId")),
        physical_host=physical_host,
        block=topology[0] if topology else None,
        sub_block=topology[1] if topology else None,
        host=topology[2] if topology else None,
        gpu_direct=gpudirect_for(machine_type),
        nics=nics,
    )
