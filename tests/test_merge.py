"""DRANET's merge(user, base): the user wins, lists de-duplicated keeping user entries."""

from __future__ import annotations

from dranet_cloud.models import NetworkConfig, merge_network_config


def cfg(doc: dict[str, object]) -> NetworkConfig:
    return NetworkConfig.model_validate(doc)


def test_user_scalars_win_base_fills_gaps() -> None:
    user = cfg({"interface": {"mtu": 1500, "name": "net0"}})
    base = cfg({"profile": "p", "interface": {"mtu": 8244, "hardwareAddr": "42:01:0a:00:00:02"}})
    out = merge_network_config(user, base).to_wire()
    assert out == {
        "profile": "p",
        "interface": {"name": "net0", "mtu": 1500, "hardwareAddr": "42:01:0a:00:00:02"},
    }


def test_explicit_false_from_user_wins() -> None:
    out = merge_network_config(
        cfg({"interface": {"dhcp": False}}), cfg({"interface": {"dhcp": True}})
    )
    assert out.interface.dhcp is False


def test_lists_concatenate_and_dedup_keeping_user_entry() -> None:
    user = cfg(
        {
            "interface": {"addresses": ["10.0.0.5/24"]},
            "routes": [{"destination": "0.0.0.0/0", "gateway": "10.0.0.254", "table": 100}],
            "neighbors": [{"destination": "10.0.0.1", "hardwareAddr": "aa:bb:cc:dd:ee:ff"}],
        }
    )
    base = cfg(
        {
            "interface": {"addresses": ["10.0.0.5/24", "10.0.0.6/24"]},
            "routes": [
                {"destination": "0.0.0.0/0", "gateway": "10.0.0.1", "table": 100},
                {"destination": "0.0.0.0/0", "gateway": "10.0.0.1", "table": 200},
            ],
            "neighbors": [
                {"destination": "10.0.0.1", "hardwareAddr": "42:01:0a:00:00:01"},
                {"destination": "10.0.0.2", "hardwareAddr": "42:01:0a:00:00:02"},
            ],
        }
    )
    out = merge_network_config(user, base)
    assert out.interface.addresses == ["10.0.0.5/24", "10.0.0.6/24"]
    assert [(r.gateway, r.table) for r in out.routes or []] == [
        ("10.0.0.254", 100),
        ("10.0.0.1", 200),
    ]
    assert [n.hardware_addr for n in out.neighbors or []] == [
        "aa:bb:cc:dd:ee:ff",
        "42:01:0a:00:00:02",
    ]


def test_nested_objects_merge_field_by_field() -> None:
    user = cfg({"interface": {"type": "ipvlan", "ipvlan": {"mode": "l3"}}})
    base = cfg(
        {
            "interface": {"type": "ipvlan", "ipvlan": {"mode": "l2", "flag": "private"}},
            "ethtool": {"features": {"tso": True, "gro": False}},
        }
    )
    out = merge_network_config(user, base).to_wire()
    assert out["interface"]["ipvlan"] == {"mode": "l3", "flag": "private"}
    assert out["ethtool"] == {"features": {"tso": True, "gro": False}}


def test_merge_with_nothing() -> None:
    assert merge_network_config(None, None).to_wire() == {"interface": {}}
    base = cfg({"interface": {"mtu": 9000}})
    assert merge_network_config(None, base).to_wire() == base.to_wire()
    # the inputs are not mutated
    out = merge_network_config(cfg({"interface": {"addresses": ["10.0.0.1/32"]}}), base)
    assert base.interface.addresses is None and out.interface.mtu == 9000
