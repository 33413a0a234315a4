"""The pytest fixtures every plugin's tests start from, made by one factory.

Each plugin's ``tests/conftest.py`` used to write the same three fixtures by
hand (a private copy of the default metadata document, a started emulator,
the sample host root) and, for most, a context pointing at them or a
host started on them; only the names differed.  :class:`PluginFixtures`
builds them from the plugin's own hooks (``emulator`` and ``sample_host``,
whose signatures the host fixes), so a conftest names its fixtures and
states only what is particular to its cloud::

    kit = PluginFixtures(plugin)
    gce_tree = kit.document("gce_tree", load_fixture(None))
    gce_emulator = kit.emulator("gce_emulator")
    gce_sample = kit.sample("gce_sample")
    gce_context = kit.context("gce_context", emulator="gce_emulator", metadata_deadline=5.0)

Each method returns a pytest fixture registered under the name it is given;
assign it to the module attribute of the same name (``tests/test_plugin_layout.py``
checks that every plugin's conftest does).  This module imports pytest, so
it is not imported by :mod:`dranet_cloud.testing` itself.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from dranet_cloud.contract.context import ProviderContext, ProviderOptions, SampleHost
from dranet_cloud.host.provider_host import ProviderHost
from dranet_cloud.ipam import MemoryStore
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.testing.emulator import Emulator


class PluginHooks(Protocol):
    """The two hooks of a plugin module the factory needs (see the contract's hookspecs)."""

    def emulator(self, fixture: Path | None, listen: str, faults: str | None) -> Emulator | None:
        """Build (not start) the plugin's metadata emulator."""

    def sample_host(self, dest: Path, variant: str | None) -> SampleHost | None:
        """Write the plugin's sample node root under ``dest``."""


class PluginFixtures:
    """Fixture factory bound to one plugin module (the one holding its ``@hookimpl``\\ s)."""

    def __init__(self, plugin: PluginHooks) -> None:
        self.plugin = plugin

    def document(self, name: str, default: Any) -> Any:
        """A private deep copy of ``default`` (the emulator's built-in fixture) per test.

        Tests may edit it freely; ``default`` is parsed once, when the
        conftest is imported.
        """

        def make() -> Any:
            return copy.deepcopy(default)

        return pytest.fixture(make, name=name)

    def emulator(self, name: str, *, faults: str | None = None) -> Any:
        """The plugin's emulator with its built-in fixture, started on 127.0.0.1, stopped after."""
        plugin = self.plugin

        def make() -> Iterator[Emulator]:
            emu = plugin.emulator(None, "127.0.0.1:0", faults)
            assert emu is not None, f"{plugin!r} built no emulator"
            emu.start()
            try:
                yield emu
            finally:
                emu.stop()

        return pytest.fixture(make, name=name)

    def sample(self, name: str, variant: str | None = None, *, directory: str = "host") -> Any:
        """The plugin's sample node root ``variant``, written under the test's ``tmp_path``."""
        plugin = self.plugin

        def make(tmp_path: Path) -> SampleHost:
            sample = plugin.sample_host(tmp_path / directory, variant)
            assert sample is not None, f"{plugin!r} has no sample host {variant!r}"
            return sample

        return pytest.fixture(make, name=name)

    def host(self, name: str, hint: str, *, emulator: str, sample: str, **options: Any) -> Any:
        """A started :class:`ProviderHost` for cloud ``hint`` (closed after the test).

        It serves the node root of the ``sample`` fixture against the
        ``emulator`` fixture, with an in-memory IPAM; ``options`` are
        :class:`ProviderOptions` fields.
        """

        def make(request: pytest.FixtureRequest) -> Iterator[ProviderHost]:
            host = ProviderHost(
                cloud_provider_hint=hint,
                host_root=str(request.getfixturevalue(sample).root),
                env=request.getfixturevalue(emulator).env,
                options=ProviderOptions(**options) if options else None,
                ipam=MemoryStore(),
            )
            try:
                host.start()
                yield host
            finally:
                host.close()

        return pytest.fixture(make, name=name)

    def context(
        self,
        name: str,
        *,
        emulator: str | None = None,
        sample: str | None = None,
        **options: Any,
    ) -> Any:
        """A :class:`ProviderContext` with a fresh in-memory IPAM.

        ``emulator`` and ``sample`` name fixtures (made by this factory) whose
        environment and node root the context uses; without ``emulator`` the
        environment is empty, without ``sample`` the host root is the
        default.  ``options`` are :class:`ProviderOptions` fields.
        """

        def make(request: pytest.FixtureRequest) -> ProviderContext:
            env: dict[str, str] = {}
            if emulator is not None:
                env = request.getfixturevalue(emulator).env
            root = None
            if sample is not None:
                root = HostRoot(request.getfixturevalue(sample).root)
            return ProviderContext(
                host_root=root,
                env=env,
                options=ProviderOptions(**options),
                ipam_factory=MemoryStore,
            )

        return pytest.fixture(make, name=name)


__all__ = ["PluginFixtures", "PluginHooks"]
