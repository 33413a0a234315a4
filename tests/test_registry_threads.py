"""The plugin registry while detection's threads create its pluggy manager.

Until the manager exists, roles are read off the plugin modules' markers; a
thread that reached the manager while another was still handing it the
loaded plugins used to see a manager without them: a detected cloud then had
no ``instance_properties`` and no profile role (a GCE sidecar answered
``profileProvider: false`` now and then).  The check is deterministic: a
second thread asks for the plugins' roles while the first is inside the
manager's registration of one of them.
"""

from __future__ import annotations

import threading
import types
from typing import Any

import pluggy
import pytest

from dranet_cloud.hookspecs import hookimpl
from dranet_cloud.plugins import PluginRegistry


@hookimpl
def instance_properties(context: Any, deadline: float) -> Any:
    return None


@hookimpl
def profile_config(context: Any, instance: Any, device: Any, claim_uid: str, config: Any) -> Any:
    return None


@hookimpl
def release_profile_config(context: Any, instance: Any, device: Any, claim_uid: str) -> Any:
    return None


def plugin_module(name: str, *funcs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    for func in funcs:
        setattr(module, func.__name__, func)
    return module


def test_roles_are_whole_while_another_thread_fills_the_manager(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reg = PluginRegistry(load_entry_points=False)
    # Loaded the way entry points are: pending until the manager is first needed.
    reg._add(plugin_module("acloud", instance_properties), "acloud", "acloud", "1")
    reg._add(
        plugin_module("both", instance_properties, profile_config, release_profile_config),
        "both",
        "both",
        "1",
    )
    seen: list[tuple[str, ...]] = []
    register = pluggy.PluginManager.register

    def ask() -> None:
        seen.append(reg.roles("both"))
        seen.append(reg.roles("acloud"))

    def slow_register(self: pluggy.PluginManager, plugin: Any, name: str | None = None) -> Any:
        if name == "acloud" and not seen:  # detection's other thread asks meanwhile
            other = threading.Thread(target=ask)
            other.start()
            other.join(10)
            assert not other.is_alive(), "the roles waited for the manager's lock"
        return register(self, plugin, name=name)

    monkeypatch.setattr(pluggy.PluginManager, "register", slow_register)
    assert reg.roles("both") == ("cloud", "profile")  # from the markers, no manager yet
    reg.pm  # noqa: B018 - creates the manager
    assert seen == [("cloud", "profile"), ("cloud",)]
    assert reg.roles("both") == ("cloud", "profile") and reg.roles("acloud") == ("cloud",)
    assert reg.implements("both", "release_profile_config")
