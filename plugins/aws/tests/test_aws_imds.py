"""The plugin against its IMDS emulator: tokens, concurrency, faults, IMDSv1, sockets."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from dranet_cloud_aws import metadata_source
from dranet_cloud_aws.detection import confirm
from dranet_cloud_aws.emulator import build_emulator, imds_tree
from dranet_cloud_aws.metadata_source import ImdsSession, load_instance
from dranet_cloud_aws.snapshot import ENI_KEYS, PLACEMENT_KEYS

from dranet_cloud.contract.context import ProviderContext, ProviderOptions
from dranet_cloud.testing import Emulator
from dranet_cloud.toolkit.errors import ProviderUnavailable

TOKEN_HEADER = "X-aws-ec2-metadata-token"
TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"


def _ctx(emu: Emulator, **settings: str) -> ProviderContext:
    return ProviderContext(env=emu.env, options=ProviderOptions(settings=dict(settings)))


def _gets_without_token(emu: Emulator) -> list[str]:
    return [r.path for r in emu.log if r.method == "GET" and TOKEN_HEADER not in r.headers]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- the snapshot -----------------------------------------------------------------


def test_snapshot_matches_the_fixture(
    aws_emulator: Emulator, aws_tree: dict[str, Any], aws_macs: dict[str, dict[str, Any]]
) -> None:
    inst = load_instance(_ctx(aws_emulator), 5.0)
    doc = aws_tree["dynamic"]["instance-identity"]["document"]
    assert inst.identity.instance_id == doc["instanceId"]
    assert inst.identity.instance_type == "p5.48xlarge"
    assert inst.identity.region == doc["region"]
    assert inst.availability_zone_id == "use2-az2"
    assert inst.placement_group == "p5-training-cluster"
    assert inst.partition_number is None  # a cluster placement group has no partitions
    assert inst.endpoint == aws_emulator.url and inst.imds_version == 2
    macs = aws_macs
    assert inst.known_macs() == frozenset(macs)
    for mac, keys in macs.items():
        eni = inst.enis[mac]
        assert eni.interface_id == keys["interface-id"]
        assert eni.network_card == keys["network-card"]
        assert eni.device_number == keys["device-number"]
        assert eni.local_ipv4s == keys["local-ipv4s"]
        assert eni.subnet_ipv4_cidr_block == keys["subnet-ipv4-cidr-block"]
        assert eni.ipv4_prefixes == keys.get("ipv4-prefix", [])
        assert eni.ipv6_prefixes == keys.get("ipv6-prefix", [])
        assert eni.vpc_id == keys["vpc-id"]
    # ENIs come ordered by network card, then device number.
    order = [(e.network_card, e.device_number) for e in inst.enis.values()]
    assert order == sorted(order)


def test_one_token_for_the_whole_load_and_no_get_without_it(aws_emulator: Emulator) -> None:
    inst = load_instance(_ctx(aws_emulator), 5.0)
    puts = [r for r in aws_emulator.log if r.method == "PUT"]
    gets = [r for r in aws_emulator.log if r.method == "GET"]
    assert len(puts) == 1 and puts[0].path == "/latest/api/token"
    assert puts[0].headers[TTL_HEADER] == "21600"
    assert _gets_without_token(aws_emulator) == []
    # document + MAC listing + placement keys + every key of every ENI, nothing more.
    assert len(gets) == 2 + len(PLACEMENT_KEYS) + len(ENI_KEYS) * len(inst.enis)
    assert all(r.status in (200, 404) for r in gets)
    # Tokens never reach the log of the plugin's own records (they are secrets).
    assert all(TOKEN_HEADER not in repr(e.model_dump()) for e in inst.enis.values())


@pytest.mark.parametrize("every", [1, 2])
def test_tokens_expiring_every_few_requests_still_load(every: int) -> None:
    with build_emulator(None, "127.0.0.1:0", f"expire-tokens-every={every}") as emu:
        inst = load_instance(_ctx(emu), 10.0)
        rejected = [r for r in emu.log if r.status == 401]
        assert rejected, "the fault was not exercised"
        assert len(inst.enis) == 4 and all(e.interface_id for e in inst.enis.values())
        assert _gets_without_token(emu) == []


def test_expired_token_gets_401_and_the_session_refreshes_it(aws_emulator: Emulator) -> None:
    clock = FakeClock()
    imds_tree(aws_emulator).tokens.clock = clock
    with ImdsSession(_ctx(aws_emulator), deadline=5.0) as session:
        assert session.get("/latest/meta-data/instance-type") == "p5.48xlarge"
        assert session.get("/latest/meta-data/instance-id") == "i-0f2e4d6c8b0a13579"
        assert len(aws_emulator.requests("/latest/api/token")) == 1  # reused
        clock.now += 21601  # the server's TTL runs out
        assert session.get("/latest/meta-data/placement/region") == "us-east-2"
    statuses = [(r.method, r.status) for r in aws_emulator.log]
    assert statuses[-3:] == [("GET", 401), ("PUT", 200), ("GET", 200)]


# --- emulator token rules (IMDS behaviour the plugin relies on) ----------------------


@pytest.mark.parametrize("ttl", ["0", "21601", "-5", "soon"])
def test_emulator_rejects_bad_ttls(aws_emulator: Emulator, ttl: str) -> None:
    resp = httpx.put(aws_emulator.url + "/latest/api/token", headers={TTL_HEADER: ttl})
    assert resp.status_code == 400


def test_emulator_token_rules(aws_emulator: Emulator) -> None:
    clock = FakeClock()
    imds_tree(aws_emulator).tokens.clock = clock
    url = aws_emulator.url
    assert httpx.put(url + "/latest/api/token").status_code == 400  # TTL header required
    assert httpx.get(url + "/latest/api/token").status_code == 405
    forwarded = httpx.put(
        url + "/latest/api/token", headers={TTL_HEADER: "60", "X-Forwarded-For": "1.2.3.4"}
    )
    assert forwarded.status_code == 403
    resp = httpx.put(url + "/latest/api/token", headers={TTL_HEADER: "60"})
    assert resp.status_code == 200 and resp.headers[TTL_HEADER] == "60"
    token = resp.text
    assert httpx.get(url + "/latest/meta-data/").status_code == 401
    ok = httpx.get(url + "/latest/meta-data/instance-type", headers={TOKEN_HEADER: token})
    assert ok.text == "p5.48xlarge" and ok.headers["Server"] == "EC2ws"
    clock.now += 61
    late = httpx.get(url + "/latest/meta-data/instance-type", headers={TOKEN_HEADER: token})
    assert late.status_code == 401


def test_emulator_listings_look_like_imds(aws_emulator: Emulator) -> None:
    url = aws_emulator.url
    token = httpx.put(url + "/latest/api/token", headers={TTL_HEADER: "60"}).text
    h = {TOKEN_HEADER: token}
    top = httpx.get(url + "/latest/meta-data/", headers=h).text.splitlines()
    assert "instance-type" in top and "network/" in top and "placement/" in top
    macs = httpx.get(url + "/latest/meta-data/network/interfaces/macs/", headers=h).text
    assert macs.splitlines()[0] == "0e:5c:1a:2b:3c:01/" and not macs.endswith("\n")
    prefixes = httpx.get(
        url + "/latest/meta-data/network/interfaces/macs/0e:5c:1a:2b:3c:02/ipv4-prefix",
        headers=h,
    ).text
    assert prefixes == "10.0.32.48/28\n10.0.32.96/28"
    # A leaf with a trailing slash still answers (botocore asks that way).
    az = httpx.get(url + "/latest/meta-data/placement/availability-zone/", headers=h)
    assert az.text == "us-east-2b"
    ident = httpx.get(url + "/latest/dynamic/instance-identity/", headers=h).text
    assert ident == "document"
    missing = httpx.get(url + "/latest/meta-data/no-such-key", headers=h)
    assert missing.status_code == 404 and "404 - Not Found" in missing.text


# --- IMDSv1 only when allowed ------------------------------------------------------------


def _v1_only_emulator(puts: int = 1) -> Emulator:
    """An EC2-compatible server without IMDSv2: 405 to the next ``puts`` token PUTs."""
    statuses = ",".join(["405"] * puts)
    return build_emulator(
        None, "127.0.0.1:0", f"status={statuses};path=/latest/api/token", tokens_required=False
    )


def test_token_refusal_without_permission_names_the_setting() -> None:
    with _v1_only_emulator(puts=2) as emu:
        with pytest.raises(ProviderUnavailable, match=r"aws\.allow_imdsv1=true"):
            load_instance(_ctx(emu), 5.0)
        assert [r for r in emu.log if r.method == "GET"] == []
        assert confirm(_ctx(emu), 1.0) is None


def test_imdsv1_fallback_when_allowed() -> None:
    with _v1_only_emulator() as emu:
        inst = load_instance(_ctx(emu, **{"aws.allow_imdsv1": "true"}), 5.0)
        assert inst.imds_version == 1 and len(inst.enis) == 4
        assert [r.method for r in emu.log].count("PUT") == 1


# --- confirmation -------------------------------------------------------------------


def test_confirm_names_instance_and_endpoint(aws_emulator: Emulator) -> None:
    text = confirm(_ctx(aws_emulator), 1.0)
    assert text is not None
    assert "i-0f2e4d6c8b0a13579" in text and "DRANET_CLOUD_AWS_METADATA_ENDPOINT" in text
    assert [r.method for r in aws_emulator.log] == ["PUT", "GET"]


def test_confirm_rejects_a_server_that_is_not_imds(aws_tree: dict[str, Any]) -> None:
    def not_imds(request: Any) -> Any:
        from dranet_cloud.testing import Response

        return Response(404, "nope")

    with Emulator(not_imds, name="other") as emu:
        ctx = ProviderContext(env={"DRANET_CLOUD_AWS_METADATA_ENDPOINT": emu.url})
        assert confirm(ctx, 1.0) is None


def test_nothing_listening_is_unavailable_and_names_the_override() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = ProviderContext(env={"AWS_EC2_METADATA_SERVICE_ENDPOINT": f"http://127.0.0.1:{port}"})
    with pytest.raises(ProviderUnavailable, match="AWS_EC2_METADATA_SERVICE_ENDPOINT"):
        confirm(ctx, 0.3)
    with pytest.raises(ProviderUnavailable, match="AWS_EC2_METADATA_SERVICE_ENDPOINT"):
        load_instance(ctx, 0.3)


# --- endpoints ----------------------------------------------------------------------


def test_unix_socket_endpoint(tmp_path: Path) -> None:
    with build_emulator(None, f"unix://{tmp_path}/imds.sock", None) as emu:
        assert set(emu.env) == {metadata_source.ENDPOINT_ENV}
        inst = load_instance(_ctx(emu), 5.0)
        assert len(inst.enis) == 4


def test_ipv6_loopback_endpoint() -> None:
    try:
        emu = build_emulator(None, "[::1]:0", None).start()
    except OSError:
        pytest.skip("no IPv6 loopback in this network namespace")
    try:
        assert emu.url.startswith("http://[::1]:")
        inst = load_instance(_ctx(emu), 5.0)
        assert inst.identity.instance_type == "p5.48xlarge"
    finally:
        emu.stop()
