"""The ECS metadata emulator: token sessions, the tree, fixtures, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from dranet_cloud_aliyun.constants import ENDPOINT_ENV, TOKEN_HEADER, TOKEN_TTL_HEADER
from dranet_cloud_aliyun.emulator import EcsMetadataHandler, build_emulator, default_tree

from dranet_cloud.testing import Emulator
from dranet_cloud.toolkit.errors import ConfigError

TOKEN = "/latest/api/token"
MACS = "/latest/meta-data/network/interfaces/macs/"


def _token(client: httpx.Client, ttl: str = "21600") -> str:
    resp = client.put(TOKEN, headers={TOKEN_TTL_HEADER: ttl})
    assert resp.status_code == 200
    assert resp.headers[TOKEN_TTL_HEADER] == ttl
    return resp.text


def test_token_put_checks_the_ttl_header(ecs_emulator: Emulator) -> None:
    with httpx.Client(base_url=ecs_emulator.url) as client:
        assert client.put(TOKEN).status_code == 400
        assert client.put(TOKEN, headers={TOKEN_TTL_HEADER: "0"}).status_code == 400
        assert client.put(TOKEN, headers={TOKEN_TTL_HEADER: "21601"}).status_code == 400
        assert client.put(TOKEN, headers={TOKEN_TTL_HEADER: "soon"}).status_code == 400
        assert client.get(TOKEN).status_code == 405
        assert _token(client, "60")


def test_metadata_needs_a_live_token(ecs_emulator: Emulator) -> None:
    with httpx.Client(base_url=ecs_emulator.url) as client:
        bare = client.get("/latest/meta-data/instance-id")
        assert bare.status_code == 401
        assert "i-2zefwq8k3jx9d7m1n4ab" not in bare.text
        forged = client.get("/latest/meta-data/instance-id", headers={TOKEN_HEADER: "forged"})
        assert forged.status_code == 401
        token = _token(client)
        good = client.get("/latest/meta-data/instance-id", headers={TOKEN_HEADER: token})
        assert (good.status_code, good.text) == (200, "i-2zefwq8k3jx9d7m1n4ab")


def test_token_ttl_is_honoured(ecs_emulator: Emulator, ecs_handler: EcsMetadataHandler) -> None:
    now = [1000.0]
    ecs_handler.issuer.clock = lambda: now[0]
    with httpx.Client(base_url=ecs_emulator.url) as client:
        token = _token(client, "60")
        now[0] += 59
        assert client.get("/latest/meta-data/region-id", headers={TOKEN_HEADER: token}).text == (
            "cn-beijing"
        )
        now[0] += 2  # 61 s after issue: expired
        late = client.get("/latest/meta-data/region-id", headers={TOKEN_HEADER: token})
        assert late.status_code == 401


def test_tree_listings_and_leaves(ecs_emulator: Emulator) -> None:
    with httpx.Client(base_url=ecs_emulator.url) as client:
        headers = {TOKEN_HEADER: _token(client)}
        assert "meta-data/" in client.get("/latest/", headers=headers).text.splitlines()
        macs = client.get(MACS, headers=headers).text.splitlines()
        assert macs == ["00:16:3e:2c:8a:10/", "00:16:3e:2c:8a:11/", "00:16:3e:2c:8a:12/"]
        nic = client.get(MACS + "00:16:3e:2c:8a:11/", headers=headers).text.splitlines()
        assert "network-interface-id" in nic and "vswitch-ipv6-cidr-block" in nic
        ipv4s = client.get(MACS + "00:16:3e:2c:8a:11/private-ipv4s", headers=headers)
        assert json.loads(ipv4s.text) == ["172.16.33.10"]
        assert client.get("/latest/meta-data/nope", headers=headers).status_code == 404
        assert client.get("/elsewhere", headers=headers).status_code == 404
        assert client.put("/latest/meta-data/region-id", headers=headers).status_code == 405


def test_scalar_lists_in_a_fixture_are_served_as_json(tmp_path: Path) -> None:
    tree = default_tree()
    nic = tree["meta-data"]["network"]["interfaces"]["macs"]["00:16:3e:2c:8a:10"]
    nic["private-ipv4s"] = ["172.16.8.121", "172.16.8.122"]
    path = tmp_path / "two-ips.json"
    path.write_text(json.dumps(tree))
    with build_emulator(path) as emu, httpx.Client(base_url=emu.url) as client:
        headers = {TOKEN_HEADER: _token(client)}
        text = client.get(MACS + "00:16:3e:2c:8a:10/private-ipv4s", headers=headers).text
        assert text == '["172.16.8.121","172.16.8.122"]'


def test_fixture_replaces_the_built_in_instance(tmp_path: Path) -> None:
    path = tmp_path / "small.json"
    path.write_text(json.dumps({"meta-data": {"instance-id": "i-custom0001", "region-id": "x"}}))
    with build_emulator(path) as emu, httpx.Client(base_url=emu.url) as client:
        headers = {TOKEN_HEADER: _token(client)}
        assert client.get("/latest/meta-data/instance-id", headers=headers).text == "i-custom0001"
        assert client.get(MACS, headers=headers).status_code == 404
        assert emu.env == {ENDPOINT_ENV: emu.url}


@pytest.mark.parametrize("content", ["not json", "[]", '{"instance": {}}', '{"meta-data": "flat"}'])
def test_bad_fixtures_are_config_errors(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match="aliyun: fixture"):
        build_emulator(path)


def test_bad_fault_spec_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="fault spec"):
        build_emulator(None, faults="explode=1")


def test_unix_socket_listen(tmp_path: Path) -> None:
    sock = tmp_path / "ecs.sock"
    with build_emulator(None, f"unix://{sock}") as emu:
        assert emu.env == {ENDPOINT_ENV: f"unix://{sock}"}
        transport = httpx.HTTPTransport(uds=str(sock))
        with httpx.Client(base_url="http://localhost", transport=transport) as client:
            headers = {TOKEN_HEADER: _token(client)}
            assert client.get("/latest/meta-data/zone-id", headers=headers).text == ("cn-beijing-l")


def test_handler_is_an_ecs_handler(ecs_handler: EcsMetadataHandler) -> None:
    assert ecs_handler.issuer.required
    assert ecs_handler.issuer.issued == 0


def test_cli_emulate_prints_url_and_env() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "dranet_cloud.cli.main", "emulate", "aliyun"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert ready["env"] == {ENDPOINT_ENV: ready["url"]}
        with httpx.Client(base_url=ready["url"]) as client:
            headers = {TOKEN_HEADER: _token(client)}
            text = client.get("/latest/meta-data/instance/instance-type", headers=headers).text
            assert text == "ecs.ebmgn8is.32xlarge"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.returncode == 0
