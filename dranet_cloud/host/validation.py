"""DRANET's defaulting and validation of a NetworkConfig, rule for rule.

Since DRANET PRs #317/#326 the node daemon defaults and validates the
*final merged* config (user claim merged with the cloud's device config and
the profile's answer), so every answer this project gives must pass these
rules, not only the user's claim.  The rules follow DRANET's
``pkg/apis/validation.go`` and ``defaults.go`` (checked against
kubernetes-sigs/dranet main ``f258477`` and PR #241 head ``8489a6a``; the
gen2 additions, ``type``, ``addressing`` and ``ipvlan``, as PR #241 merged
them); each is named in
:data:`RULES` so tests and error messages can point at it.

Parsing (:mod:`dranet_cloud.wire.models`) already rejected what Go's JSON decoder
rejects (wrong types, ``int32`` overflow, unknown ``type`` values); this
module checks meaning.  Addresses and MACs are parsed as Go parses them
(``netip.ParsePrefix``, ``net.ParseCIDR``, ``net.ParseIP``,
``net.ParseMAC``), which is stricter than Python's ``ipaddress`` in places
(no zones, no netmask prefixes) and looser in others (8- and 20-byte MACs).
"""

from __future__ import annotations

import ipaddress
import unicodedata

from dranet_cloud.toolkit.hwaddr import parse_hwaddr
from dranet_cloud.wire.models import (
    ADDRESSING_DHCP,
    ADDRESSING_UNNUMBERED,
    IPVlanConfig,
    NetworkConfig,
)

MIN_MTU = 68
MAX_INTERFACE_NAME = 15
MAX_RULE_PRIORITY = 32767
RESERVED_TABLES = frozenset({253, 254, 255})
VRF_TABLE_OFFSET = 1000
SCOPE_UNIVERSE = 0
SCOPE_LINK = 253

# Rule names used in error messages and in the table-driven tests.
RULES = (
    "interface-name",
    "addresses-cidr",
    "dhcp-with-addressing",
    "dhcp-and-addresses",
    "dhcp-on-subinterface",
    "unnumbered-subinterface-only",
    "unnumbered-without-addresses",
    "mtu-minimum",
    "offload-size-positive",
    "hardware-addr-mac",
    "hardware-addr-on-subinterface",
    "arp-ignore",
    "arp-announce",
    "ipvlan-type",
    "ipvlan-mode",
    "ipvlan-flag",
    "vrf-name",
    "vrf-table",
    "vrf-no-rules",
    "route-destination",
    "route-scope",
    "route-gateway",
    "route-source",
    "route-table",
    "rule-priority",
    "rule-table",
    "rule-cidr",
    "rule-family",
    "neighbor-destination",
    "neighbor-mac",
)


class ConfigInvalid(ValueError):
    """A NetworkConfig DRANET would reject; ``errors`` holds one line per problem."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))


# --- Go parsers ---------------------------------------------------------------


def parse_mac(text: str) -> bytes:
    """Go's ``net.ParseMAC`` (:func:`dranet_cloud.toolkit.hwaddr.parse_hwaddr`)."""
    return parse_hwaddr(text)


def _parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """Go's ``net.ParseIP``: no zones, no leading zeros in IPv4."""
    if "%" in text or not text:
        raise ValueError(f"invalid IP address {text!r}")
    return ipaddress.ip_address(text)


def _parse_prefix(text: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    """``netip.ParsePrefix`` / ``net.ParseCIDR``: ``addr/bits`` with decimal bits."""
    addr, sep, bits = text.partition("/")
    if not sep or not bits.isascii() or not bits.isdigit() or (len(bits) > 1 and bits[0] == "0"):
        raise ValueError(f"{text!r} is not a CIDR (ADDRESS/BITS)")
    ip = _parse_ip(addr)
    if int(bits) > ip.max_prefixlen:
        raise ValueError(f"{text!r}: prefix length {bits} is over {ip.max_prefixlen}")
    return ipaddress.ip_interface(f"{ip}/{int(bits)}")


def _is_v4(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Go's ``To4() != nil``: IPv4, including IPv4-mapped IPv6."""
    return ip.version == 4 or (isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None)


def _valid_name_char(c: str) -> bool:
    return unicodedata.category(c).startswith("L") or unicodedata.category(c) == "Nd" or c in "-_."


# --- defaulting -----------------------------------------------------------------


def vrf_default_table(name: str) -> int:
    """DRANET's table for a VRF without one: FNV-1a 32 of the name, mod 1000, + 1000."""
    h = 0x811C9DC5
    for byte in name.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h % 1000 + VRF_TABLE_OFFSET


def default_network_config(config: NetworkConfig) -> NetworkConfig:
    """DRANET's ``Default()`` on a copy: what the daemon actually applies.

    The deprecated ``dhcp: true`` becomes ``addressing: DHCP`` (and ``dhcp``
    goes, so only the gen2 spelling is written); an IPVLAN interface gets
    ``ipvlan {L2, Bridge}``; a named VRF without a table gets DRANET's derived
    table.  Call after :func:`validation_errors` (the ``dhcp``/``addressing``
    conflict is only visible before).
    """
    out = config.model_copy(deep=True)
    iface = out.interface
    if iface.dhcp is not None and iface.addressing is None:
        if iface.dhcp:
            iface.addressing = ADDRESSING_DHCP
        iface.dhcp = None
    if iface.is_subinterface:
        ipvlan = iface.ipvlan or IPVlanConfig()
        iface.ipvlan = IPVlanConfig(mode=ipvlan.mode or "L2", flag=ipvlan.flag or "Bridge")
    if iface.vrf is not None and iface.vrf.name and iface.vrf.table is None:
        iface.vrf.table = vrf_default_table(iface.vrf.name)
    return out


# --- validation -------------------------------------------------------------------


def _interface_errors(config: NetworkConfig) -> list[str]:
    iface = config.interface
    errors: list[str] = []

    def bad(rule: str, text: str) -> None:
        errors.append(f"interface.{text} [{rule}]")

    name = iface.name or ""
    if name:
        if len(name.encode()) > MAX_INTERFACE_NAME:
            bad("interface-name", f"name: {name!r} is over {MAX_INTERFACE_NAME} bytes")
        if name in (".", ".."):
            bad("interface-name", f"name: cannot be {name!r}")
        invalid = sorted({c for c in name if not _valid_name_char(c)})
        if invalid:
            bad(
                "interface-name",
                f"name: {name!r} has {''.join(invalid)!r}; use letters, digits, '-', '_', '.'",
            )
    for i, addr in enumerate(iface.addresses or []):
        try:
            _parse_prefix(addr)
        except ValueError as exc:
            bad("addresses-cidr", f"addresses[{i}]: {exc}")
    if iface.dhcp is not None and iface.addressing is not None:
        bad(
            "dhcp-with-addressing",
            f'dhcp: deprecated; it cannot be combined with addressing "{iface.addressing}"',
        )
    addressing = iface.effective_addressing
    sub = iface.is_subinterface
    if addressing == ADDRESSING_DHCP:
        if iface.addresses:
            bad("dhcp-and-addresses", "addresses: DHCP and addresses are mutually exclusive")
        if sub:
            bad("dhcp-on-subinterface", 'addressing: DHCP is not supported with type "IPVLAN"')
    if addressing == ADDRESSING_UNNUMBERED:
        if not sub:
            bad("unnumbered-subinterface-only", 'addressing: Unnumbered needs type "IPVLAN"')
        if iface.addresses:
            bad("unnumbered-without-addresses", "addresses: not allowed with Unnumbered")
    if iface.mtu is not None and iface.mtu < MIN_MTU:
        bad("mtu-minimum", f"mtu: must be at least {MIN_MTU}, got {iface.mtu}")
    for wire, value in (
        ("gsoMaxSize", iface.gso_max_size),
        ("groMaxSize", iface.gro_max_size),
        ("gsoIPv4MaxSize", iface.gso_ipv4_max_size),
        ("groIPv4MaxSize", iface.gro_ipv4_max_size),
    ):
        if value is not None and value <= 0:
            bad("offload-size-positive", f"{wire}: must be positive, got {value}")
    if iface.hardware_addr is not None:
        try:
            parse_mac(iface.hardware_addr)
        except ValueError as exc:
            bad("hardware-addr-mac", f"hardwareAddr: {exc}")
        if sub:
            bad(
                "hardware-addr-on-subinterface",
                "hardwareAddr: an IPVLAN child shares its parent's MAC; drop it",
            )
    if iface.arp_ignore is not None and iface.arp_ignore not in (0, 1, 2, 3, 8):
        bad("arp-ignore", f"arpIgnore: must be 0, 1, 2, 3 or 8, got {iface.arp_ignore}")
    if iface.arp_announce is not None and not 0 <= iface.arp_announce <= 2:
        bad("arp-announce", f"arpAnnounce: must be 0-2, got {iface.arp_announce}")
    if iface.ipvlan is not None:
        if not sub:
            bad("ipvlan-type", 'ipvlan: only valid with type "IPVLAN"')
        else:
            if iface.ipvlan.mode not in (None, "L2"):
                bad("ipvlan-mode", f"ipvlan.mode: only L2 is supported, got {iface.ipvlan.mode}")
            if iface.ipvlan.flag not in (None, "Bridge"):
                bad(
                    "ipvlan-flag", f"ipvlan.flag: only Bridge is supported, got {iface.ipvlan.flag}"
                )
    if iface.vrf is not None:
        if not iface.vrf.name:
            bad("vrf-name", "vrf.name: cannot be empty")
        table = iface.vrf.table
        if table is not None and (table <= 0 or table in RESERVED_TABLES):
            bad("vrf-table", f"vrf.table: must be positive and not 253-255, got {table}")
    return errors


def _route_errors(config: NetworkConfig) -> list[str]:
    errors: list[str] = []
    for i, route in enumerate(config.routes or []):
        where = f"routes[{i}]"
        dst = None
        if not route.destination:
            errors.append(f"{where}.destination: cannot be empty [route-destination]")
        else:
            try:
                dst = _parse_prefix(route.destination).ip
            except ValueError as exc:
                errors.append(
                    f"{where}.destination: {exc} (host routes use /32 or /128) [route-destination]"
                )
        scope = route.scope or SCOPE_UNIVERSE
        if scope not in (SCOPE_UNIVERSE, SCOPE_LINK):
            errors.append(
                f"{where}.scope: {scope} is not allowed; use 0 (universe) or 253 (link) "
                "[route-scope]"
            )
        for field, value in (("gateway", route.gateway), ("source", route.source)):
            if not value:
                continue
            try:
                ip = _parse_ip(value)
            except ValueError as exc:
                errors.append(f"{where}.{field}: {exc} [route-{field}]")
                continue
            if dst is not None and _is_v4(ip) != _is_v4(dst):
                errors.append(
                    f"{where}.{field}: {value!r} is not in the IP family of destination "
                    f"{route.destination!r} [route-{field}]"
                )
        if not route.gateway and scope != SCOPE_LINK:
            errors.append(
                f"{where}.gateway: required unless scope is 253 (link); an on-link route "
                "needs scope 253 [route-gateway]"
            )
        if route.table is not None and route.table < 0:
            errors.append(f"{where}.table: must not be negative, got {route.table} [route-table]")
    return errors


def _rule_errors(config: NetworkConfig) -> list[str]:
    errors: list[str] = []
    if config.rules and config.interface.vrf is not None:
        return ["rules: not supported together with interface.vrf [vrf-no-rules]"]
    for i, rule in enumerate(config.rules or []):
        where = f"rules[{i}]"
        priority = rule.priority or 0
        if not 0 <= priority <= MAX_RULE_PRIORITY:
            errors.append(
                f"{where}.priority: must be 0-{MAX_RULE_PRIORITY}, got {priority} [rule-priority]"
            )
        if rule.table is not None and rule.table < 0:
            errors.append(f"{where}.table: must not be negative, got {rule.table} [rule-table]")
        ips = {}
        for field, value in (("source", rule.source), ("destination", rule.destination)):
            if not value:
                continue
            try:
                ips[field] = _parse_prefix(value).ip
            except ValueError as exc:
                errors.append(f"{where}.{field}: {exc} [rule-cidr]")
        if len(ips) == 2 and _is_v4(ips["source"]) != _is_v4(ips["destination"]):
            errors.append(
                f"{where}: source {rule.source!r} and destination {rule.destination!r} are of "
                "different IP families [rule-family]"
            )
    return errors


def _neighbor_errors(config: NetworkConfig) -> list[str]:
    errors: list[str] = []
    for i, neighbor in enumerate(config.neighbors or []):
        fields = (
            ("destination", neighbor.destination, _parse_ip, "neighbor-destination"),
            ("hardwareAddr", neighbor.hardware_addr, parse_mac, "neighbor-mac"),
        )
        for field, value, parse, rule in fields:
            try:
                if not value:
                    raise ValueError("cannot be empty")
                parse(value)
            except ValueError as exc:
                errors.append(f"neighbors[{i}].{field}: {exc} [{rule}]")
    return errors


def validation_errors(config: NetworkConfig) -> list[str]:
    """Every rule DRANET's ``ValidateConfig`` would break, each tagged ``[rule]``."""
    return (
        _interface_errors(config)
        + _route_errors(config)
        + _rule_errors(config)
        + _neighbor_errors(config)
    )


def validate_network_config(config: NetworkConfig) -> NetworkConfig:
    """Default and validate a (final, merged) config as DRANET does.

    Returns the defaulted config (what DRANET applies, gen2 spelling only);
    raises :class:`ConfigInvalid` (a ``ValueError``) listing every problem.
    The ``dhcp``/``addressing`` conflict is checked before defaulting, all
    other rules after (DRANET defaults, then validates).
    """
    early = [e for e in _interface_errors(config) if e.endswith("[dhcp-with-addressing]")]
    defaulted = default_network_config(config)
    # Defaulting keeps a conflicting ``dhcp``, so the late pass sees it again.
    errors = early + [e for e in validation_errors(defaulted) if e not in early]
    if errors:
        raise ConfigInvalid(errors)
    return defaulted
