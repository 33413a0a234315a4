"""Fixtures shared by the Aliyun plugin's tests: the ECS emulator, the two
sample host roots, and contexts pointing at them (the common ones from
:class:`dranet_cloud.testing.plugin_fixtures.PluginFixtures`).

Non-loopback traffic is refused by the repository's session-wide socket guard
(the root ``conftest.py``), which fails the test that tried it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from dranet_cloud_aliyun import plugin
from dranet_cloud_aliyun.emulator import EcsMetadataHandler

from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import MemoryStore
from dranet_cloud.testing import Emulator
from dranet_cloud.testing.plugin_fixtures import PluginFixtures

kit = PluginFixtures(plugin)
ecs_emulator = kit.emulator("ecs_emulator")
erdma_sample = kit.sample("erdma_sample", "erdma", directory="erdma-host")
bond_sample = kit.sample("bond_sample", "bond", directory="bond-host")
# The eRDMA sample host, pointed at the running emulator, with a fresh IPAM.
erdma_context = kit.context(
    "erdma_context",
    emulator="ecs_emulator",
    sample="erdma_sample",
    metadata_deadline=5.0,
    request_timeout=2.0,
)
# The LACP-bond sample host; no endpoint (profile and config need none).
bond_context = kit.context(
    "bond_context", sample="bond_sample", metadata_deadline=5.0, request_timeout=2.0
)
# The eRDMA sample host served by the aliyun plugin against the emulator.
erdma_host = kit.host("erdma_host", "aliyun", emulator="ecs_emulator", sample="erdma_sample")


@pytest.fixture
def ecs_handler(ecs_emulator: Emulator) -> EcsMetadataHandler:
    """The running emulator's handler (its ``issuer`` holds the token state)."""
    handler = ecs_emulator.handler
    assert isinstance(handler, EcsMetadataHandler)
    return handler


def _started_host(root: Path, env: dict[str, str]) -> ProviderHost:
    host = ProviderHost(
        cloud_provider_hint="aliyun", host_root=str(root), env=env, ipam=MemoryStore()
    )
    host.start()
    return host


@pytest.fixture
def started_host() -> Callable[[Path, dict[str, str]], ProviderHost]:
    """Start a host with the aliyun cloud plugin on a root, with an in-memory IPAM."""
    return _started_host


@pytest.fixture
def ecs_environ(ecs_emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's environment points at the emulator: the CLI's main() reads it there."""
    for name, value in ecs_emulator.env.items():
        monkeypatch.setenv(name, value)
