"""DRANET's defaulting and validation, one table row per rule (dranet_cloud.host.validation).

Each invalid case names the rule it breaks; the error must carry that rule's
tag.  Rules checked against kubernetes-sigs/dranet ``pkg/apis/validation.go``
(main f258477, PR #241 head 8489a6a, and the gen2 fields as PR #241 merged them).
"""

from __future__ import annotations

from typing import Any

import pytest

from dranet_cloud.host.validation import (
    RULES,
    ConfigInvalid,
    parse_mac,
    validate_network_config,
    vrf_default_table,
)
from dranet_cloud.wire.models import parse_peer_config

IPVLAN = {"type": "IPVLAN"}

# (rule, document that breaks it)
INVALID: list[tuple[str, dict[str, Any]]] = [
    ("interface-name", {"interface": {"name": "a-very-long-ifname"}}),
    ("interface-name", {"interface": {"name": "ünïcödé-ïfnämé"}}),  # 15 chars, >15 bytes
    ("interface-name", {"interface": {"name": ".."}}),
    ("interface-name", {"interface": {"name": "net/0"}}),
    ("interface-name", {"interface": {"name": "net 0"}}),
    ("interface-name", {"interface": {"name": "net:0"}}),
    ("addresses-cidr", {"interface": {"addresses": ["10.0.0.1"]}}),
    ("addresses-cidr", {"interface": {"addresses": ["10.0.0.1/33"]}}),
    ("addresses-cidr", {"interface": {"addresses": ["10.0.0.1/255.255.255.0"]}}),
    ("addresses-cidr", {"interface": {"addresses": ["10.0.0.1/024"]}}),
    ("addresses-cidr", {"interface": {"addresses": ["010.0.0.1/24"]}}),
    ("addresses-cidr", {"interface": {"addresses": ["fe80::1%eth0/64"]}}),
    ("dhcp-with-addressing", {"interface": {"dhcp": True, "addressing": "DHCP"}}),
    ("dhcp-with-addressing", {"interface": {"dhcp": False, "addressing": "Static"}}),
    ("dhcp-and-addresses", {"interface": {"dhcp": True, "addresses": ["10.0.0.1/24"]}}),
    ("dhcp-and-addresses", {"interface": {"addressing": "DHCP", "addresses": ["10.0.0.1/24"]}}),
    ("dhcp-on-subinterface", {"interface": {**IPVLAN, "addressing": "DHCP"}}),
    ("dhcp-on-subinterface", {"interface": {**IPVLAN, "dhcp": True}}),
    ("unnumbered-subinterface-only", {"interface": {"addressing": "Unnumbered"}}),
    (
        "unnumbered-subinterface-only",
        {"interface": {"type": "Passthrough", "addressing": "Unnumbered"}},
    ),
    (
        "unnumbered-without-addresses",
        {"interface": {**IPVLAN, "addressing": "Unnumbered", "addresses": ["10.0.0.1/32"]}},
    ),
    ("mtu-minimum", {"interface": {"mtu": 67}}),
    ("mtu-minimum", {"interface": {"mtu": 0}}),
    ("offload-size-positive", {"interface": {"gsoMaxSize": 0}}),
    ("offload-size-positive", {"interface": {"groMaxSize": -1}}),
    ("offload-size-positive", {"interface": {"gsoIPv4MaxSize": 0}}),
    ("offload-size-positive", {"interface": {"groIPv4MaxSize": 0}}),
    ("hardware-addr-mac", {"interface": {"hardwareAddr": "42:01:0a:00:00"}}),
    ("hardware-addr-mac", {"interface": {"hardwareAddr": "4201.0a00.0001.02"}}),
    ("hardware-addr-mac", {"interface": {"hardwareAddr": "420a00000001"}}),
    ("hardware-addr-mac", {"interface": {"hardwareAddr": "42:01-0a:00:00:01"}}),
    ("hardware-addr-mac", {"interface": {"hardwareAddr": ""}}),
    (
        "hardware-addr-on-subinterface",
        {"interface": {**IPVLAN, "hardwareAddr": "42:01:0a:00:00:01"}},
    ),
    ("arp-ignore", {"interface": {"arpIgnore": 5}}),
    ("arp-ignore", {"interface": {"arpIgnore": -1}}),
    ("arp-announce", {"interface": {"arpAnnounce": 3}}),
    ("ipvlan-type", {"interface": {"ipvlan": {"mode": "L2"}}}),
    ("ipvlan-type", {"interface": {"type": "Passthrough", "ipvlan": {"flag": "Bridge"}}}),
    ("ipvlan-mode", {"interface": {**IPVLAN, "ipvlan": {"mode": "L3"}}}),
    ("ipvlan-mode", {"interface": {**IPVLAN, "ipvlan": {"mode": "l3s"}}}),
    ("ipvlan-flag", {"interface": {**IPVLAN, "ipvlan": {"flag": "Private"}}}),
    ("vrf-name", {"interface": {"vrf": {"table": 1100}}}),
    ("vrf-table", {"interface": {"vrf": {"name": "v", "table": 0}}}),
    ("vrf-table", {"interface": {"vrf": {"name": "v", "table": 253}}}),
    ("vrf-table", {"interface": {"vrf": {"name": "v", "table": 254}}}),
    ("vrf-table", {"interface": {"vrf": {"name": "v", "table": 255}}}),
    ("vrf-table", {"interface": {"vrf": {"name": "v", "table": -5}}}),
    (
        "vrf-no-rules",
        {"interface": {"vrf": {"name": "v"}}, "rules": [{"priority": 1, "table": 100}]},
    ),
    ("route-destination", {"routes": [{"gateway": "10.0.0.1"}]}),
    ("route-destination", {"routes": [{"destination": "10.0.0.0", "gateway": "10.0.0.1"}]}),
    ("route-scope", {"routes": [{"destination": "10.0.0.0/8", "scope": 200}]}),
    ("route-scope", {"routes": [{"destination": "10.0.0.0/8", "scope": 254}]}),
    ("route-gateway", {"routes": [{"destination": "10.0.0.0/8"}]}),
    ("route-gateway", {"routes": [{"destination": "2001:db8::/64", "scope": 0}]}),
    ("route-gateway", {"routes": [{"destination": "10.0.0.0/8", "gateway": "10.0.0.256"}]}),
    ("route-gateway", {"routes": [{"destination": "10.0.0.0/8", "gateway": "fe80::1"}]}),
    (
        "route-source",
        {"routes": [{"destination": "10.0.0.0/8", "gateway": "10.0.0.1", "source": "::1"}]},
    ),
    (
        "route-source",
        {"routes": [{"destination": "10.0.0.0/8", "gateway": "10.0.0.1", "source": "x"}]},
    ),
    ("route-table", {"routes": [{"destination": "10.0.0.0/8", "scope": 253, "table": -1}]}),
    ("rule-priority", {"rules": [{"priority": 32768}]}),
    ("rule-priority", {"rules": [{"priority": -1}]}),
    ("rule-table", {"rules": [{"priority": 1, "table": -1}]}),
    ("rule-cidr", {"rules": [{"source": "10.0.0.1"}]}),
    ("rule-cidr", {"rules": [{"destination": "10.0.0.0/40"}]}),
    ("rule-family", {"rules": [{"source": "10.0.0.0/8", "destination": "2001:db8::/32"}]}),
    ("neighbor-destination", {"neighbors": [{"hardwareAddr": "42:01:0a:00:00:01"}]}),
    (
        "neighbor-destination",
        {"neighbors": [{"destination": "10.0.0.1/32", "hardwareAddr": "42:01:0a:00:00:01"}]},
    ),
    ("neighbor-mac", {"neighbors": [{"destination": "10.0.0.1"}]}),
    ("neighbor-mac", {"neighbors": [{"destination": "10.0.0.1", "hardwareAddr": "nope"}]}),
]


@pytest.mark.parametrize(
    ("rule", "doc"), INVALID, ids=[f"{r}-{i}" for i, (r, _) in enumerate(INVALID)]
)
def test_rule_rejects(rule: str, doc: dict[str, Any]) -> None:
    assert rule in RULES
    with pytest.raises(ConfigInvalid) as err:
        validate_network_config(parse_peer_config(doc))
    assert any(e.endswith(f"[{rule}]") for e in err.value.errors), err.value.errors


def test_every_rule_has_a_failing_case() -> None:
    assert {r for r, _ in INVALID} == set(RULES)


# (what is accepted, document)
VALID: list[tuple[str, dict[str, Any]]] = [
    ("empty config", {}),
    ("name with dot, dash, underscore", {"interface": {"name": "net-0_a.1"}}),
    ("unicode letters within 15 bytes", {"interface": {"name": "nét0"}}),
    (
        "IPv4 and IPv6 CIDRs with host bits",
        {"interface": {"addresses": ["10.0.0.5/24", "2001:db8::5/64"]}},
    ),
    ("IPVLAN unnumbered", {"interface": {**IPVLAN, "addressing": "Unnumbered"}}),
    ("DHCP on a passthrough NIC", {"interface": {"addressing": "DHCP"}}),
    ("deprecated dhcp alone", {"interface": {"dhcp": True}}),
    ("mtu at the minimum", {"interface": {"mtu": 68}}),
    ("arpIgnore 8", {"interface": {"arpIgnore": 8}}),
    ("arp zeros", {"interface": {"arpIgnore": 0, "arpAnnounce": 0}}),
    ("6-byte colon MAC", {"interface": {"hardwareAddr": "42:01:0A:00:00:01"}}),
    ("6-byte dash MAC", {"interface": {"hardwareAddr": "42-01-0a-00-00-01"}}),
    ("6-byte dot MAC", {"interface": {"hardwareAddr": "0000.5e00.5301"}}),
    ("8-byte EUI-64 MAC", {"interface": {"hardwareAddr": "02:00:5e:10:00:00:00:01"}}),
    ("8-byte dot MAC", {"interface": {"hardwareAddr": "0200.5e10.0000.0001"}}),
    (
        "20-byte InfiniBand MAC",
        {"interface": {"hardwareAddr": ":".join(["00"] * 12 + ["fe", "80"] + ["00"] * 6)}},
    ),
    ("VRF without table (defaulted)", {"interface": {"vrf": {"name": "blue"}}}),
    (
        "link-scope route without gateway",
        {"routes": [{"destination": "10.0.0.0/24", "scope": 253}]},
    ),
    (
        "IPv6 on-link route in a table (scope 253)",
        {"routes": [{"destination": "2001:db8::/64", "scope": 253, "table": 1100}]},
    ),
    (
        "route with gateway and source of the destination's family",
        {"routes": [{"destination": "::/0", "gateway": "fe80::1", "source": "2001:db8::5"}]},
    ),
    (
        "IPv4-mapped gateway counts as IPv4 (Go To4)",
        {"routes": [{"destination": "0.0.0.0/0", "gateway": "::ffff:10.0.0.1"}]},
    ),
    ("rule priority bounds", {"rules": [{"priority": 0}, {"priority": 32767, "table": 5}]}),
    (
        "rule with source only",
        {"rules": [{"priority": 100, "source": "10.0.0.5/32", "table": 100}]},
    ),
    (
        "IPv6 neighbor",
        {"neighbors": [{"destination": "fe80::1", "hardwareAddr": "42:01:0a:00:00:01"}]},
    ),
]


@pytest.mark.parametrize(("what", "doc"), VALID, ids=[v[0] for v in VALID])
def test_accepted(what: str, doc: dict[str, Any]) -> None:
    validate_network_config(parse_peer_config(doc))


def test_defaults_are_dranets() -> None:
    out = validate_network_config(
        parse_peer_config(
            {"interface": {"type": "IPVLAN", "vrf": {"name": "blue"}}, "profile": "p"}
        )
    )
    assert out.to_wire()["interface"]["ipvlan"] == {"mode": "L2", "flag": "Bridge"}
    assert out.interface.vrf is not None and out.interface.vrf.table == vrf_default_table("blue")
    # FNV-1a 32 of "blue" mod 1000 + 1000, as DRANET's VRFConfig.Default computes it
    assert 1000 <= vrf_default_table("blue") < 2000
    assert vrf_default_table("") == 0x811C9DC5 % 1000 + 1000
    dhcp = validate_network_config(parse_peer_config({"interface": {"dhcp": True}}))
    assert dhcp.to_wire() == {"interface": {"addressing": "DHCP"}}
    static = validate_network_config(parse_peer_config({"interface": {"dhcp": False}}))
    assert static.to_wire() == {"interface": {}}


def test_every_error_is_reported() -> None:
    doc = {"interface": {"mtu": 10, "arpAnnounce": 9}, "routes": [{"destination": "x"}]}
    with pytest.raises(ConfigInvalid) as err:
        validate_network_config(parse_peer_config(doc))
    tags = {e.rsplit("[", 1)[1].rstrip("]") for e in err.value.errors}
    assert {"mtu-minimum", "arp-announce", "route-destination", "route-gateway"} <= tags


def test_each_problem_is_reported_once() -> None:
    # The dhcp/addressing conflict is checked before defaulting and survives
    # it; the operator should read it once, not twice, in a 400 body.
    doc = {"interface": {"dhcp": True, "addressing": "DHCP"}}
    with pytest.raises(ConfigInvalid) as err:
        validate_network_config(parse_peer_config(doc))
    assert len(err.value.errors) == len(set(err.value.errors)) == 1, err.value.errors


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("00:00:5e:00:53:01", 6),
        ("00-00-5E-00-53-01", 6),
        ("0000.5e00.5301", 6),
        ("02:00:5e:10:00:00:00:01", 8),
        ("0200.5e10.0000.0001", 8),
        ("00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01", 20),
        ("0000.0000.fe80.0000.0000.0000.0200.5e10.0000.0001", 20),
    ],
)
def test_parse_mac_accepts_go_forms(text: str, size: int) -> None:
    assert len(parse_mac(text)) == size


@pytest.mark.parametrize(
    "text",
    ["", "00:00:5e:00:53", "00:00:5e:00:53:01:02", "0000.5e00.53", "00005e005301", "0:0:5e:0:53:1"],
)
def test_parse_mac_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_mac(text)
