"""The instance snapshot: what Azure IMDS says about this VM.

Built once from the document ``GET /metadata/instance?api-version=…&format=json``
returns (``{"compute": {...}, "network": {"interface": [...]}}``) and then
serving every later hook without network I/O.

Parsing is lenient where DRANET's Go structs are (unknown fields ignored,
missing ones empty) and stricter where a wrong value would reach the kernel:
a NIC entry without a usable MAC is skipped with a warning, but it keeps its
place in the list, because the NIC's position is its route table number.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from typing import Any

from pydantic import BaseModel, Field

from dranet_cloud.contract.context import InstanceSnapshot
from dranet_cloud.toolkit.hwaddr import entry_mac, warn_no_usable_nic
from dranet_cloud.toolkit.value_checks import require_shape

from .constants import PLUGIN

log = logging.getLogger(__name__)


class AzureSubnet(BaseModel):
    """One ``ipv4.subnet`` entry: the subnet's base address and prefix length, as text."""

    address: str
    prefix: str


class AzureNic(BaseModel):
    """One entry of ``network.interface``, with its position in that list."""

    index: int
    mac: str  # normalized: lower-case, colon-separated
    imds_mac: str  # as IMDS spells it (upper-case, no separators)
    ipv4_addresses: list[str] = Field(default_factory=list)
    public_ipv4_addresses: list[str] = Field(default_factory=list)
    ipv4_subnets: list[AzureSubnet] = Field(default_factory=list)
    ipv6_addresses: list[str] = Field(default_factory=list)


class AzureInstance(InstanceSnapshot):
    """The VM: DRANET's four compute facts, a few for operators, its NICs in IMDS order."""

    provider: str = PLUGIN
    vm_id: str = ""
    name: str = ""
    location: str = ""
    zone: str = ""
    vm_size: str = ""
    placement_group_id: str = ""
    interconnect_group_id: str = ""
    interconnect_subgroup_id: str = ""
    interfaces: list[AzureNic] = Field(default_factory=list)

    def known_macs(self) -> frozenset[str]:
        return frozenset(nic.mac for nic in self.interfaces)

    def nic_for_mac(self, mac: str | None) -> AzureNic | None:
        """The IMDS NIC with this normalized MAC, the first one if listed twice."""
        return next((nic for nic in self.interfaces if mac and nic.mac == mac), None)


def _text(value: Any) -> str:
    """A JSON scalar as DRANET's Go string fields would hold it (``""`` for absent)."""
    if isinstance(value, str):
        return value.strip()
    return ""


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _objects(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _addresses(entries: Any, key: str, version: int, what: str) -> list[str]:
    out: list[str] = []
    for entry in _objects(entries):
        raw = _text(entry.get(key))
        if not raw:
            continue
        try:
            addr = ipaddress.ip_address(raw)
        except ValueError:
            log.warning("%s: ignoring %r in %s: not an IP address", PLUGIN, raw, what)
            continue
        if addr.version != version:
            log.warning("%s: ignoring %r in %s: not IPv%d", PLUGIN, raw, what, version)
            continue
        out.append(str(addr))
    return out


def parse_nic(
    index: int, entry: Any, document: str = "the IMDS instance document"
) -> AzureNic | None:
    """One ``network.interface`` entry, or ``None`` (one warning naming it) when unusable.

    IMDS spells a MAC as 12 hex digits (``000D3A4F2B1C``); that form alone is
    read, and anything else is refused as it stands, never repaired.
    """
    if not isinstance(entry, dict):
        log.warning(
            "%s: network.interface[%d] in %s is not an object; skipped", PLUGIN, index, document
        )
        return None
    imds_mac = _text(entry.get("macAddress"))
    mac = entry_mac(
        imds_mac,
        plugin=PLUGIN,
        entry=f"network.interface[{index}] (its table {100 + index} stays reserved)",
        document=document,
        bare_hex=True,
    )
    if mac is None:
        return None
    what = f"network.interface[{index}]"
    ipv4 = _object(entry.get("ipv4"))
    ipv6 = _object(entry.get("ipv6"))
    subnets = [
        AzureSubnet(address=_text(s.get("address")), prefix=_text(s.get("prefix")))
        for s in _objects(ipv4.get("subnet"))
    ]
    return AzureNic(
        index=index,
        mac=mac,
        imds_mac=imds_mac,
        ipv4_addresses=_addresses(ipv4.get("ipAddress"), "privateIpAddress", 4, what),
        public_ipv4_addresses=_addresses(ipv4.get("ipAddress"), "publicIpAddress", 4, what),
        ipv4_subnets=subnets,
        ipv6_addresses=_addresses(ipv6.get("ipAddress"), "privateIpAddress", 6, what),
    )


# What IMDS answers: Standard_ND96isr_H100_v5, eastus2.
_COMPUTE_SHAPES: dict[str, tuple[str, re.Pattern[str]]] = {
    "vmSize": ("an Azure VM size", re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")),
    "location": ("an Azure region", re.compile(r"[a-z][a-z0-9]{1,39}")),
}


def parse_instance(document: Any, *, endpoint: str | None = None) -> AzureInstance:
    """The snapshot from the instance document; ``ValueError`` when it has no ``compute``.

    A ``network.interface`` list that is missing, empty or without one usable
    MAC gives a snapshot with no NICs and one warning, not an error.
    """
    if not isinstance(document, dict) or not isinstance(document.get("compute"), dict):
        raise ValueError('expected a JSON object {"compute": {...}, "network": {...}}')
    compute: dict[str, Any] = document["compute"]
    network = document.get("network")
    entries = network.get("interface") if isinstance(network, dict) else None
    if not isinstance(entries, list):
        if entries is not None:
            log.warning("%s: network.interface is not a list; no NIC facts", PLUGIN)
        entries = []
    for key, (meaning, pattern) in _COMPUTE_SHAPES.items():
        require_shape(_text(compute.get(key)) or None, f"compute.{key}", meaning, pattern)
    document_name = f"the IMDS instance document from {endpoint or 'IMDS'}"
    nics = [
        nic for i, e in enumerate(entries) if (nic := parse_nic(i, e, document_name)) is not None
    ]
    if not nics:
        # compute passed its shape checks: the VM's facts stand without its NICs'.
        warn_no_usable_nic(PLUGIN, f"network.interface of {document_name}", len(entries))
    return AzureInstance(
        endpoint=endpoint,
        vm_id=_text(compute.get("vmId")),
        name=_text(compute.get("name")),
        location=_text(compute.get("location")),
        zone=_text(compute.get("zone")),
        vm_size=_text(compute.get("vmSize")),
        placement_group_id=_text(compute.get("placementGroupId")),
        interconnect_group_id=_text(compute.get("interconnectGroupId")),
        interconnect_subgroup_id=_text(compute.get("interconnectSubgroupId")),
        interfaces=nics,
    )
