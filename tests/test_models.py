"""Wire models: DRANET-shaped JSON round-trips, validation names the field."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from dranet_cloud.models import (
    Capabilities,
    DeviceAttribute,
    DeviceIdentifiers,
    NetworkConfig,
    ProfileRequest,
    normalize_mac,
)

# The full document of REFERENCE.md section 1, as DRANET's Go code writes it.
DRANET_DOC = {
    "profile": "acme.com/overlay",
    "interface": {
        "name": "net0",
        "type": "ipvlan",
        "unnumbered": False,
        "addresses": ["10.24.3.7/32", "2001:db8::c0de:0:0:5/128"],
        "dhcp": False,
        "mtu": 8244,
        "hardwareAddr": "42:01:c0:a8:01:02",
        "gsoMaxSize": 65536,
        "groMaxSize": 65536,
        "gsoIPv4MaxSize": 65536,
        "groIPv4MaxSize": 65536,
        "disableEbpfPrograms": False,
        "forwarding": False,
        "arpIgnore": 0,
        "arpAnnounce": 0,
        "vrf": {"name": "vrf0", "table": 1100},
        "ipvlan": {"mode": "l2", "flag": "bridge"},
    },
    "routes": [
        {"destination": "0.0.0.0/0", "gateway": "10.0.0.1", "source": "", "scope": 0, "table": 100}
    ],
    "rules": [{"priority": 100, "source": "10.0.0.0/24", "destination": "", "table": 100}],
    "neighbors": [{"destination": "10.0.0.1", "hardwareAddr": "42:01:0a:00:00:01"}],
    "ethtool": {"features": {"rx-checksum": True}, "privateFlags": {}},
}


def test_dranet_document_round_trips_unchanged() -> None:
    model = NetworkConfig.model_validate_json(json.dumps(DRANET_DOC))
    assert json.loads(model.to_json()) == DRANET_DOC
    assert model.interface.gso_ipv4_max_size == 65536
    assert model.interface.vrf is not None and model.interface.vrf.table == 1100


def test_empty_config_is_go_shape() -> None:
    assert NetworkConfig().to_json() == '{"interface":{}}'
    assert NetworkConfig.model_validate({}).to_wire() == {"interface": {}}


def test_device_identifiers_omit_empty_keep_name() -> None:
    assert DeviceIdentifiers(name="eth1").to_wire() == {"name": "eth1"}
    dev = DeviceIdentifiers(name="eth1", mac_address="42:01:C0:A8:01:02", pci_address="")
    assert dev.to_wire() == {"mac_address": "42:01:C0:A8:01:02", "name": "eth1"}
    assert dev.mac == "42:01:c0:a8:01:02"


@pytest.mark.parametrize("raw", ["0011AAFFBB22", "00-11-aa-ff-bb-22", "00:11:AA:FF:BB:22"])
def test_normalize_mac(raw: str) -> None:
    assert normalize_mac(raw) == "00:11:aa:ff:bb:22"


def test_normalize_mac_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        normalize_mac("00:11:22")


def test_device_attribute_exactly_one() -> None:
    assert DeviceAttribute.of(True).to_wire() == {"bool": True}
    assert DeviceAttribute.of(7).to_wire() == {"int": 7}
    assert DeviceAttribute.of("a3").to_wire() == {"string": "a3"}
    assert DeviceAttribute.model_validate({"version": "1.2.3"}).value == "1.2.3"
    with pytest.raises(ValidationError):
        DeviceAttribute.model_validate({"int": 1, "string": "x"})
    with pytest.raises(ValidationError):
        DeviceAttribute.model_validate({})


@pytest.mark.parametrize(
    ("interface", "field_fragment"),
    [
        ({"name": "a-very-long-ifname"}, "name"),
        ({"addresses": ["10.0.0.1"]}, "addresses"),
        ({"addresses": ["10.0.0.1/33"]}, "addresses"),
        ({"dhcp": True, "addresses": ["10.0.0.1/24"]}, "mutually exclusive"),
        ({"ipvlan": {"mode": "l2"}}, "type: ipvlan"),
        ({"type": "passthrough", "unnumbered": True}, "unnumbered"),
        ({"type": "ipvlan", "unnumbered": True, "addresses": ["10.0.0.1/32"]}, "unnumbered"),
        ({"arpIgnore": 5}, "arpIgnore"),
        ({"arpAnnounce": 3}, "arpAnnounce"),
        ({"type": "macvlan"}, "type"),
    ],
)
def test_validation_errors_name_the_field(
    interface: dict[str, object], field_fragment: str
) -> None:
    with pytest.raises(ValidationError) as err:
        NetworkConfig.model_validate({"interface": interface})
    text = str(err.value)
    assert "interface" in text
    assert field_fragment in text


def test_valid_ipvlan_unnumbered() -> None:
    cfg = NetworkConfig.model_validate(
        {"interface": {"type": "ipvlan", "unnumbered": True, "ipvlan": {"mode": "l3"}}}
    )
    assert cfg.wants_ipvlan


def test_capabilities_strict() -> None:
    caps = Capabilities.model_validate_json('{"cloudProvider": true, "profileProvider": false}')
    assert caps.cloud_provider and not caps.profile_provider
    with pytest.raises(ValidationError):
        Capabilities.model_validate_json('{"cloudProvider": true}')
    with pytest.raises(ValidationError):
        Capabilities.model_validate_json('{"cloudProvider": "yes", "profileProvider": true}')


def test_profile_request_wire_shape() -> None:
    req = ProfileRequest(
        device=DeviceIdentifiers(name="eth1"), claim_uid="u1", config=NetworkConfig(profile="p")
    )
    assert req.to_wire() == {
        "device": {"name": "eth1"},
        "claim_uid": "u1",
        "config": {"profile": "p", "interface": {}},
    }
