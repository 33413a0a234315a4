"""Both DRANET generations against one real server, as in a rolling upgrade.

A gen2 node (PR #282: the whole ResourceClaim in ``claim``, gen2 config
spelling) and a gen1 node (``claim_uid``, gen1 spelling, the DRA device name)
ask a real ``serve`` server (uvicorn on a unix socket) for the same device and
claim: they must get the same addresses, retries included, and a release by
UID frees them.  Every answer is held to gen2's Go shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dranet_cloud.cli.main import main as cli_main
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.testing.dranet_wire import (
    get_profile_config,
    go_shape_problems,
    resource_claim,
    served_local_ipam,
)
from dranet_cloud.wire.claims import ClaimReference, PodReference

UID = "0f6b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d"
MAC = "42:01:0a:00:00:05"
GEN2_DEVICE = {"mac_address": MAC, "pci_address": "0000:00:05.0", "name": "eth1"}
GEN1_DEVICE = {"mac_address": MAC, "pci_address": "0000:00:05.0", "name": "pci-0000-00-05-0"}
GEN2_CONFIG = {"profile": "local-ipam", "interface": {"type": "IPVLAN"}}
GEN1_CONFIG = {"profile": "local-ipam", "interface": {"type": "ipvlan"}}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ProviderHost, httpx.Client]]:
    with served_local_ipam(tmp_path, ["10.30.0.0/24", "fd00:30::/64"]) as served:
        yield served


def test_gen1_and_gen2_get_the_same_addresses_and_release_by_uid_frees_them(
    served: tuple[ProviderHost, httpx.Client],
) -> None:
    host, client = served
    claim = resource_claim(UID, pods=(("trainer-0", "pod-uid-0"),))
    gen2 = {"device": GEN2_DEVICE, "claim": claim, "config": GEN2_CONFIG}
    gen1 = {"device": GEN1_DEVICE, "claim_uid": UID, "config": GEN1_CONFIG}
    first = get_profile_config(client, gen2)
    addresses = first["interface"]["addresses"]
    assert len(addresses) == 2  # one per family
    assert get_profile_config(client, gen2) == first  # kubelet retry, gen2
    assert get_profile_config(client, gen1) == first  # the same claim from a gen1 node
    assert get_profile_config(client, gen1) == first  # and its retry
    both = {**gen2, "claim_uid": UID}  # what this project's webhook client sends
    assert get_profile_config(client, both) == first
    held = host.context.ipam.list()
    assert sorted(a.address for a in held) == sorted(addresses)
    # the claim's namespace, name and pod were recorded for leak reclaiming
    assert {a.claim for a in held} == {
        ClaimReference(UID, "team-a", "trainer-0-nic", (PodReference("trainer-0", "pod-uid-0"),))
    }
    # DRANET releases by claim_uid in both generations, with the final config.
    final = {"profile": "local-ipam", "interface": {"type": "IPVLAN", "addresses": addresses}}
    r = client.post(
        "/ReleaseProfileConfig", json={"device": GEN1_DEVICE, "claim_uid": UID, "config": final}
    )
    assert r.status_code == 200, r.text
    assert host.context.ipam.list() == []
    # another claim may now have them; a new claim is not confused with the old one
    other = get_profile_config(client, {**gen2, "claim": resource_claim("another-uid")})
    assert other["interface"]["addresses"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"device": GEN2_DEVICE, "config": GEN2_CONFIG}, "the request has neither"),
        (
            {
                "device": GEN2_DEVICE,
                "claim_uid": "other",
                "claim": resource_claim(UID),
                "config": GEN2_CONFIG,
            },
            "differs from claim.metadata.uid",
        ),
        (
            {"device": GEN2_DEVICE, "claim": {"metadata": {"name": "x"}}, "config": GEN2_CONFIG},
            "claim.metadata.uid",
        ),
    ],
)
def test_claim_errors_are_400_and_allocate_nothing(
    served: tuple[ProviderHost, httpx.Client], body: dict[str, Any], fragment: str
) -> None:
    host, client = served
    r = client.post("/GetProfileConfig", json=body)
    assert r.status_code == 400 and fragment in r.text, r.text
    assert host.context.ipam.list() == []


def test_static_addresses_come_back_exactly_as_written(
    served: tuple[ProviderHost, httpx.Client],
) -> None:
    _, client = served
    config = {
        "profile": "local-ipam",
        "interface": {"type": "IPVLAN", "addresses": ["10.30.0.77/24"]},
    }
    answer = get_profile_config(
        client, {"device": GEN2_DEVICE, "claim": resource_claim(UID), "config": config}
    )
    assert answer["interface"]["addresses"] == ["10.30.0.77/24"]


@pytest.mark.parametrize(
    "claim_config",
    [
        {"profile": "local-ipam", "interface": {"type": "IPVLAN"}},
        {"profile": "local-ipam", "interface": {"type": "ipvlan"}},  # its gen1 twin
    ],
    ids=["gen2", "gen1"],
)
def test_profile_get_takes_either_spelling_and_prints_gen2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    claim_config: dict[str, Any],
) -> None:
    """``profile get`` with the claim as kubectl prints it, or only its UID."""
    (tmp_path / "config.json").write_text(json.dumps(claim_config))
    (tmp_path / "claim.json").write_text(json.dumps(resource_claim(UID)))
    common = [
        "--host-root",
        str(tmp_path),
        "--ipam-range",
        "10.31.0.0/24",
        "--ipam-db",
        str(tmp_path / "ipam.db"),
        "--device",
        f"name=eth1,mac={MAC}",
        "--config",
        str(tmp_path / "config.json"),
        "-o",
        "json",
    ]
    outputs = []
    for claim_args in (
        ["--claim", str(tmp_path / "claim.json")],
        ["--claim-uid", UID],
        ["--claim", str(tmp_path / "claim.json"), "--claim-uid", UID],
    ):
        assert cli_main(["profile", "get", *common, *claim_args]) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    assert outputs[0] == outputs[1] == outputs[2]
    final = outputs[0]
    assert go_shape_problems(final) == []
    assert final["interface"]["type"] == "IPVLAN"
    assert final["interface"]["ipvlan"] == {"mode": "L2", "flag": "Bridge"}  # DRANET's default
    assert len(final["interface"]["addresses"]) == 1
    assert (
        cli_main(
            [
                "profile",
                "get",
                *common,
                "--claim-uid",
                "nope",
                "--claim",
                str(tmp_path / "claim.json"),
            ]
        )
        != 0
    )
    assert "differs" in capsys.readouterr().err
    assert cli_main(["profile", "release", *common, "--claim", str(tmp_path / "claim.json")]) == 0
    released = json.loads(capsys.readouterr().out)
    assert released["released"] is True and released["claim_uid"] == UID
