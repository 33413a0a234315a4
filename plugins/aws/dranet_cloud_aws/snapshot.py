"""What the AWS plugin knows about the instance: the snapshot model and IMDS parsing.

IMDS has no recursive JSON view (unlike GCE), so the snapshot is assembled
from many small text answers: the identity document (JSON), a few placement
keys, and a dozen keys per ENI under ``network/interfaces/macs/<mac>/``.  The
parsers here turn those raw strings into typed fields and are kept apart from
the HTTP code so they can be tested on their own.

List-valued keys (``local-ipv4s``, ``ipv4-prefix``, ``vpc-ipv4-cidr-blocks``...)
come back one value per line.  A key that is absent (404) is ``None`` in the
raw mapping and an empty list or ``None`` in the model.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dranet_cloud.contract.context import InstanceSnapshot
from dranet_cloud.toolkit.hwaddr import entry_mac, normalize_mac, warn_no_usable_nic

log = logging.getLogger(__name__)

PLUGIN = "aws"

# Per-ENI keys read under meta-data/network/interfaces/macs/<mac>/.
ENI_KEYS = (
    "device-number",
    "network-card",
    "interface-id",
    "local-ipv4s",
    "subnet-id",
    "subnet-ipv4-cidr-block",
    "subnet-ipv6-cidr-blocks",
    "vpc-id",
    "vpc-ipv4-cidr-blocks",
    "ipv6s",
    "ipv4-prefix",
    "ipv6-prefix",
)

# Instance-level keys besides the identity document.
PLACEMENT_KEYS = (
    "placement/availability-zone-id",
    "placement/group-name",
    "placement/partition-number",
)


def split_lines(raw: str | None) -> list[str]:
    """IMDS list values: one entry a line; blank lines and surrounding space dropped."""
    if not raw:
        return []
    return [line.strip() for line in raw.splitlines() if line.strip()]


def parse_listing(raw: str | None) -> list[str]:
    """A directory listing: entry names, the trailing ``/`` of sub-directories removed."""
    return [entry.rstrip("/") for entry in split_lines(raw)]


def listed_macs(raw: str | None, document: str) -> dict[str, str]:
    """``{normalized MAC: entry as listed}`` for the MAC listing's usable entries.

    An entry that is not a MAC is skipped with one warning naming it and the
    listing, and is never fetched (its name would become part of a URL); the
    other ENIs are used.  A listing with no usable MAC at all (or none, a 404)
    is an empty mapping and one more warning, not an error: the identity
    document already proved the instance is EC2's, and its facts (instance
    type, zone, placement) still go on every device.
    """
    entries = parse_listing(raw)
    out: dict[str, str] = {}
    for entry in entries:
        mac = entry_mac(entry, plugin=PLUGIN, entry="an entry", document=document)
        if mac is not None:
            out.setdefault(mac, entry)
    if not out:
        warn_no_usable_nic(PLUGIN, document, len(entries))
    return out


def _int_or_none(raw: str | None, what: str) -> int | None:
    if raw is None or not raw.strip():
        return None
    try:
        return int(raw.strip())
    except ValueError:
        log.warning("aws: ignoring %s=%r from IMDS: not an integer", what, raw)
        return None


def _valid(values: list[str], what: str, *, cidr: bool) -> list[str]:
    """Keep the entries that parse (as CIDRs, or as IP addresses), in canonical form; warn
    about the rest."""
    out: list[str] = []
    for value in values:
        try:
            parsed = (
                ipaddress.ip_network(value, strict=False) if cidr else ipaddress.ip_address(value)
            )
        except ValueError:
            kind = "a CIDR" if cidr else "an IP address"
            log.warning("aws: ignoring %s entry %r from IMDS: not %s", what, value, kind)
        else:
            out.append(str(parsed))
    return out


def _valid_networks(values: list[str], what: str) -> list[str]:
    return _valid(values, what, cidr=True)


def _valid_addresses(values: list[str], what: str) -> list[str]:
    return _valid(values, what, cidr=False)


def _text(raw: str | None) -> str | None:
    if raw is None:
        return None
    value = raw.strip()
    return value or None


class Eni(BaseModel):
    """One elastic network interface as IMDS describes it.

    ``local_ipv4s`` keeps IMDS order: the first entry is the ENI's primary
    private address, the rest are secondary addresses.
    """

    model_config = ConfigDict(frozen=True)

    mac: str
    device_number: int | None = None
    network_card: int = 0
    interface_id: str | None = None
    local_ipv4s: list[str] = Field(default_factory=list)
    subnet_id: str | None = None
    subnet_ipv4_cidr_block: str | None = None
    subnet_ipv6_cidr_blocks: list[str] = Field(default_factory=list)
    vpc_id: str | None = None
    vpc_ipv4_cidr_blocks: list[str] = Field(default_factory=list)
    ipv6s: list[str] = Field(default_factory=list)
    ipv4_prefixes: list[str] = Field(default_factory=list)
    ipv6_prefixes: list[str] = Field(default_factory=list)

    @property
    def primary_ipv4(self) -> str | None:
        return self.local_ipv4s[0] if self.local_ipv4s else None

    @property
    def secondary_ipv4s(self) -> list[str]:
        """Secondary private IPv4 addresses: every local IPv4 but the primary."""
        return self.local_ipv4s[1:]

    @property
    def is_primary(self) -> bool:
        """The instance's primary ENI (network card 0, device 0) carries the node's own route."""
        return self.network_card == 0 and self.device_number == 0

    def label(self) -> str:
        """``eni-0abc (0e:..:01)`` for messages."""
        return f"{self.interface_id or 'ENI'} ({self.mac})"

    @classmethod
    def from_raw(cls, mac: str, raw: Mapping[str, str | None]) -> Eni:
        """Build from ``{key: text or None}`` as read under ``macs/<mac>/``."""
        subnet4 = _valid_networks(split_lines(raw.get("subnet-ipv4-cidr-block")), "subnet")
        return cls(
            mac=normalize_mac(mac),
            device_number=_int_or_none(raw.get("device-number"), "device-number"),
            network_card=_int_or_none(raw.get("network-card"), "network-card") or 0,
            interface_id=_text(raw.get("interface-id")),
            local_ipv4s=_valid_addresses(split_lines(raw.get("local-ipv4s")), "local-ipv4s"),
            subnet_id=_text(raw.get("subnet-id")),
            subnet_ipv4_cidr_block=subnet4[0] if subnet4 else None,
            subnet_ipv6_cidr_blocks=_valid_networks(
                split_lines(raw.get("subnet-ipv6-cidr-blocks")), "subnet-ipv6-cidr-blocks"
            ),
            vpc_id=_text(raw.get("vpc-id")),
            vpc_ipv4_cidr_blocks=_valid_networks(
                split_lines(raw.get("vpc-ipv4-cidr-blocks")), "vpc-ipv4-cidr-blocks"
            ),
            ipv6s=_valid_addresses(split_lines(raw.get("ipv6s")), "ipv6s"),
            ipv4_prefixes=_valid_networks(split_lines(raw.get("ipv4-prefix")), "ipv4-prefix"),
            ipv6_prefixes=_valid_networks(split_lines(raw.get("ipv6-prefix")), "ipv6-prefix"),
        )


class IdentityDocument(BaseModel):
    """The fields of ``dynamic/instance-identity/document`` the plugin uses."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)

    instance_id: str | None = Field(default=None, alias="instanceId")
    instance_type: str | None = Field(default=None, alias="instanceType")
    region: str | None = None
    availability_zone: str | None = Field(default=None, alias="availabilityZone")
    account_id: str | None = Field(default=None, alias="accountId")
    private_ip: str | None = Field(default=None, alias="privateIp")
    image_id: str | None = Field(default=None, alias="imageId")
    architecture: str | None = None


class AwsInstance(InstanceSnapshot):
    """The AWS plugin's snapshot: identity, placement and every ENI by normalized MAC."""

    provider: str = PLUGIN
    imds_version: int = 2
    identity: IdentityDocument = Field(default_factory=IdentityDocument)
    availability_zone_id: str | None = None
    placement_group: str | None = None
    partition_number: int | None = None
    enis: dict[str, Eni] = Field(default_factory=dict)

    def known_macs(self) -> frozenset[str]:
        return frozenset(self.enis)

    def eni(self, mac: str | None) -> Eni | None:
        """The ENI with this MAC (any spelling), or ``None``."""
        if not mac:
            return None
        try:
            return self.enis.get(normalize_mac(mac))
        except ValueError:
            return None

    @classmethod
    def from_raw(
        cls,
        *,
        endpoint: str | None,
        document: Mapping[str, Any],
        placement: Mapping[str, str | None],
        enis: Mapping[str, Mapping[str, str | None]],
        imds_version: int = 2,
    ) -> AwsInstance:
        """Assemble from the identity document, placement keys and per-MAC raw keys."""
        by_mac: dict[str, Eni] = {}
        for mac, raw in enis.items():
            eni = Eni.from_raw(mac, raw)
            by_mac[eni.mac] = eni
        return cls(
            endpoint=endpoint,
            imds_version=imds_version,
            identity=IdentityDocument.model_validate(dict(document)),
            availability_zone_id=_text(placement.get("placement/availability-zone-id")),
            placement_group=_text(placement.get("placement/group-name")),
            partition_number=_int_or_none(
                placement.get("placement/partition-number"), "placement/partition-number"
            ),
            enis=dict(sorted(by_mac.items(), key=lambda kv: _eni_order(kv[1]))),
        )


def _eni_order(eni: Eni) -> tuple[int, int, str]:
    return (
        eni.network_card,
        eni.device_number if eni.device_number is not None else 1 << 16,
        eni.mac,
    )
