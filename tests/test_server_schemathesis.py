"""Property-based fuzzing of the BYODP server against its own ``/openapi.json``.

schemathesis generates valid and invalid requests for every operation
(including the documented examples with profile ``local-ipam``) and checks
that none is answered with a 5xx: malformed input is the client's fault (400),
denials are 404/409, and only a real temporary failure may be a 500.

The schema is loaded when the module is imported (``@schema.parametrize``
needs it then; schemathesis's lazy fixture loader does not work with this
pytest), so the host behind it uses only in-process plugins and a temporary
SQLite file removed at the end of the module.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from dranet_cloud.contract.context import InstanceSnapshot, ProviderContext
from dranet_cloud.contract.hookspecs import hookimpl
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import SqliteStore
from dranet_cloud.providers.local_ipam import PLUGIN_NAME, LocalIpamConfig, LocalIpamPlugin
from dranet_cloud.server.app import create_app
from dranet_cloud.wire.models import (
    DeviceAttribute,
    DeviceIdentifiers,
    InterfaceConfig,
    NetworkConfig,
)

from .fakeplugins import FakeProfile

MAC1 = "42:01:c0:a8:01:02"


class StaticCloud:
    """A cloud role without a metadata server: one known NIC."""

    @hookimpl
    def instance_properties(self, context: ProviderContext, deadline: float) -> InstanceSnapshot:
        return InstanceSnapshot(provider="staticcloud")

    @hookimpl
    def device_attributes(
        self, context: ProviderContext, instance: InstanceSnapshot | None, device: DeviceIdentifiers
    ) -> dict[str, DeviceAttribute] | None:
        if device.mac != MAC1:
            return None
        return {
            "static.dra.net/mtu": DeviceAttribute.of(8244),
            "static.dra.net/name": DeviceAttribute.of(device.name[:64]),
        }

    @hookimpl
    def device_config(
        self, context: ProviderContext, instance: InstanceSnapshot, device: DeviceIdentifiers
    ) -> NetworkConfig | None:
        if device.mac != MAC1:
            return None
        return NetworkConfig(interface=InterfaceConfig(mtu=8244))


def _schema() -> tuple[Any, ProviderHost, Path]:
    tmp = Path(tempfile.mkdtemp(prefix="byodp-schemathesis-"))
    reg = PluginRegistry(load_entry_points=False)
    reg.register(StaticCloud(), "staticcloud")
    reg.register(FakeProfile(), "fakeprofile")
    reg.register(LocalIpamPlugin(LocalIpamConfig.parse(["10.0.0.0/24", "fd00::/64"])), PLUGIN_NAME)
    host = ProviderHost(
        cloud_provider_hint="staticcloud",
        profile_provider="fakeprofile",
        host_root=str(tmp),
        registry=reg,
        env={},
        ipam_factory=lambda: SqliteStore(tmp / "ipam.db", synchronous="OFF"),
        profile_routes={"local-ipam": PLUGIN_NAME},
    )
    host.start()
    app = create_app(host, max_body_bytes=64 * 1024, access_log=False)
    return schemathesis.openapi.from_asgi("/openapi.json", app), host, tmp


schema, _HOST, _TMP = _schema()


@pytest.fixture(scope="module", autouse=True)
def _close_host() -> Iterator[None]:
    yield
    _HOST.close()
    shutil.rmtree(_TMP, ignore_errors=True)


def test_every_role_is_served() -> None:
    assert _HOST.capabilities().to_wire() == {"cloudProvider": True, "profileProvider": True}


@schema.parametrize()  # type: ignore[untyped-decorator]
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_no_input_gets_a_server_error(case: Any) -> None:
    case.call_and_validate(checks=[not_a_server_error])
