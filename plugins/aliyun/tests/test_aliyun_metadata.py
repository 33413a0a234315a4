"""Loading the snapshot and detecting ECS through the token-protected service."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest
from dranet_cloud_aliyun import metadata_source, plugin
from dranet_cloud_aliyun.constants import ENDPOINT_ENV, TOKEN_HEADER
from dranet_cloud_aliyun.emulator import EcsMetadataHandler, build_emulator
from dranet_cloud_aliyun.metadata_source import endpoint_from, load_from, open_client
from dranet_cloud_aliyun.snapshot import AliyunInstance

from dranet_cloud.contract.context import ProviderContext, SampleHost
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import MemoryStore
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.testing import Emulator, LoggedRequest, Response
from dranet_cloud.toolkit.errors import ProviderUnavailable

PRIMARY = "00:16:3e:2c:8a:10"
RDMA0 = "00:16:3e:2c:8a:11"


def _gets(emu: Emulator) -> list[LoggedRequest]:
    return [r for r in emu.log if r.method == "GET"]


def _closed_port_url() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_endpoint_default_and_override() -> None:
    default = endpoint_from({})
    assert (default.url, default.is_default) == ("http://100.100.100.200", True)
    over = endpoint_from({ENDPOINT_ENV: "127.0.0.1:8080"})
    assert over.url == "http://127.0.0.1:8080"
    assert over.source == f"{ENDPOINT_ENV}=127.0.0.1:8080"
    assert endpoint_from({ENDPOINT_ENV: "unix:///run/ecs.sock"}).url == "unix:///run/ecs.sock"


def test_instance_properties_reads_the_whole_snapshot(
    erdma_context: ProviderContext, ecs_emulator: Emulator, ecs_handler: EcsMetadataHandler
) -> None:
    inst = plugin.instance_properties(context=erdma_context, deadline=5.0)
    assert isinstance(inst, AliyunInstance)
    assert inst.instance_id == "i-2zefwq8k3jx9d7m1n4ab"
    assert inst.instance_type == "ecs.ebmgn8is.32xlarge"
    assert (inst.region_id, inst.zone_id) == ("cn-beijing", "cn-beijing-l")
    assert inst.endpoint == ecs_emulator.url
    assert inst.known_macs() == {PRIMARY, RDMA0, "00:16:3e:2c:8a:12"}
    nic = inst.nics[RDMA0]
    assert nic.network_interface_id == "eni-2zeb6w2r8y0u4i1o7p3a"
    assert (nic.vpc_id, nic.vswitch_id) == ("vpc-2zeh7b5t9n3m1x8c4q0w", "vsw-2zec4v7b1n9m3q6w8e2r")
    assert (nic.primary_ip_address, nic.netmask, nic.gateway) == (
        "172.16.33.10",
        "255.255.240.0",
        "172.16.47.253",
    )
    assert (nic.vpc_cidr_block, nic.vswitch_cidr_block) == ("172.16.0.0/12", "172.16.32.0/20")
    assert nic.private_ipv4s == ["172.16.33.10"]
    assert nic.ipv6s == ["2408:4005:3cf:7e11:5a0c:91d2:3e47:b6a8"]
    assert nic.ipv6_gateway == "2408:4005:3cf:7e11:ffff:ffff:ffff:fffd"
    assert nic.vswitch_ipv6_cidr_block == "2408:4005:3cf:7e11::/64"
    # One token for the whole load, fetched before the first GET.
    assert ecs_handler.issuer.issued == 1
    assert ecs_emulator.log[0].method == "PUT"


def test_no_metadata_get_without_a_token(
    erdma_context: ProviderContext, ecs_emulator: Emulator, ecs_handler: EcsMetadataHandler
) -> None:
    assert plugin.confirm_environment(context=erdma_context, timeout=2.0)
    plugin.instance_properties(context=erdma_context, deadline=5.0)
    gets = _gets(ecs_emulator)
    assert len(gets) > 40  # instance keys, the NIC listing, 12 keys x 3 NICs, the probe
    assert all(TOKEN_HEADER in r.headers for r in gets)
    assert all(r.status == 200 for r in gets)
    assert ecs_handler.issuer.rejected == 0


def test_expired_token_is_refreshed_on_401(
    ecs_emulator: Emulator, ecs_handler: EcsMetadataHandler
) -> None:
    with open_client(ProviderContext(env=ecs_emulator.env), timeout=2.0) as client:
        first = load_from(client, deadline=5.0)
        # The metadata service restarts: every token it issued is gone.
        ecs_handler.issuer.expire_all()
        before = len(ecs_emulator.log)
        second = load_from(client, deadline=5.0)
    assert second == first
    assert ecs_handler.issuer.issued == 2  # one refresh, shared by the concurrent GETs
    stale = {r.headers[TOKEN_HEADER] for r in ecs_emulator.log[:before] if r.method == "GET"}
    assert len(stale) == 1
    after = [r for r in ecs_emulator.log[before:] if r.method == "GET"]
    rejected = [r for r in after if r.status == 401]
    assert rejected, "the stale token was never presented"
    assert all(r.headers[TOKEN_HEADER] in stale for r in rejected)
    fresh = [r for r in after if r.headers[TOKEN_HEADER] not in stale]
    assert fresh and all(r.status == 200 for r in fresh)
    assert {r.path for r in fresh} == {r.path for r in after}  # every key was re-read


def test_tokens_expiring_every_few_uses_are_refreshed(
    erdma_context: ProviderContext,
    ecs_emulator: Emulator,
    ecs_handler: EcsMetadataHandler,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One request at a time, so "every 7 uses" expires at predictable points.
    monkeypatch.setattr(metadata_source, "MAX_WORKERS", 1)
    ecs_emulator.faults.load("expire-tokens-every=7")
    inst = plugin.instance_properties(context=erdma_context, deadline=5.0)
    assert isinstance(inst, AliyunInstance)
    assert len(inst.nics) == 3
    gets = _gets(ecs_emulator)
    answered = [r for r in gets if r.status == 200]
    assert len(answered) == 5 + 36
    assert ecs_handler.issuer.issued == 1 + len(answered) // 7 - (len(answered) % 7 == 0)
    assert ecs_handler.issuer.rejected == ecs_handler.issuer.issued - 1


def test_tokens_never_reach_the_logs(
    erdma_context: ProviderContext, ecs_emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ecs_emulator.faults.load("expire-tokens-every=10")
    plugin.instance_properties(context=erdma_context, deadline=5.0)
    tokens = {r.headers[TOKEN_HEADER] for r in _gets(ecs_emulator) if TOKEN_HEADER in r.headers}
    assert tokens
    assert caplog.records
    for token in tokens:
        assert token not in caplog.text


def test_unix_socket_endpoint(tmp_path: Path, erdma_sample: SampleHost) -> None:
    sock = tmp_path / "ecs.sock"
    with build_emulator(None, f"unix://{sock}") as emu:
        context = ProviderContext(host_root=HostRoot(erdma_sample.root), env=emu.env)
        inst = plugin.instance_properties(context=context, deadline=5.0)
    assert isinstance(inst, AliyunInstance)
    assert inst.endpoint == f"unix://{sock}"
    assert len(inst.nics) == 3


def test_unreachable_endpoint_names_the_override(erdma_sample: SampleHost) -> None:
    context = ProviderContext(
        host_root=HostRoot(erdma_sample.root), env={ENDPOINT_ENV: _closed_port_url()}
    )
    with pytest.raises(ProviderUnavailable, match=ENDPOINT_ENV):
        plugin.instance_properties(context=context, deadline=0.3)
    with pytest.raises(ProviderUnavailable, match=ENDPOINT_ENV):
        plugin.confirm_environment(context=context, timeout=0.3)


def test_local_evidence_is_dmi(erdma_sample: SampleHost, tmp_path: Path) -> None:
    yes = ProviderContext(host_root=HostRoot(erdma_sample.root), env={})
    assert plugin.local_evidence(context=yes) == "DMI product_name=Alibaba Cloud ECS"
    other = tmp_path / "other"
    (other / "sys/class/dmi/id").mkdir(parents=True)
    (other / "sys/class/dmi/id/product_name").write_text("Google Compute Engine\n")
    assert plugin.local_evidence(context=ProviderContext(host_root=HostRoot(other))) is None
    assert plugin.local_evidence(context=ProviderContext(host_root=HostRoot(tmp_path))) is None


def test_confirm_names_the_endpoint_and_instance(
    erdma_context: ProviderContext, ecs_emulator: Emulator
) -> None:
    found = plugin.confirm_environment(context=erdma_context, timeout=2.0)
    assert found is not None
    assert ecs_emulator.url in found and "i-2zefwq8k3jx9d7m1n4ab" in found
    assert [r.method for r in ecs_emulator.log] == ["PUT", "GET"]


def test_confirm_rejects_a_server_that_is_not_ecs(erdma_sample: SampleHost) -> None:
    with Emulator(lambda request: Response.not_found(), name="not-ecs").start() as emu:
        context = ProviderContext(
            host_root=HostRoot(erdma_sample.root), env={ENDPOINT_ENV: emu.url}
        )
        assert plugin.confirm_environment(context=context, timeout=1.0) is None


def test_confirm_rejects_an_instance_id_ecs_would_never_use(
    tmp_path: Path, erdma_sample: SampleHost
) -> None:
    fixture = tmp_path / "odd.json"
    fixture.write_text('{"meta-data": {"instance-id": "<html>hello</html>"}}')
    with build_emulator(fixture) as emu:
        context = ProviderContext(host_root=HostRoot(erdma_sample.root), env=emu.env)
        assert plugin.confirm_environment(context=context, timeout=1.0) is None


def test_auto_detection_picks_aliyun(erdma_sample: SampleHost, ecs_emulator: Emulator) -> None:
    host = ProviderHost(host_root=str(erdma_sample.root), env=ecs_emulator.env, ipam=MemoryStore())
    result = host.start()
    try:
        assert (host.cloud, result.provider, result.explicit) == ("aliyun", "aliyun", False)
        assert host.profile == "aliyun"  # the cloud plugin serves the profile role too
    finally:
        host.close()
