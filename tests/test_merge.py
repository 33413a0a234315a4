"""DRANET's MergeNetworkConfig(user, base), one table row per rule (dranet_cloud.host.merge)."""

from __future__ import annotations

from typing import Any

import pytest

from dranet_cloud.host import merge as merge_module
from dranet_cloud.host.merge import merge_network_config
from dranet_cloud.wire.models import NetworkConfig, parse_peer_config


def cfg(doc: dict[str, Any]) -> NetworkConfig:
    return parse_peer_config(doc)


# (rule, user, base, expected merged wire document)
CASES: list[tuple[str, dict[str, Any] | None, dict[str, Any] | None, dict[str, Any]]] = [
    (
        "nil-base-is-a-copy-without-dedup",
        {"interface": {"addresses": ["10.0.0.1/32", "10.0.0.1/32"], "ipvlan": {"mode": "L2"}}},
        None,
        {"interface": {"addresses": ["10.0.0.1/32", "10.0.0.1/32"], "ipvlan": {"mode": "L2"}}},
    ),
    (
        "nil-user-takes-base",
        None,
        {"profile": "p", "interface": {"mtu": 9000}},
        {"profile": "p", "interface": {"mtu": 9000}},
    ),
    (
        "set-scalar-left-wins",
        {"interface": {"mtu": 1500, "name": "net0"}},
        {
            "profile": "p",
            "interface": {"mtu": 8244, "name": "eth1", "hardwareAddr": "42:01:0a:00:00:02"},
        },
        {
            "profile": "p",
            "interface": {"name": "net0", "mtu": 1500, "hardwareAddr": "42:01:0a:00:00:02"},
        },
    ),
    (
        "empty-string-left-takes-base",
        {"profile": "", "interface": {"name": ""}},
        {"profile": "p", "interface": {"name": "eth1"}},
        {"profile": "p", "interface": {"name": "eth1"}},
    ),
    (
        "zero-pointer-left-does-not-override",
        {"interface": {"dhcp": False, "forwarding": False, "arpIgnore": 0}},
        {"interface": {"dhcp": True, "forwarding": True, "arpIgnore": 2}},
        {"interface": {"addressing": "DHCP", "forwarding": True, "arpIgnore": 2}},
    ),
    (
        "zero-pointer-left-kept-when-base-unset",
        {"interface": {"forwarding": False, "arpIgnore": 0}},
        {"interface": {"mtu": 9000}},
        {"interface": {"mtu": 9000, "forwarding": False, "arpIgnore": 0}},
    ),
    (
        "addresses-base-first-dedup-exact-string",
        {"interface": {"addresses": ["10.0.0.5/24", "10.0.0.7/32"]}},
        {"interface": {"addresses": ["10.0.0.5/24", "10.0.0.6/24", "10.0.0.7/24"]}},
        {"interface": {"addresses": ["10.0.0.6/24", "10.0.0.7/24", "10.0.0.5/24", "10.0.0.7/32"]}},
    ),
    (
        "routes-dedup-by-destination-and-table-left-copy-kept",
        {"routes": [{"destination": "0.0.0.0/0", "gateway": "10.0.0.254", "table": 100}]},
        {
            "routes": [
                {"destination": "0.0.0.0/0", "gateway": "10.0.0.1", "table": 100},
                {"destination": "0.0.0.0/0", "gateway": "10.0.0.1", "table": 200},
            ]
        },
        {
            "interface": {},
            "routes": [
                {"destination": "0.0.0.0/0", "gateway": "10.0.0.1", "table": 200},
                {"destination": "0.0.0.0/0", "gateway": "10.0.0.254", "table": 100},
            ],
        },
    ),
    (
        "neighbors-dedup-by-destination",
        {"neighbors": [{"destination": "10.0.0.1", "hardwareAddr": "aa:bb:cc:dd:ee:ff"}]},
        {
            "neighbors": [
                {"destination": "10.0.0.1", "hardwareAddr": "42:01:0a:00:00:01"},
                {"destination": "10.0.0.2", "hardwareAddr": "42:01:0a:00:00:02"},
            ]
        },
        {
            "interface": {},
            "neighbors": [
                {"destination": "10.0.0.2", "hardwareAddr": "42:01:0a:00:00:02"},
                {"destination": "10.0.0.1", "hardwareAddr": "aa:bb:cc:dd:ee:ff"},
            ],
        },
    ),
    (
        "rules-never-deduplicated",
        {"rules": [{"priority": 100, "source": "10.0.0.5/32", "table": 100}]},
        {"rules": [{"priority": 100, "source": "10.0.0.5/32", "table": 100}]},
        {
            "interface": {},
            "rules": [
                {"priority": 100, "source": "10.0.0.5/32", "table": 100},
                {"priority": 100, "source": "10.0.0.5/32", "table": 100},
            ],
        },
    ),
    (
        "maps-key-by-key-left-false-wins",
        {"ethtool": {"features": {"tso": False}}},
        {"ethtool": {"features": {"tso": True, "gro": True}, "privateFlags": {"x": True}}},
        {
            "interface": {},
            "ethtool": {"features": {"tso": False, "gro": True}, "privateFlags": {"x": True}},
        },
    ),
    (
        "vrf-field-by-field",
        {"interface": {"vrf": {"name": "blue"}}},
        {"interface": {"vrf": {"name": "red", "table": 1100}}},
        {"interface": {"vrf": {"name": "blue", "table": 1100}}},
    ),
    (
        "ipvlan-field-by-field-under-IPVLAN",
        {"interface": {"type": "IPVLAN", "ipvlan": {"flag": "Bridge"}}},
        {"interface": {"ipvlan": {"mode": "L2"}}},
        {"interface": {"type": "IPVLAN", "ipvlan": {"mode": "L2", "flag": "Bridge"}}},
    ),
    (
        "ipvlan-dropped-under-passthrough",
        {"interface": {"type": "Passthrough", "ipvlan": {"mode": "L2"}}},
        {"interface": {"mtu": 9000}},
        {"interface": {"type": "Passthrough", "mtu": 9000}},
    ),
    (
        "ipvlan-dropped-when-type-empty",
        {"interface": {"ipvlan": {"mode": "L2"}}},
        {"interface": {}},
        {"interface": {}},
    ),
    (
        "gen1-spelling-merges-as-gen2",
        {"interface": {"type": "ipvlan", "unnumbered": True}},
        {"profile": "p", "interface": {"ipvlan": {"mode": "l2", "flag": "bridge"}}},
        {
            "profile": "p",
            "interface": {
                "type": "IPVLAN",
                "addressing": "Unnumbered",
                "ipvlan": {"mode": "L2", "flag": "Bridge"},
            },
        },
    ),
]


@pytest.mark.parametrize(("rule", "user", "base", "expected"), CASES, ids=[c[0] for c in CASES])
def test_merge_rule(
    rule: str, user: dict[str, Any] | None, base: dict[str, Any] | None, expected: dict[str, Any]
) -> None:
    left = cfg(user) if user is not None else None
    right = cfg(base) if base is not None else None
    before = (left.to_wire() if left else None, right.to_wire() if right else None)
    assert merge_network_config(left, right).to_wire() == expected, rule
    # the inputs are never modified
    assert (left.to_wire() if left else None, right.to_wire() if right else None) == before


def test_pr_316_is_one_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """PR #316 (open upstream) makes a set pointer win even when false/0 and drops
    identical rules but the left's copy: one flag flips both."""
    rule = {"priority": 100, "source": "10.0.0.5/32", "table": 100}
    other = {"priority": 100, "source": "10.0.0.6/32", "table": 100}
    user = cfg({"profile": "", "interface": {"dhcp": False, "mtu": 0}, "rules": [rule, rule]})
    base = cfg({"profile": "p", "interface": {"dhcp": True, "mtu": 9000}, "rules": [rule, other]})
    main = merge_network_config(user, base)
    assert main.interface.dhcp is True
    assert [r.to_wire() for r in main.rules or []] == [rule, other, rule, rule]
    monkeypatch.setattr(merge_module, "PR_316_MERGE", True)
    out = merge_network_config(user, base)
    assert out.interface.dhcp is False and out.interface.mtu == 0
    assert out.profile == "p"  # a Go value field ("") never overrides
    # Identical rules once, at the left copy's place (last); a rule that differs stays.
    assert [r.to_wire() for r in out.rules or []] == [other, rule]


def test_merge_with_nothing() -> None:
    assert merge_network_config(None, None).to_wire() == {"interface": {}}
