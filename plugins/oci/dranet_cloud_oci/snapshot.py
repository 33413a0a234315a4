"""The instance snapshot: what OCI IMDS v2 says about this instance.

Built once from the three documents (``instance/``, ``host/``, ``vnics/``)
and then serving every later hook without network I/O.

Topology follows DRANET's OKE provider.  With ``rdmaTopologyData`` the four
fabric IDs are OCIDs reduced to their unique suffix (the part after the last
``.``, at most 60 characters: a full OCID is ~90 and an attribute value at
most 64 bytes) and ``rackId`` is taken as is.  A value without ``ocid`` is
an error: DRANET refuses to start its provider over it; here the error is
logged, naming the field, the value and the fix, and only that attribute is
left out.  Without ``rdmaTopologyData`` (topology data not enabled for the
tenancy, or a shape without it) the top-level ``networkBlockId`` and
``rackId`` are used, as DRANET does, with a warning that says how to get the
rest; where DRANET would publish the top-level ``networkBlockId`` as a full
OCID, over the API server's 64-byte limit (which gets the whole
ResourceSlice rejected), its suffix is published instead.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

from pydantic import BaseModel, Field

from dranet_cloud.contract.context import InstanceSnapshot
from dranet_cloud.toolkit.hwaddr import entry_mac, warn_no_usable_nic

from .constants import HOST_PATH, OCID_SUFFIX_MAX, PLUGIN, TOPOLOGY_FIX

log = logging.getLogger(__name__)


class OcidError(ValueError):
    """A topology value that DRANET's rule rejects."""


def ocid_suffix(value: str) -> str:
    """DRANET's rule: ``""`` stays ``""``; else the part after the last ``.``, at most 60.

    ``OcidError`` when the value does not contain ``ocid`` or has no ``.``.
    """
    if not value:
        return ""
    if "ocid" not in value:
        raise OcidError(f"not a valid OCID (missing 'ocid' prefix): {value[:100]!r}")
    _, dot, suffix = value.rpartition(".")
    if not dot:
        raise OcidError(f"not a valid OCID (missing '.' separator): {value[:100]!r}")
    return suffix[-OCID_SUFFIX_MAX:]


class OciVnic(BaseModel):
    """One entry of ``/opc/v2/vnics/``."""

    mac: str  # normalized
    vnic_id: str = ""
    nic_index: int | None = None
    vlan_tag: int | None = None
    private_ip: str = ""
    subnet_cidr_block: str = ""
    virtual_router_ip: str = ""


class OciInstance(InstanceSnapshot):
    """The instance: identity, DRANET's topology values, its VNICs."""

    provider: str = PLUGIN
    instance_id: str = ""
    display_name: str = ""
    shape: str = ""
    region: str = ""
    availability_domain: str = ""
    hpc_island_id: str = ""
    network_block_id: str = ""
    local_block_id: str = ""
    rack_id: str = ""
    gpu_memory_fabric_id: str = ""
    topology_note: str = ""  # why some topology attributes are missing ("" when none are)
    vnics: list[OciVnic] = Field(default_factory=list)

    def known_macs(self) -> frozenset[str]:
        return frozenset(v.mac for v in self.vnics)

    def vnic_for_mac(self, mac: str | None) -> OciVnic | None:
        """The VNIC with this normalized MAC, the first one if listed twice."""
        return next((v for v in self.vnics if mac and v.mac == mac), None)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _ip(value: Any, what: str) -> str:
    text = _text(value)
    if not text:
        return ""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        log.warning("%s: ignoring %s %r: not an IP address", PLUGIN, what, text[:60])
        return ""


def _cidr(value: Any, what: str) -> str:
    text = _text(value)
    if not text:
        return ""
    try:
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError:
        log.warning("%s: ignoring %s %r: not a CIDR", PLUGIN, what, text[:60])
        return ""


def parse_vnics(document: Any, name: str = "/opc/v2/vnics/") -> list[OciVnic]:
    """The VNIC list; an entry without a usable MAC is skipped with one warning.

    A list with no usable entry (a document whose only VNIC's ``macAddr`` is
    redacted) is an empty list and one more warning, not an error: the
    instance document is still OCI's, and its topology attributes still go on
    every device.  ``None`` (a 404) is no document at all.
    """
    if document is None:
        return []
    if not isinstance(document, list):
        log.warning("%s: %s is not a list; no per-VNIC facts", PLUGIN, name)
        return []
    out: list[OciVnic] = []
    for i, entry in enumerate(document):
        if not isinstance(entry, dict):
            log.warning("%s: vnics[%d] in %s is not an object; skipped", PLUGIN, i, name)
            continue
        mac = entry_mac(
            _text(entry.get("macAddr")), plugin=PLUGIN, entry=f"vnics[{i}].macAddr", document=name
        )
        if mac is None:
            continue
        what = f"vnics[{i}]"
        out.append(
            OciVnic(
                mac=mac,
                vnic_id=_text(entry.get("vnicId")),
                nic_index=_int(entry.get("nicIndex")),
                vlan_tag=_int(entry.get("vlanTag")),
                private_ip=_ip(entry.get("privateIp"), f"{what}.privateIp"),
                subnet_cidr_block=_cidr(entry.get("subnetCidrBlock"), f"{what}.subnetCidrBlock"),
                virtual_router_ip=_ip(entry.get("virtualRouterIp"), f"{what}.virtualRouterIp"),
            )
        )
    if not out:
        warn_no_usable_nic(PLUGIN, name, len(document))
    return out


TOPOLOGY_FIELDS = (
    ("hpc_island_id", "customerHPCIslandId"),
    ("network_block_id", "customerNetworkBlock"),
    ("local_block_id", "customerLocalBlock"),
    ("gpu_memory_fabric_id", "customerGpuMemoryFabric"),
)


def parse_topology(document: Any, *, host_missing: bool) -> dict[str, str]:
    """DRANET's five topology values (``""`` for absent) and ``topology_note``."""
    out = {field: "" for field, _ in TOPOLOGY_FIELDS}
    out["rack_id"] = ""
    if host_missing or not isinstance(document, dict):
        why = "answered 404" if host_missing else "is not a JSON object"
        out["topology_note"] = (
            f"{HOST_PATH} {why}: no RDMA topology attributes are published; {TOPOLOGY_FIX}"
        )
        log.warning("%s: %s", PLUGIN, out["topology_note"])
        return out
    out["rack_id"] = _text(document.get("rackId"))
    topology = document.get("rdmaTopologyData")
    if not isinstance(topology, dict):
        block = _text(document.get("networkBlockId"))
        try:
            out["network_block_id"] = ocid_suffix(block) if "ocid" in block else block
        except OcidError:
            out["network_block_id"] = ""
        out["topology_note"] = (
            f"{HOST_PATH} has no rdmaTopologyData (topology data is not enabled for the "
            "tenancy, or the shape has none): hpcIslandId, localBlockId and gpuMemoryFabricId "
            f"are not published, networkBlockId and rackId come from the host document; "
            f"{TOPOLOGY_FIX}"
        )
        log.warning("%s: %s", PLUGIN, out["topology_note"])
        return out
    bad: list[str] = []
    for field, key in TOPOLOGY_FIELDS:
        try:
            out[field] = ocid_suffix(_text(topology.get(key)))
        except OcidError as exc:
            bad.append(key)
            log.error(
                "%s: rdmaTopologyData.%s is %s; its attribute is not published (DRANET's OKE "
                "provider refuses the whole answer). Fix: the value must be an OCI OCID "
                "(ocid1.<type>.<realm>.<region>.<id>); check that %s points at OCI IMDS",
                PLUGIN,
                key,
                exc,
                HOST_PATH,
            )
    if bad:
        out["topology_note"] = f"rdmaTopologyData values that are not OCIDs: {', '.join(bad)}"
    else:
        out["topology_note"] = ""
    return out


def parse_instance(
    instance: dict[str, Any],
    host: Any,
    vnics: Any,
    *,
    endpoint: str | None = None,
    host_missing: bool = False,
) -> OciInstance:
    """The snapshot from the three documents (``host``/``vnics`` ``None`` when 404)."""
    topology = parse_topology(host, host_missing=host_missing)
    return OciInstance(
        endpoint=endpoint,
        instance_id=_text(instance.get("id")),
        display_name=_text(instance.get("displayName")),
        shape=_text(instance.get("shape")),
        region=_text(instance.get("canonicalRegionName")) or _text(instance.get("region")),
        availability_domain=_text(instance.get("availabilityDomain")),
        vnics=parse_vnics(vnics, f"/opc/v2/vnics/ from {endpoint or 'IMDS'}"),
        **topology,
    )
