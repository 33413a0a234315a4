"""Wire models: DRANET-shaped JSON round-trips, validation names the field."""

from __future__ import annotations

import json
import logging

import pytest
from pydantic import ValidationError

from dranet_cloud.wire.claims import ClaimReference, PodReference
from dranet_cloud.wire.models import (
    Capabilities,
    DeviceAttribute,
    DeviceIdentifiers,
    NetworkConfig,
    ProfileRequest,
    describe_validation_error,
    normalize_mac,
    parse_peer_config,
    parse_profile_request,
    parse_user_config,
)

# A gen2 document with every field set, as DRANET's Go structs (pkg/apis/types.go
# since PR #241) write it.
DRANET_DOC = {
    "profile": "acme.com/overlay",
    "interface": {
        "name": "net0",
        "type": "IPVLAN",
        "addressing": "Static",
        "addresses": ["10.24.3.7/32", "2001:db8::c0de:0:0:5/128"],
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
        "ipvlan": {"mode": "L2", "flag": "Bridge"},
    },
    "routes": [
        {"destination": "0.0.0.0/0", "gateway": "10.0.0.1", "source": "", "scope": 0, "table": 100}
    ],
    "rules": [{"priority": 100, "source": "10.0.0.0/24", "destination": "", "table": 100}],
    "neighbors": [{"destination": "10.0.0.1", "hardwareAddr": "42:01:0a:00:00:01"}],
    "ethtool": {"features": {"rx-checksum": True}, "privateFlags": {}},
}


def test_dranet_document_round_trips_in_go_shape() -> None:
    """Pointer fields keep false/0; value fields Go omits when zero are dropped."""
    model = NetworkConfig.model_validate_json(json.dumps(DRANET_DOC))
    expected = json.loads(json.dumps(DRANET_DOC))
    expected["routes"] = [{"destination": "0.0.0.0/0", "gateway": "10.0.0.1", "table": 100}]
    expected["rules"] = [{"priority": 100, "source": "10.0.0.0/24", "table": 100}]
    expected["ethtool"] = {"features": {"rx-checksum": True}}
    assert json.loads(model.to_json()) == expected
    assert model.interface.gso_ipv4_max_size == 65536
    assert model.interface.vrf is not None and model.interface.vrf.table == 1100


def test_empty_config_is_go_shape() -> None:
    assert NetworkConfig().to_json() == '{"interface":{}}'
    assert NetworkConfig.model_validate({}).to_wire() == {"interface": {}}
    assert NetworkConfig.model_validate({"interface": None}).to_wire() == {"interface": {}}
    assert NetworkConfig.model_validate(
        {"profile": "", "routes": [], "interface": {"name": "", "addresses": [], "type": ""}}
    ).to_wire() == {"interface": {}}


@pytest.mark.parametrize(
    ("gen1", "gen2"),
    [
        ({"type": "ipvlan"}, {"type": "IPVLAN"}),
        ({"type": "passthrough"}, {"type": "Passthrough"}),
        (
            {"type": "ipvlan", "unnumbered": True},
            {"type": "IPVLAN", "addressing": "Unnumbered"},
        ),
        ({"type": "ipvlan", "unnumbered": False}, {"type": "IPVLAN"}),
        (
            {"type": "ipvlan", "ipvlan": {"mode": "l2", "flag": "bridge"}},
            {"type": "IPVLAN", "ipvlan": {"mode": "L2", "flag": "Bridge"}},
        ),
        ({"dhcp": True}, {"addressing": "DHCP"}),  # deprecated, written as gen2
        ({"dhcp": False}, {}),
    ],
)
def test_gen1_spelling_is_read_and_written_as_gen2(
    gen1: dict[str, object], gen2: dict[str, object]
) -> None:
    for parse in (parse_user_config, parse_peer_config):
        assert parse({"interface": gen1}).to_wire() == {"interface": gen2}
        assert parse({"interface": gen2}).to_wire() == {"interface": gen2}


def test_gen1_unnumbered_contradicting_addressing_is_rejected() -> None:
    with pytest.raises(ValidationError, match="unnumbered"):
        parse_user_config({"interface": {"unnumbered": True, "addressing": "DHCP"}})


def test_unknown_fields_strict_for_users_ignored_for_peers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    doc = {"profile": "p", "interface": {"type": "IPVLAN", "macvlan": {"mode": "x"}}, "hooks": 1}
    with pytest.raises(ValidationError) as err:
        parse_user_config(doc)
    assert "'macvlan'" in str(err.value) or "'hooks'" in str(err.value)
    with pytest.raises(ValidationError, match="'hardware_addr'"):
        parse_user_config({"interface": {"hardware_addr": "42:01:0a:00:00:01"}})
    with caplog.at_level(logging.DEBUG, logger="dranet_cloud.wire.models"):
        peer = parse_peer_config(doc)
    assert peer.to_wire() == {"profile": "p", "interface": {"type": "IPVLAN"}}
    assert "macvlan" in caplog.text and "hooks" in caplog.text


@pytest.mark.parametrize(
    ("interface", "fragment"),
    [
        ({"mtu": 10**30}, "mtu"),
        ({"mtu": 2**31}, "mtu"),
        ({"mtu": 1500.0}, "mtu"),
        ({"mtu": "1500"}, "mtu"),
        ({"mtu": True}, "mtu"),
        ({"gsoMaxSize": -(2**31) - 1}, "gsoMaxSize"),
        ({"dhcp": "yes"}, "dhcp"),
        ({"type": "macvlan"}, "type"),
        ({"type": "IPVlan"}, "type"),
        ({"addressing": "static"}, "addressing"),
        ({"name": 5}, "name"),
    ],
)
def test_go_decoding_rejects_wrong_types_and_overflow(
    interface: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ValidationError) as err:
        parse_peer_config({"interface": interface})
    assert f"interface.{fragment}" in describe_validation_error(err.value)


def test_route_scope_is_uint8() -> None:
    with pytest.raises(ValidationError, match="scope"):
        parse_peer_config({"routes": [{"destination": "10.0.0.0/8", "scope": 256}]})
    assert parse_peer_config({"routes": [{"destination": "::/0", "scope": 253}]}).routes


def test_device_identifiers_omit_empty_keep_name() -> None:
    assert DeviceIdentifiers(name="eth1").to_wire() == {"name": "eth1"}
    dev = DeviceIdentifiers(name="eth1", mac_address="42:01:C0:A8:01:02", pci_address="")
    # Normalized when built: the colon form Go's HardwareAddr.String() writes.
    assert dev.to_wire() == {"mac_address": "42:01:c0:a8:01:02", "name": "eth1"}
    assert dev.mac == "42:01:c0:a8:01:02"


@pytest.mark.parametrize("raw", ["0000.5e00.5301", "00-00-5E-00-53-01", "00:00:5e:00:53:01"])
def test_normalize_mac(raw: str) -> None:
    assert normalize_mac(raw) == "00:00:5e:00:53:01"


@pytest.mark.parametrize("raw", ["00005e005301", "rekharoy:3f:d2:b3:0b:0c", "deadbeef-cafe"])
def test_device_identifiers_refuse_what_go_refuses(raw: str) -> None:
    with pytest.raises(ValidationError, match="invalid MAC address") as err:
        DeviceIdentifiers(name="eth1", mac_address=raw)
    assert raw in str(err.value)


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


def test_capabilities_strict() -> None:
    caps = Capabilities.model_validate_json('{"cloudProvider": true, "profileProvider": false}')
    assert caps.cloud_provider and not caps.profile_provider
    with pytest.raises(ValidationError):
        Capabilities.model_validate_json('{"cloudProvider": true}')
    with pytest.raises(ValidationError):
        Capabilities.model_validate_json('{"cloudProvider": "yes", "profileProvider": true}')


CLAIM = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "nic-claim", "namespace": "team-a", "uid": "u1"},
    "status": {
        "reservedFor": [
            {"resource": "pods", "name": "trainer-0", "uid": "p1"},
            {"apiGroup": "batch", "resource": "jobs", "name": "j", "uid": "j1"},
        ]
    },
}


def test_profile_request_gen1_and_gen2_shapes() -> None:
    gen1 = parse_profile_request({"device": {"name": "eth1"}, "claim_uid": "u1"})
    assert gen1.claim_ref == ClaimReference(uid="u1")
    gen2 = parse_profile_request(json.dumps({"device": {"name": "eth1"}, "claim": CLAIM}))
    assert gen2.claim_ref == ClaimReference(
        uid="u1", namespace="team-a", name="nic-claim", pods=(PodReference("trainer-0", "p1"),)
    )
    both = parse_profile_request({"device": {"name": "eth1"}, "claim_uid": "u1", "claim": CLAIM})
    assert both.claim_ref.qualified_name == "team-a/nic-claim"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"device": {"name": "eth1"}}, "neither"),
        ({"device": {"name": "eth1"}, "claim_uid": ""}, "neither"),
        ({"device": {"name": "eth1"}, "claim_uid": "u2", "claim": CLAIM}, "differs"),
        ({"device": {"name": "eth1"}, "claim": {"metadata": {}}}, "claim.metadata.uid"),
        ({"device": {"name": "eth1"}, "claim": "u1"}, "claim"),
        (
            {"device": {"name": "eth1"}, "claim": {"metadata": {"uid": "u" * 200}}},
            "claim.metadata.uid",
        ),
    ],
)
def test_profile_request_claim_errors(body: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_profile_request(body)
    assert fragment in describe_validation_error(err.value)


def test_profile_request_wire_shape() -> None:
    req = ProfileRequest(
        device=DeviceIdentifiers(name="eth1"), claim_uid="u1", config=NetworkConfig(profile="p")
    )
    assert req.to_wire() == {
        "device": {"name": "eth1"},
        "claim_uid": "u1",
        "config": {"profile": "p", "interface": {}},
    }


def test_deep_copy_shares_nothing_mutable_and_keeps_what_was_set() -> None:
    """Configs are copied several times per claim (cache hand-outs, merge,
    defaulting); a copy a plugin edits must never change the original."""
    original = parse_peer_config(DRANET_DOC)
    copy = original.model_copy(deep=True)
    assert copy == original and copy.to_wire() == original.to_wire()
    assert copy.model_fields_set == original.model_fields_set
    copy.interface.addresses = None
    assert copy.routes is not None and copy.ethtool is not None
    copy.routes[0].table = 7
    copy.routes.append(copy.routes[0].model_copy())
    copy.ethtool.features["rx-checksum"] = False
    assert copy.interface.vrf is not None
    copy.interface.vrf.table = 1
    assert original.to_wire() == parse_peer_config(DRANET_DOC).to_wire()
    assert original.model_dump(exclude_unset=True) == parse_peer_config(DRANET_DOC).model_dump(
        exclude_unset=True
    )


def test_deep_copy_keeps_the_parsed_claim_reference() -> None:
    req = parse_profile_request(
        {
            "device": {"name": "eth1"},
            "claim": {"metadata": {"uid": "u-1", "namespace": "ns", "name": "c"}},
        }
    )
    copy = req.model_copy(deep=True)
    assert copy.claim_ref == req.claim_ref
    assert copy.claim is not None and req.claim is not None
    copy.claim["metadata"]["uid"] = "changed"
    assert req.claim["metadata"]["uid"] == "u-1"


def test_unknown_field_checks_hold_for_every_model_class() -> None:
    """Field names are computed once per class: a nested model, a subclass
    and the strict/lenient split must each keep their own set."""
    with pytest.raises(ValidationError) as err:
        parse_user_config({"interface": {"vrf": {"name": "v", "tabel": 3}}})
    text = str(err.value)
    assert "'tabel'" in text and "known fields: name, table" in text
    with pytest.raises(ValidationError) as err:
        parse_user_config({"interface": {"bogus": 1}})
    assert "unnumbered" not in str(err.value).split("known fields:")[1]  # legacy, not advertised
    assert parse_user_config({"interface": {"unnumbered": True}}).interface.addressing == (
        "Unnumbered"
    )

    class Wider(NetworkConfig):
        extra_knob: int | None = None

    assert Wider.model_validate({"extra_knob": 3}, context={"strict_fields": True}).extra_knob == 3
    with pytest.raises(ValidationError, match="'extra_knob'"):
        parse_user_config({"extra_knob": 3})
    # Python names are read from peers only.
    assert parse_peer_config({"interface": {"hardware_addr": "42:01:0a:00:00:01"}}).interface
