"""PluginRegistry.call: one plugin's hook, through pluggy's own call path."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pluggy
import pytest

from dranet_cloud.contract.hookspecs import hookimpl
from dranet_cloud.host.plugin_manager import PluginRegistry


class Plain:
    """A plugin whose profile hook has an optional argument, like the webhook's."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    @hookimpl
    def release_profile_config(
        self, context: Any, instance: Any, device: Any, claim_uid: str, config: Any
    ) -> bool:
        self.seen.append((claim_uid, config))
        return claim_uid != "refuse"

    @hookimpl
    def profile_config(
        self,
        context: Any,
        instance: Any,
        device: Any,
        claim_uid: str,
        config: Any,
        claim: Any = "default",
    ) -> Any:
        return {"uid": claim_uid, "claim": claim}


class Wrapped(Plain):
    """A plugin that wraps its own hook: two implementations, both called."""

    @hookimpl(wrapper=True, specname="release_profile_config")
    def invert_release(self) -> Generator[None, bool, bool]:
        result = yield
        return not result


ARGS = {"context": None, "instance": None, "device": None, "config": None}
ARGS2 = {**ARGS, "claim": None}  # every argument, as the host passes them


def test_a_single_implementation_gets_what_pluggy_passes() -> None:
    reg = PluginRegistry(load_entry_points=False)
    plain = Plain()
    reg.register(plain, "plain")
    with pytest.warns(UserWarning, match="'claim'"):  # pluggy's: the host always passes it
        assert reg.call("plain", "profile_config", claim_uid="u", **ARGS) == {
            "uid": "u",
            "claim": "default",
        }
    assert reg.call("plain", "profile_config", claim_uid="u", claim="c", **ARGS)["claim"] == "c"
    assert (
        reg.call("plain", "release_profile_config", claim_uid="refuse", claim=None, **ARGS) is False
    )
    with (
        pytest.warns(UserWarning, match="claim_uid"),
        pytest.raises(pluggy.HookCallError, match="claim_uid"),  # pluggy's own error
    ):
        reg.call("plain", "profile_config", claim=None, **ARGS)


def test_a_wrapper_wraps_its_plugins_own_hook() -> None:
    reg = PluginRegistry(load_entry_points=False)
    wrapped = Wrapped()
    reg.register(wrapped, "wrapped")
    assert (
        reg.call("wrapped", "release_profile_config", claim_uid="ok", claim=None, **ARGS) is False
    )
    assert (
        reg.call("wrapped", "release_profile_config", claim_uid="refuse", claim=None, **ARGS)
        is True
    )
    assert [uid for uid, _ in wrapped.seen] == ["ok", "refuse"]


def test_plugins_registered_later_stay_out_of_other_routes() -> None:
    reg = PluginRegistry(load_entry_points=False)
    first = Plain()
    reg.register(first, "first")
    assert reg.call("first", "release_profile_config", claim_uid="a", **ARGS2) is True
    second = Plain()
    reg.register(second, "second")
    reg.call("first", "release_profile_config", claim_uid="b", **ARGS2)
    reg.call("second", "release_profile_config", claim_uid="c", **ARGS2)
    reg.unregister(name="first")
    assert reg.call("first", "release_profile_config", claim_uid="d", **ARGS2) is None
    reg.call("second", "release_profile_config", claim_uid="e", **ARGS2)
    assert [uid for uid, _ in first.seen] == ["a", "b"]
    assert [uid for uid, _ in second.seen] == ["c", "e"]


def test_errors_reach_the_observers_and_the_caller() -> None:
    class Broken:
        @hookimpl
        def release_profile_config(
            self, context: Any, instance: Any, device: Any, claim_uid: str, config: Any
        ) -> bool:
            raise KeyError(claim_uid)

    reg = PluginRegistry(load_entry_points=False)
    reg.register(Broken(), "broken")
    seen: list[tuple[str, str, str]] = []
    reg.error_observers.append(lambda p, h, e: seen.append((p, h, type(e).__name__)))
    with pytest.raises(KeyError):
        reg.call("broken", "release_profile_config", claim_uid="x", **ARGS2)
    assert seen == [("broken", "release_profile_config", "KeyError")]


def test_hook_call_monitoring_sees_every_call() -> None:
    """call() goes through pluggy's call path: a tracer added to the manager sees it."""
    reg = PluginRegistry(load_entry_points=False)
    reg.register(Plain(), "plain")
    reg.register(Wrapped(), "wrapped")
    traced: list[tuple[str, list[str]]] = []
    reg.add_hookcall_monitoring(
        lambda hook, impls, kwargs: traced.append((hook, [i.plugin_name for i in impls])),
        lambda outcome, hook, impls, kwargs: None,
    )
    reg.call("plain", "release_profile_config", claim_uid="a", **ARGS2)
    reg.call("wrapped", "release_profile_config", claim_uid="b", **ARGS2)
    assert traced == [
        ("release_profile_config", ["plain"]),
        ("release_profile_config", ["wrapped", "wrapped"]),
    ]


MODULE_PLUGIN = """
from dranet_cloud.contract.hookspecs import hookimpl
@hookimpl
def device_config(context, instance, device):
    return {"mtu": 9000, "device": device}
@hookimpl
def profile_config(context, instance, device, claim_uid, config, claim="unset"):
    return {"uid": claim_uid, "claim": claim}
@hookimpl
def release_profile_config(claim_uid):
    return claim_uid != "refuse"
@hookimpl(specname="local_evidence")
def evidence():
    return "renamed"
"""


def test_a_module_plugin_gets_what_pluggy_passes() -> None:
    """A module's functions may take fewer arguments than the hook, or defaults."""
    import types

    module = types.ModuleType("calls_module_plugin")
    exec(MODULE_PLUGIN, module.__dict__)  # the test plugin is inline
    reg = PluginRegistry(load_entry_points=False)
    reg.register(module, "mod", "mod", "1")
    calls = [
        ("device_config", {"context": None, "instance": None, "device": "eth0"}),
        ("profile_config", {**ARGS2, "claim_uid": "u"}),
        ("profile_config", {**ARGS, "claim_uid": "u", "claim": "c"}),
        ("release_profile_config", {**ARGS2, "claim_uid": "refuse"}),
        ("local_evidence", {"context": None}),
    ]
    assert [reg.call("mod", hook, **kwargs) for hook, kwargs in calls] == [
        {"mtu": 9000, "device": "eth0"},
        {"uid": "u", "claim": None},
        {"uid": "u", "claim": "c"},
        False,
        "renamed",
    ]
    assert reg.roles("mod") == ("profile",) and reg.implements("mod", "local_evidence")
    assert reg.info()[0].to_json() == {
        "name": "mod",
        "distribution": "mod",
        "version": "1",
        "roles": ["profile"],
    }
