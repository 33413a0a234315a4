"""The instance snapshot: what the ECS metadata service says about this VM.

The snapshot is built once from flat ``path -> text`` answers (see
:mod:`.metadata_source`) and then serves every later hook without network I/O.  NICs
are keyed by normalized MAC, because ECS lists them by MAC and that is the
only identifier the metadata shares with the kernel.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Mapping

from pydantic import BaseModel, Field

from dranet_cloud.contract.context import InstanceSnapshot
from dranet_cloud.toolkit.hwaddr import normalize_mac
from dranet_cloud.wire.models import DeviceIdentifiers

from .constants import PLUGIN

log = logging.getLogger(__name__)

# The keys read for every NIC under meta-data/network/interfaces/macs/<mac>/,
# in the order they are documented by ECS.
NIC_KEYS: tuple[str, ...] = (
    "network-interface-id",
    "primary-ip-address",
    "netmask",
    "gateway",
    "vpc-id",
    "vswitch-id",
    "vpc-cidr-block",
    "vswitch-cidr-block",
    "private-ipv4s",
    "ipv6s",
    "ipv6-gateway",
    "vswitch-ipv6-cidr-block",
)

# Keys whose value is a list of addresses rather than one string.
LIST_KEYS = frozenset({"private-ipv4s", "ipv6s"})


def parse_address_list(raw: str | None, *, what: str = "address list") -> list[str]:
    """Parse an ECS address list leniently.

    ECS answers ``private-ipv4s`` as JSON (``["10.0.0.5"]``) but ``ipv6s``
    without quotes (``[2408:4005:39c:f100::1a2b]``), and some images' tooling
    rewrites both one per line.  Every form is accepted; entries that are not
    IP addresses are dropped with a warning instead of failing the snapshot.
    """
    if raw is None:
        return []
    text = raw.strip()
    if not text:
        return []
    items: list[str]
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, list):
        items = [str(x) for x in parsed]
    elif isinstance(parsed, str):
        items = [parsed]
    else:
        inner = text[1:-1] if text.startswith("[") and text.endswith("]") else text
        items = [p for chunk in inner.splitlines() for p in chunk.split(",")]
    out: list[str] = []
    for item in items:
        candidate = item.strip().strip("\"'").strip()
        if not candidate:
            continue
        try:
            out.append(str(ipaddress.ip_address(candidate)))
        except ValueError:
            log.warning("%s: ignoring %r in %s: not an IP address", PLUGIN, candidate, what)
    return list(dict.fromkeys(out))


def _clean(raw: str | None) -> str | None:
    if raw is None:
        return None
    text = raw.strip()
    return text or None


class AliyunNic(BaseModel):
    """One ENI as the metadata service describes it."""

    mac: str
    network_interface_id: str | None = None
    primary_ip_address: str | None = None
    netmask: str | None = None
    gateway: str | None = None
    vpc_id: str | None = None
    vswitch_id: str | None = None
    vpc_cidr_block: str | None = None
    vswitch_cidr_block: str | None = None
    private_ipv4s: list[str] = Field(default_factory=list)
    ipv6s: list[str] = Field(default_factory=list)
    ipv6_gateway: str | None = None
    vswitch_ipv6_cidr_block: str | None = None

    @classmethod
    def from_values(cls, mac: str, values: Mapping[str, str | None]) -> AliyunNic:
        """Build from ``{metadata key: text or None}`` for one NIC."""
        fields: dict[str, object] = {"mac": normalize_mac(mac)}
        for key in NIC_KEYS:
            raw = values.get(key)
            name = key.replace("-", "_")
            if key in LIST_KEYS:
                fields[name] = parse_address_list(raw, what=f"{key} of NIC {mac}")
            else:
                fields[name] = _clean(raw)
        return cls.model_validate(fields)

    def ipv4_addresses(self) -> list[str]:
        """Primary IPv4 first, then the secondary private IPv4s."""
        out = [self.primary_ip_address] if self.primary_ip_address else []
        return list(dict.fromkeys(out + self.private_ipv4s))

    def ipv4_subnet(self) -> ipaddress.IPv4Network | None:
        """The vSwitch CIDR, else the primary IP with its netmask."""
        if self.vswitch_cidr_block:
            try:
                return ipaddress.IPv4Network(self.vswitch_cidr_block, strict=False)
            except ValueError:
                log.warning(
                    "%s: NIC %s has vswitch-cidr-block %r, not an IPv4 CIDR",
                    PLUGIN,
                    self.mac,
                    self.vswitch_cidr_block,
                )
        if self.primary_ip_address and self.netmask:
            try:
                return ipaddress.IPv4Network(
                    f"{self.primary_ip_address}/{self.netmask}", strict=False
                )
            except ValueError:
                return None
        return None

    def ipv6_subnet(self) -> ipaddress.IPv6Network | None:
        if not self.vswitch_ipv6_cidr_block:
            return None
        try:
            return ipaddress.IPv6Network(self.vswitch_ipv6_cidr_block, strict=False)
        except ValueError:
            log.warning(
                "%s: NIC %s has vswitch-ipv6-cidr-block %r, not an IPv6 CIDR",
                PLUGIN,
                self.mac,
                self.vswitch_ipv6_cidr_block,
            )
            return None


class AliyunInstance(InstanceSnapshot):
    """The ECS instance: identity, placement and its ENIs by normalized MAC."""

    provider: str = PLUGIN
    instance_id: str | None = None
    instance_type: str | None = None
    region_id: str | None = None
    zone_id: str | None = None
    nics: dict[str, AliyunNic] = Field(default_factory=dict)

    def known_macs(self) -> frozenset[str]:
        return frozenset(self.nics)

    def nic_for(self, device: DeviceIdentifiers) -> AliyunNic | None:
        """The ENI behind ``device``, matched by normalized MAC."""
        mac = device.mac
        return self.nics.get(mac) if mac else None
