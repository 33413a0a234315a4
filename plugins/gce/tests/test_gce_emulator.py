"""The emulator answers like GCE's metadata server."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from dranet_cloud_gce.emulator import build_emulator, camel, kebab

from dranet_cloud.testing import Emulator
from dranet_cloud.toolkit.errors import ConfigError

FLAVOR = {"Metadata-Flavor": "Google"}


# One plain-HTTP client for the module (building a TLS context per request
# would dominate these tests' run time).
_CLIENT = httpx.Client(trust_env=False, verify=False)


def teardown_module() -> None:
    _CLIENT.close()


def _get(emu: Emulator, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
    h = FLAVOR if headers is None else headers
    return _CLIENT.get(emu.url + path, headers=h)


def test_request_header_is_required_and_answers_carry_it(gce_emulator: Emulator) -> None:
    r = _get(gce_emulator, "/computeMetadata/v1/", headers={})
    assert r.status_code == 403
    assert "Metadata-Flavor" in r.text
    assert r.headers["Metadata-Flavor"] == "Google"
    wrong = _get(gce_emulator, "/computeMetadata/v1/", headers={"Metadata-Flavor": "Amazon"})
    assert wrong.status_code == 403
    for path in ("/computeMetadata/v1/", "/computeMetadata/v1/instance/nope", "/other"):
        r = _get(gce_emulator, path)
        assert r.headers["Metadata-Flavor"] == "Google", path


def test_forwarded_requests_are_refused(gce_emulator: Emulator) -> None:
    r = _get(gce_emulator, "/computeMetadata/v1/", headers={**FLAVOR, "X-Forwarded-For": "1.2.3.4"})
    assert r.status_code == 403


def test_header_comes_back_on_injected_faults() -> None:
    with build_emulator(None, "127.0.0.1:0", "status=503") as emu:
        r = _get(emu, "/computeMetadata/v1/")
        assert r.status_code == 503
        assert r.headers["Metadata-Flavor"] == "Google"


def test_kebab_case_path_access(gce_emulator: Emulator) -> None:
    assert _get(
        gce_emulator, "/computeMetadata/v1/instance/network-interfaces/0/ip-aliases"
    ).text == ("10.24.3.0/24")
    assert _get(
        gce_emulator, "/computeMetadata/v1/instance/network-interfaces/0/ip-aliases/0"
    ).text == ("10.24.3.0/24")
    assert _get(gce_emulator, "/computeMetadata/v1/instance/machine-type").text == (
        "projects/628944397724/machineTypes/a3-megagpu-8g"
    )
    assert (
        _get(gce_emulator, "/computeMetadata/v1/project/numeric-project-id").text == "628944397724"
    )
    assert (
        _get(gce_emulator, "/computeMetadata/v1/instance/network-interfaces/4/mtu").text == "8244"
    )
    assert _get(gce_emulator, "/computeMetadata/v1/instance/nope").status_code == 404
    assert (
        _get(gce_emulator, "/computeMetadata/v1/instance/network-interfaces/9/").status_code == 404
    )


def test_attributes_are_served_verbatim(gce_emulator: Emulator) -> None:
    r = _get(gce_emulator, "/computeMetadata/v1/instance/attributes/physical_host")
    assert r.status_code == 200 and r.text.count("/") == 3
    listing = _get(gce_emulator, "/computeMetadata/v1/instance/attributes/").text.split()
    assert "physical_host" in listing and "enable-oslogin" in listing


def test_directory_listings(gce_emulator: Emulator) -> None:
    assert _get(gce_emulator, "/computeMetadata/v1/").text.split() == ["instance/", "project/"]
    instance = _get(gce_emulator, "/computeMetadata/v1/instance/").text.split()
    assert "network-interfaces/" in instance
    assert "machine-type" in instance
    assert "attributes/" in instance
    nics = _get(gce_emulator, "/computeMetadata/v1/instance/network-interfaces/").text.split()
    assert nics == [f"{i}/" for i in range(9)]
    as_json = _get(gce_emulator, "/computeMetadata/v1/instance/network-interfaces/?alt=json")
    assert as_json.json() == nics
    assert _get(gce_emulator, "/").text.split() == ["computeMetadata/"]


def test_recursive_json_keeps_camel_case(gce_emulator: Emulator) -> None:
    r = _get(gce_emulator, "/computeMetadata/v1/?recursive=true&alt=json")
    assert r.headers["content-type"].startswith("application/json")
    tree = r.json()
    assert set(tree) == {"instance", "project"}
    nic0 = tree["instance"]["networkInterfaces"][0]
    assert nic0["ipAliases"] == ["10.24.3.0/24"]
    sub = _get(gce_emulator, "/computeMetadata/v1/instance/network-interfaces/0/?recursive=true")
    assert sub.json() == nic0  # recursive defaults to JSON


def test_alt_json_and_text_on_leaves(gce_emulator: Emulator) -> None:
    base = "/computeMetadata/v1/instance/network-interfaces/1/"
    assert _get(gce_emulator, base + "ip?alt=json").json() == "192.168.1.2"
    assert _get(gce_emulator, base + "ip?alt=text").text == "192.168.1.2"
    assert _get(gce_emulator, base + "mtu?alt=json").json() == 8244
    assert _get(gce_emulator, base + "ip?alt=xml").status_code == 400


def test_recursive_text_is_flattened(gce_emulator: Emulator) -> None:
    text = _get(
        gce_emulator, "/computeMetadata/v1/instance/network-interfaces/2/?recursive=true&alt=text"
    ).text
    lines = text.splitlines()
    assert "ip 192.168.2.2" in lines
    assert "mtu 8244" in lines
    assert "network projects/628944397724/networks/a3mega-gpu-2" in lines


def test_only_get(gce_emulator: Emulator) -> None:
    r = _CLIENT.post(gce_emulator.url + "/computeMetadata/v1/", headers=FLAVOR)
    assert r.status_code == 405


def test_case_conversions() -> None:
    assert kebab("networkInterfaces") == "network-interfaces"
    assert kebab("numericProjectId") == "numeric-project-id"
    assert kebab("forwardedIpv6s") == "forwarded-ipv6s"
    assert kebab("mac") == "mac"
    assert camel("network-interfaces") == "networkInterfaces"
    assert camel("gateway-ipv6") == "gatewayIpv6"
    assert camel(kebab("targetInstanceIps")) == "targetInstanceIps"


def test_bad_fixtures_are_config_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(ConfigError, match="cannot read"):
        build_emulator(missing, "127.0.0.1:0", None)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not JSON"):
        build_emulator(bad, "127.0.0.1:0", None)
    shape = tmp_path / "shape.json"
    shape.write_text(json.dumps({"networkInterfaces": []}))
    with pytest.raises(ConfigError, match='"instance"'):
        build_emulator(shape, "127.0.0.1:0", None)


def test_emulator_refuses_non_loopback() -> None:
    with pytest.raises(ValueError, match="loopback"):
        build_emulator(None, "0.0.0.0:0", None)
