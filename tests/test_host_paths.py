"""dranet_cloud.host.host_paths: the plugins' declared node directories, checked, warned about."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from dranet_cloud.cli.emulate_cmd import build_emulator
from dranet_cloud.host.host_paths import (
    CORE,
    HostPathError,
    covered_by,
    missing_under,
    normalize_host_path,
    required_host_paths,
)
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import MemoryStore
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.testing.emulator import Emulator


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("sys", "not an absolute node path"),
        ("/", "never the whole node"),
        ("/sys/../proc", "write '/proc'"),
        ("/var//lib/hyperv", "write '/var/lib/hyperv'"),
        (42, "not an absolute node path"),
    ],
)
def test_a_path_a_mount_could_never_match_is_refused_naming_the_plugin(
    path: object, says: str
) -> None:
    with pytest.raises(HostPathError) as info:
        normalize_host_path("acme", path)
    assert "plugin acme" in str(info.value) and says in str(info.value)


def test_a_trailing_slash_is_the_same_directory() -> None:
    assert normalize_host_path("acme", "/var/lib/hyperv/") == "/var/lib/hyperv"


def test_a_mount_covers_its_own_directory_and_below_never_a_sibling() -> None:
    assert covered_by("/proc/net", ["/sys", "/proc/net"]) == "/proc/net"
    assert covered_by("/var/lib/hyperv", ["/var/lib"]) == "/var/lib"
    assert covered_by("/system", ["/sys"]) is None
    assert covered_by("/proc", ["/proc/net"]) is None


def test_the_core_and_each_plugin_are_listed() -> None:
    reg = PluginRegistry()
    paths = required_host_paths(reg, ["azure", "gce", "webhook"])
    assert paths == {
        CORE: ("/sys",),
        "azure": ("/proc/net", "/sys", "/var/lib/hyperv"),
        "gce": ("/sys",),
        "webhook": (),
    }


@pytest.fixture
def azure(tmp_path: Path) -> Iterator[tuple[Path, Emulator]]:
    reg = PluginRegistry()
    sample = reg.call("azure", "sample_host", dest=tmp_path / "host", variant=None)
    emu = build_emulator("azure", None, "127.0.0.1:0", None)
    emu.start()
    try:
        yield sample.root, emu
    finally:
        emu.stop()


def start(root: Path, emu: Emulator) -> None:
    host = ProviderHost(
        cloud_provider_hint="azure", host_root=str(root), env=emu.env, ipam=MemoryStore()
    )
    try:
        host.start()
    finally:
        host.close()


def test_serve_warns_at_start_for_a_declared_directory_the_pod_does_not_mount(
    azure: tuple[Path, Emulator], caplog: pytest.LogCaptureFixture
) -> None:
    """The issue's node: the sidecar started, and every ib* claim 500ed without a word."""
    root, emu = azure
    with caplog.at_level(logging.WARNING, logger="dranet_cloud.host.host_paths"):
        start(root, emu)
    assert not [r for r in caplog.records if r.name == "dranet_cloud.host.host_paths"]
    shutil.rmtree(root / "var" / "lib" / "hyperv")
    assert missing_under(HostRoot(root), PluginRegistry(), ["azure"]) == [
        ("azure", "/var/lib/hyperv")
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dranet_cloud.host.host_paths"):
        start(root, emu)
    (record,) = [r for r in caplog.records if r.name == "dranet_cloud.host.host_paths"]
    text = record.getMessage()
    assert record.levelno == logging.WARNING
    assert "plugin azure reads /var/lib/hyperv" in text
    assert f"mount the node's /var/lib/hyperv read-only at {root}/var/lib/hyperv" in text
    assert "deploy/overlays" in text
