"""Fixtures shared by the Aliyun plugin's tests: the ECS emulator, the two
sample host roots, and contexts pointing at them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dranet_cloud_aliyun.emulator import EcsMetadataHandler, build_emulator
from dranet_cloud_aliyun.sample_hosts import sample_host

from dranet_cloud.context import ProviderContext, ProviderOptions, SampleHost
from dranet_cloud.host import ProviderHost
from dranet_cloud.hostroot import HostRoot
from dranet_cloud.ipam import MemoryStore
from dranet_cloud.testing import Emulator, SocketGuard


@pytest.fixture(autouse=True)
def _loopback_only() -> Iterator[None]:
    """Fail any test of this plugin that tries to leave loopback."""
    guard = SocketGuard().install()
    try:
        yield
    finally:
        guard.uninstall()
    assert guard.violations == [], guard.violations


@pytest.fixture
def ecs_emulator() -> Iterator[Emulator]:
    emu = build_emulator(None, "127.0.0.1:0", None).start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def ecs_handler(ecs_emulator: Emulator) -> EcsMetadataHandler:
    """The running emulator's handler (its ``issuer`` holds the token state)."""
    handler = ecs_emulator.handler
    assert isinstance(handler, EcsMetadataHandler)
    return handler


@pytest.fixture
def erdma_sample(tmp_path: Path) -> SampleHost:
    sample = sample_host(tmp_path / "erdma-host", "erdma")
    assert sample is not None
    return sample


@pytest.fixture
def bond_sample(tmp_path: Path) -> SampleHost:
    sample = sample_host(tmp_path / "bond-host", "bond")
    assert sample is not None
    return sample


def _context(root: Path, env: dict[str, str]) -> ProviderContext:
    return ProviderContext(
        host_root=HostRoot(root),
        env=env,
        options=ProviderOptions(metadata_deadline=5.0, request_timeout=2.0),
        ipam_factory=MemoryStore,
    )


@pytest.fixture
def erdma_context(ecs_emulator: Emulator, erdma_sample: SampleHost) -> ProviderContext:
    """The eRDMA sample host, pointed at the running emulator, with a fresh IPAM."""
    return _context(erdma_sample.root, ecs_emulator.env)


@pytest.fixture
def bond_context(bond_sample: SampleHost) -> ProviderContext:
    """The LACP-bond sample host; no endpoint (profile and config need none)."""
    return _context(bond_sample.root, {})


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
def erdma_host(ecs_emulator: Emulator, erdma_sample: SampleHost) -> Iterator[ProviderHost]:
    """The eRDMA sample host served by the aliyun plugin against the emulator."""
    host = _started_host(erdma_sample.root, ecs_emulator.env)
    try:
        yield host
    finally:
        host.close()
