"""The ``azure-ipoib`` profile against the Azure emulator and an ND-series node.

The sample node has eight InfiniBand NICs with 20-byte IPoIB addresses and a
Hyper-V KVP pool whose ``IPoIB_Data`` lists eight pairs.  A real ``serve``
server (the app on a real unix socket) answers GetProfileConfig for each IB
NIC under each name DRANET may use, the way DRANET sends it; a NIC the pool
does not list is denied naming it and the file; a truncated pool is an error
(500), never an address.  ``describe`` and ``profile get`` take the 20-byte
address as ``mac=``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from dranet_cloud_azure.kvp import DEFAULT_POOL_PATH, KvpPoolError, decode_pool, encode_pool
from dranet_cloud_azure.profile import (
    KVP_KEY,
    PROFILE,
    kvp_mac,
    parse_ipoib_data,
)
from dranet_cloud_azure.sample import ETH0, IB_ADDRESSES, IB_NICS, kvp_records

from dranet_cloud.contract.context import ProviderOptions, SampleHost
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.node.nic import dra_pci_name
from dranet_cloud.testing import Emulator
from dranet_cloud.testing.cli import describe_json, run_cli
from dranet_cloud.testing.dranet_wire import resource_claim, served_on_unix_socket
from dranet_cloud.toolkit.errors import ConfigError
from dranet_cloud.toolkit.hwaddr import parse_hwaddr
from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig

REREAD = 0.05  # seconds; the tests wait a little longer before expecting a fresh read
UID = "0f6c2b1e-3d4a-4b5c-8d6e-7f8091a2b3c4"


def test_the_kvp_mac_is_bytes_12_to_14_and_17_to_19() -> None:
    ib = parse_hwaddr("00:00:10:29:fe:80:00:00:00:00:00:00:00:15:5d:ff:fd:33:ff:0b")
    assert str(kvp_mac(ib)) == "00:15:5d:33:ff:0b"
    with pytest.raises(ValueError, match="20-byte"):
        kvp_mac(parse_hwaddr("00:15:5d:33:ff:0b"))


def test_ipoib_data_with_n_pairs_is_read_whole_and_counted() -> None:
    # Microsoft's own sample (its webhook's only accepted shape, N = 1).
    assert {
        k: str(v) for k, v in parse_ipoib_data("NUMPAIRS:1|00155D33FF0B:172.16.1.2", "t").items()
    } == {"00:15:5d:33:ff:0b": "172.16.1.2"}
    eight = dict(kvp_records())[KVP_KEY]
    assert len(parse_ipoib_data(eight, "t")) == 8
    assert parse_ipoib_data("NUMPAIRS:0", "t") == {}
    for bad in (
        "NUMPAIRS:2|00155D33FF0B:172.16.1.2",  # announces 2, lists 1: cut short
        "NUMPAIRS:1|00155D33FF0B:172.16.1.2|00155D33FF0C:172.16.1.3",
        "NUMPAIRS:1|00155D33FF0B:172.16.1.",
        "NUMPAIRS:1|00155D33FF0B:172.16.001.2",
        "NUMPAIRS:1|00155D33FF0:172.16.1.2",
        "NUMPAIRS:1|00:15:5D:33:FF:0B:172.16.1.2",
        "NUMPAIRS:1|00155D33FF0B",
        "NUMPAIRS:1|00155D33FF0B:fe80::1",
        "NUMPAIRS:2|00155D33FF0B:172.16.1.2|00155d33ff0b:172.16.1.3",
        "NUMPAIRS:x|00155D33FF0B:172.16.1.2",
        "NUMPAIRS:1|00155D33FF0B:172.16.1.2|",
        "",
    ):
        with pytest.raises(KvpPoolError):
            parse_ipoib_data(bad, "t")


def test_a_pool_that_is_not_whole_records_is_refused() -> None:
    data = encode_pool(kvp_records())
    assert decode_pool(data, "p")[-1][0] == KVP_KEY
    with pytest.raises(KvpPoolError, match="not a whole number"):
        decode_pool(data[:-100], "p")


def _write_pool(root: Path, content: bytes) -> None:
    """Rewrite the pool in place, as the KVP daemon does (same inode)."""
    with open(root / DEFAULT_POOL_PATH.lstrip("/"), "r+b") as fh:
        fh.write(content)
        fh.truncate()


def azure_host(emu: Emulator, sample: SampleHost, **settings: str) -> ProviderHost:
    """A host (not started) for the Azure plugin, with ``azure.KEY`` settings."""
    return ProviderHost(
        cloud_provider_hint="azure",
        host_root=str(sample.root),
        env=emu.env,
        options=ProviderOptions(
            metadata_deadline=5.0, settings={f"azure.{k}": v for k, v in settings.items()}
        ),
    )


@pytest.fixture
def served(
    tmp_path: Path, azure_emulator: Emulator, azure_sample: SampleHost
) -> Iterator[tuple[ProviderHost, httpx.Client]]:
    host = azure_host(azure_emulator, azure_sample, kvp_reread=str(REREAD))
    host.start()
    with served_on_unix_socket(host, tmp_path) as client:
        yield host, client
    host.close()


def _ask(client: httpx.Client, device: dict[str, Any], gen: int = 2) -> httpx.Response:
    config = {"profile": PROFILE, "interface": {}}
    if gen == 2:
        body = {"device": device, "claim": resource_claim(UID), "config": config}
    else:
        body = {"device": device, "claim_uid": UID, "config": config}
    return client.post("/GetProfileConfig", json=body)


def test_serve_answers_each_ib_nic_under_every_name_and_denies_what_the_pool_lacks(
    served: tuple[ProviderHost, httpx.Client], azure_sample: SampleHost
) -> None:
    _host, client = served
    assert client.get("/health").json() == {"cloudProvider": True, "profileProvider": True}
    for (ifname, hwaddr, pci, _ib), ip in zip(IB_NICS, IB_ADDRESSES, strict=True):
        forms = [
            ({"mac_address": hwaddr, "pci_address": pci, "name": ifname}, 2),  # gen2
            ({"mac_address": hwaddr, "name": ""}, 2),  # the 20-byte address alone
            ({"name": ifname}, 2),  # the interface name alone
            ({"pci_address": pci, "name": dra_pci_name(pci)}, 1),  # gen1: the DRA name
            ({"name": dra_pci_name(pci)}, 1),
        ]
        for device, gen in forms:
            r = _ask(client, device, gen)
            assert r.status_code == 200, (device, r.text)
            assert r.json() == {"interface": {"type": "Passthrough", "addresses": [f"{ip}/16"]}}
    r = client.post(
        "/ReleaseProfileConfig",
        json={"device": {"name": IB_NICS[0][0]}, "claim_uid": UID, "config": {"profile": PROFILE}},
    )
    assert r.status_code == 200

    # Not an IB NIC, or another profile: refused, nothing read.
    r = _ask(client, {"name": ETH0})
    assert r.status_code == 400 and "InfiniBand" in r.text and ETH0 in r.text
    body = {
        "device": {"name": IB_NICS[0][0]},
        "claim_uid": UID,
        "config": {"profile": "gce-managed"},
    }
    assert client.post("/GetProfileConfig", json=body).status_code == 404
    ipvlan = {"profile": PROFILE, "interface": {"type": "IPVLAN"}}
    body = {"device": {"name": IB_NICS[0][0]}, "claim_uid": UID, "config": ipvlan}
    r = client.post("/GetProfileConfig", json=body)
    assert r.status_code == 400 and "IPVLAN" in r.text

    # The host drops ib7's pair: once the cached read is older than the interval,
    # ib7 is denied with a message naming it and the pool file.
    pool = azure_sample.root / DEFAULT_POOL_PATH.lstrip("/")
    _write_pool(azure_sample.root, encode_pool(kvp_records(7)))
    time.sleep(REREAD * 3)
    ib7, ib7_hwaddr = IB_NICS[7][0], IB_NICS[7][1]
    r = _ask(client, {"mac_address": ib7_hwaddr, "name": ib7})
    assert r.status_code == 400, r.text
    assert ib7 in r.text and str(pool) in r.text and "00:15:5d:33:ff:07" in r.text
    assert _ask(client, {"name": IB_NICS[6][0]}).status_code == 200

    # A pool cut short mid-record (the daemon mid-rewrite): an error DRANET
    # retries, not a shorter answer; whole again, it answers again.
    _write_pool(azure_sample.root, encode_pool(kvp_records())[:-1000])
    time.sleep(REREAD * 3)
    r = _ask(client, {"name": IB_NICS[0][0]})
    assert r.status_code == 500 and "not a whole number" in r.text and "addresses" not in r.text
    _write_pool(azure_sample.root, encode_pool(kvp_records()))
    time.sleep(REREAD * 3)
    assert _ask(client, {"name": IB_NICS[0][0]}).status_code == 200


def test_an_unreadable_pool_is_an_error_and_a_cut_value_is_too(
    served: tuple[ProviderHost, httpx.Client], azure_sample: SampleHost
) -> None:
    _host, client = served
    records = kvp_records()
    key, value = records[-1]
    _write_pool(azure_sample.root, encode_pool([*records[:-1], (key, value[: len(value) // 2])]))
    time.sleep(REREAD * 3)
    r = _ask(client, {"name": IB_NICS[0][0]})
    assert r.status_code == 500 and KVP_KEY in r.text
    (azure_sample.root / DEFAULT_POOL_PATH.lstrip("/")).unlink()
    time.sleep(REREAD * 3)
    r = _ask(client, {"name": IB_NICS[0][0]})
    assert r.status_code == 500 and "cannot read" in r.text


def test_describe_and_profile_get_take_the_20_byte_address(
    tmp_path: Path, azure_emulator: Emulator, azure_sample: SampleHost
) -> None:
    ifname, hwaddr, pci, _ = IB_NICS[3]
    dashed = hwaddr.upper().replace(":", "-")
    data = describe_json(azure_emulator.env, azure_sample.root, "--device", f"mac={dashed}")
    (entry,) = data["devices"]
    assert entry["device"] == {"mac_address": hwaddr, "pci_address": pci, "name": ifname}
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"profile": PROFILE}))
    res = run_cli(
        "profile", "get", "--host-root", str(azure_sample.root), "--device", f"mac={hwaddr}",
        "--claim-uid", UID, "--config", str(config), "-o", "json",
        env=azure_emulator.env,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["interface"]["addresses"] == [f"{IB_ADDRESSES[3]}/16"]


@pytest.mark.parametrize(
    ("key", "value"),
    [("ipoib_prefix_length", "33"), ("kvp_reread", "7200"), ("kvp_pool", "relative/pool")],
)
def test_a_bad_setting_stops_the_start_naming_it(
    azure_emulator: Emulator, azure_sample: SampleHost, key: str, value: str
) -> None:
    host = azure_host(azure_emulator, azure_sample, **{key: value})
    with pytest.raises(ConfigError, match=f"azure.{key}={value}"):
        host.start()
    host.close()


def test_the_prefix_length_is_a_setting(azure_emulator: Emulator, azure_sample: SampleHost) -> None:
    host = azure_host(azure_emulator, azure_sample, ipoib_prefix_length="24")
    host.start()
    try:
        dev = DeviceIdentifiers(mac_address=IB_NICS[2][1])
        final = host.network_config(dev, UID, NetworkConfig.model_validate({"profile": PROFILE}))
        assert final.interface.addresses == [f"{IB_ADDRESSES[2]}/24"]
        assert final.interface.type == "Passthrough"
    finally:
        host.close()


def test_ib_nics_are_no_hot_attach_and_their_answers_are_cached(
    azure_emulator: Emulator, azure_sample: SampleHost
) -> None:
    """IMDS never lists an IPoIB address: asking about the IB NICs reloads nothing."""
    host = azure_host(azure_emulator, azure_sample)
    host.start()
    try:
        loaded = len(azure_emulator.log)
        for _ in range(2):
            for name, hwaddr, _pci, _ib in IB_NICS:
                assert host.device_attributes(DeviceIdentifiers(name=name, mac_address=hwaddr))
        assert len(azure_emulator.log) == loaded
        unknown = DeviceIdentifiers(name="eth9", mac_address="00:0d:3a:99:99:99")
        host.device_attributes(unknown)  # an Ethernet MAC IMDS lacks: one reload
        assert len(azure_emulator.log) == loaded + 1
    finally:
        host.close()
