"""build_host: the host a HostConfig describes, with no flags involved.

The CLI's flags reach the host only through a HostConfig (tests/test_cli.py
covers that translation), and the test kit writes one directly, so what the
host routes, which plugins it holds and which store it opens are decided
here alone.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dranet_cloud.contract.context import ProviderOptions
from dranet_cloud.host.assembly import HostConfig, IpamConfig, build_host
from dranet_cloud.ipam import MemoryStore, SqliteStore
from dranet_cloud.toolkit.errors import ConfigError

# No installed plugin, no environment: only what the config itself adds.
BARE = HostConfig(cloud_provider_hint="none", env={}, load_entry_points=False)


def test_ranges_route_their_profile_to_local_ipam_on_the_configured_store(tmp_path: Path) -> None:
    options = ProviderOptions(metadata_deadline=2.0)
    config = replace(
        BARE,
        profile_provider="none",
        host_root=str(tmp_path),
        options=options,
        ipam=IpamConfig(
            ranges=("10.9.0.0/24",), profile="bare-metal", db=str(tmp_path / "ipam.db")
        ),
    )
    host = build_host(config, start=False)
    try:
        assert host.registry.names() == ["local-ipam"]
        assert host.profile_routes == {"bare-metal": "local-ipam"}
        assert (host.cloud_provider_hint, host.profile_provider) == ("none", "none")
        assert host.context.options is options and host.context.env == {}
        assert host.context.host_root.root == tmp_path
        assert host.cloud is None  # not started
        store = host.context.ipam
        assert isinstance(store, SqliteStore) and Path(store.path) == tmp_path / "ipam.db"
    finally:
        host.close()


def test_without_ranges_or_ipam_the_host_routes_nothing_and_opens_no_file(tmp_path: Path) -> None:
    host = build_host(replace(BARE, host_root=str(tmp_path)))
    try:
        assert host.registry.names() == [] and host.profile_routes == {}
        assert host.context.ipam_factory is None
        assert host.cloud is None  # started: "none" asked for, nothing detected
        assert isinstance(host.context.ipam, MemoryStore)
    finally:
        host.close()
    assert list(tmp_path.iterdir()) == []


def test_a_memory_store_is_one_the_config_asks_for() -> None:
    host = build_host(replace(BARE, ipam=IpamConfig(memory=True)), start=False)
    assert host.context.ipam_factory is not None
    assert isinstance(host.context.ipam, MemoryStore)


def test_a_missing_store_directory_is_created_only_when_asked(tmp_path: Path) -> None:
    db = tmp_path / "missing" / "ipam.db"
    host = build_host(replace(BARE, ipam=IpamConfig(db=str(db))), start=False)
    with pytest.raises(ConfigError, match="--ipam-db-create to create it"):
        host.context.ipam  # noqa: B018  (opened on first use)
    host = build_host(replace(BARE, ipam=IpamConfig(db=str(db), create=True)), start=False)
    try:
        assert isinstance(host.context.ipam, SqliteStore) and db.parent.is_dir()
    finally:
        host.close()


def test_every_setting_is_checked_against_the_registry_it_builds() -> None:
    options = ProviderOptions(settings={"nosuch.key": "1"})
    with pytest.raises(ConfigError, match="no installed plugin is named 'nosuch'"):
        build_host(replace(BARE, options=options), start=False)
