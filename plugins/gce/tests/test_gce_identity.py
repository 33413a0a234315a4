"""One NIC, every name DRANET uses for it: the same answers through
``describe``, ``profile get`` and ``serve``, and a release in one form frees
what another form allocated."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from dranet_cloud_gce.sample import PRIMARY_PCI

from dranet_cloud.cli.main import main
from dranet_cloud.contract.context import SampleHost
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import SqliteStore
from dranet_cloud.node.nic import dra_pci_name
from dranet_cloud.server.runner import ServeOptions, WebhookServer
from dranet_cloud.testing import Emulator

MAC = "42:01:0a:80:00:46"  # eth0 of the sample host and the default fixture
CLAIM = {"profile": "gce-subinterface", "interface": {"type": "IPVLAN"}}
# CLI --device spelling and wire DeviceIdentifiers of each form of eth0.
FORMS: list[tuple[str, dict[str, str]]] = [
    ("eth0", {"name": "eth0", "mac_address": MAC, "pci_address": PRIMARY_PCI}),
    (dra_pci_name(PRIMARY_PCI), {"name": dra_pci_name(PRIMARY_PCI)}),
    (f"mac={MAC}", {"name": "", "mac_address": MAC}),
    (f"pci={PRIMARY_PCI}", {"name": "", "pci_address": PRIMARY_PCI}),
]


@pytest.fixture
def cli_env(gce_emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("GCE_METADATA_HOST", "DRANET_CLOUD_GCE_METADATA_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    for key, value in gce_emulator.env.items():
        monkeypatch.setenv(key, value)


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_describe_answers_every_form_alike(
    capsys: pytest.CaptureFixture[str], gce_sample: SampleHost, cli_env: None
) -> None:
    answers = []
    for spec, _wire in FORMS:
        data = _cli(
            capsys, "describe", "--cloud-provider-hint", "gce", "--host-root", str(gce_sample.root),
            "--device", spec, "-o", "json",
        )  # fmt: skip
        (device,) = data["devices"]
        assert device["device"] == FORMS[0][1], spec
        answers.append((device["attributes"], device["config"]))
    attrs, config = answers[0]
    assert attrs["gce.dra.net/networkName"] and config["interface"]["mtu"] == 1460
    assert all(a == answers[0] for a in answers)


def test_profile_get_and_release_across_forms(
    capsys: pytest.CaptureFixture[str], gce_sample: SampleHost, cli_env: None, tmp_path: Path
) -> None:
    db = tmp_path / "ipam.db"
    claim = tmp_path / "claim.json"
    claim.write_text(json.dumps(CLAIM))
    common = ["--cloud-provider-hint", "gce", "--host-root", str(gce_sample.root)]
    common += ["--ipam-db", str(db), "--config", str(claim), "-o", "json"]

    def get(spec: str, uid: str) -> list[str]:
        doc = _cli(capsys, "profile", "get", "--claim-uid", uid, "--device", spec, *common)
        addresses: list[str] = doc["interface"]["addresses"]
        return addresses

    def listed() -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = _cli(
            capsys, "ipam", "list", "--ipam-db", str(db), "-o", "json"
        )
        return rows

    got = {spec: get(spec, "claim-1") for spec, _ in FORMS}
    assert len({tuple(v) for v in got.values()}) == 1
    rows = listed()
    assert len(rows) == 2 and {r["device"] for r in rows} == {f"mac:{MAC}"}
    assert set(rows[0]["names"]) == {"eth0", dra_pci_name(PRIMARY_PCI)}
    # Allocate in one form, release in every other one.
    for made, _ in FORMS:
        for freed, _ in FORMS:
            if freed == made:
                continue
            assert get(made, "claim-2")
            doc = _cli(
                capsys, "profile", "release", "--claim-uid", "claim-2", "--device", freed, *common
            )
            assert doc["released"] is True
            assert {r["claim_uid"] for r in listed()} == {"claim-1"}, (made, freed)


@pytest.fixture
def served(
    gce_sample: SampleHost, gce_emulator: Emulator, tmp_path: Path
) -> Iterator[tuple[httpx.Client, Path]]:
    db = tmp_path / "ipam.db"
    host = ProviderHost(
        cloud_provider_hint="gce",
        host_root=str(gce_sample.root),
        env=gce_emulator.env,
        ipam_factory=lambda: SqliteStore(db),
    )
    host.start()
    opts = ServeOptions(listen=f"unix://{tmp_path}/hook.sock")
    with WebhookServer(host, opts) as server:
        assert server.bound is not None and server.bound.path is not None
        transport = httpx.HTTPTransport(uds=server.bound.path)
        with httpx.Client(transport=transport, base_url="http://localhost", timeout=30) as client:
            yield client, db


def test_serve_answers_every_form_alike(served: tuple[httpx.Client, Path]) -> None:
    client, db = served
    seen = []
    for _spec, wire in FORMS:
        attrs = client.post("/GetDeviceAttributes", json=wire)
        config = client.post("/GetDeviceConfig", json=wire)
        profile = client.post(
            "/GetProfileConfig", json={"device": wire, "claim_uid": "claim-1", "config": CLAIM}
        )
        assert attrs.status_code == config.status_code == profile.status_code == 200, wire
        seen.append((attrs.json(), config.json(), profile.json()))
    assert seen[0][0] and seen[0][1]["interface"]["mtu"] == 1460
    assert len(seen[0][2]["interface"]["addresses"]) == 2
    assert all(s == seen[0] for s in seen)
    # gen1 allocates under the DRA name; gen2 releases by PCI address only.
    _, gen1 = FORMS[1]
    _, pci_only = FORMS[3]
    body = {"device": gen1, "claim_uid": "claim-2", "config": CLAIM}
    assert client.post("/GetProfileConfig", json=body).status_code == 200
    body = {"device": pci_only, "claim_uid": "claim-2", "config": CLAIM}
    assert client.post("/ReleaseProfileConfig", json=body).status_code == 200
    with SqliteStore(db) as store:
        assert {a.owner.claim_uid for a in store.list()} == {"claim-1"}
    # gen2 sends the whole ResourceClaim: its namespace/name are kept with the
    # allocation (leak reclaiming reads them), whichever form names the NIC.
    claim = {
        "metadata": {"name": "gpu-net", "namespace": "team-a", "uid": "claim-3"},
        "status": {"reservedFor": [{"resource": "pods", "name": "trainer-0", "uid": "p0"}]},
    }
    _, mac_only = FORMS[2]
    body = {"device": mac_only, "claim": claim, "config": CLAIM}
    assert client.post("/GetProfileConfig", json=body).status_code == 200
    with SqliteStore(db) as store:
        held = [a for a in store.list() if a.owner.claim_uid == "claim-3"]
    assert len(held) == 2
    assert all(a.claim is not None and a.claim.qualified_name == "team-a/gpu-net" for a in held)
    assert all([p.name for p in a.claim.pods] == ["trainer-0"] for a in held if a.claim)
    body = {"device": gen1, "claim_uid": "claim-3", "config": CLAIM}
    assert client.post("/ReleaseProfileConfig", json=body).status_code == 200
    with SqliteStore(db) as store:
        assert {a.owner.claim_uid for a in store.list()} == {"claim-1"}
