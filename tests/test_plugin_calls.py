"""PluginRegistry.call: one plugin's hook, with pluggy's semantics, cheaply."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pluggy
import pytest

from dranet_cloud.hookspecs import hookimpl
from dranet_cloud.plugins import PluginRegistry


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
    """A plugin that wraps its own hook: two implementations, so pluggy calls them."""

    @hookimpl(wrapper=True, specname="release_profile_config")
    def invert_release(self) -> Generator[None, bool, bool]:
        result = yield
        return not result


ARGS = {"context": None, "instance": None, "device": None, "config": None}


def test_a_single_implementation_gets_what_pluggy_would_pass() -> None:
    reg = PluginRegistry(load_entry_points=False)
    plain = Plain()
    reg.register(plain, "plain")
    assert reg.call("plain", "profile_config", claim_uid="u", **ARGS) == {
        "uid": "u",
        "claim": "default",
    }
    assert reg.call("plain", "profile_config", claim_uid="u", claim="c", **ARGS)["claim"] == "c"
    assert reg.call("plain", "release_profile_config", claim_uid="refuse", **ARGS) is False
    with (
        pytest.warns(UserWarning, match="claim_uid"),
        pytest.raises(pluggy.HookCallError, match="claim_uid"),  # pluggy's own error
    ):
        reg.call("plain", "profile_config", **ARGS)


def test_wrappers_are_left_to_pluggy() -> None:
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
    assert reg.call("first", "release_profile_config", claim_uid="a", **ARGS) is True
    second = Plain()
    reg.register(second, "second")
    reg.call("first", "release_profile_config", claim_uid="b", **ARGS)
    reg.call("second", "release_profile_config", claim_uid="c", **ARGS)
    assert [uid for uid, _ in first.seen] == ["a", "b"]
    assert [uid for uid, _ in second.seen] == ["c"]


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
        reg.call("broken", "release_profile_config", claim_uid="x", **ARGS)
    assert seen == [("broken", "release_profile_config", "KeyError")]


MODULE_PLUGIN = """
from dranet_cloud.hookspecs import hookimpl
@hookimpl
def device_config(context, instance, device):
    return {"mtu": 9000, "device": device}
@hookimpl
def profile_config(context, instance, device, claim_uid, config, claim="unset"):
    return {"uid": claim_uid, "claim": claim}
@hookimpl
def release_profile_config(claim_uid):
    return claim_uid != "refuse"
"""


def test_a_module_plugin_is_called_directly_as_pluggy_would_call_it() -> None:
    """One way to call: the registry's own route, and pluggy only for what needs it."""
    import types

    module = types.ModuleType("calls_module_plugin")
    exec(MODULE_PLUGIN, module.__dict__)  # the test plugin is inline
    reg = PluginRegistry(load_entry_points=False)
    reg._add(module, "mod", "mod", "1")  # as entry points are loaded
    calls = [
        ("device_config", {"context": None, "instance": None, "device": "eth0"}),
        ("profile_config", {**ARGS, "claim_uid": "u"}),
        ("profile_config", {**ARGS, "claim_uid": "u", "claim": "c"}),
        ("release_profile_config", {**ARGS, "claim_uid": "refuse", "claim": None}),
    ]
    direct = [reg.call("mod", hook, **kwargs) for hook, kwargs in calls]
    assert reg._pm is None, "a module's single implementations need no pluggy manager"
    assert direct == [
        {"mtu": 9000, "device": "eth0"},
        {"uid": "u", "claim": "unset"},
        {"uid": "u", "claim": "c"},
        False,
    ]
    # pluggy's own subset caller answers the same (and warns of the call that
    # leaves out `claim`, as the host never does).
    with pytest.warns(UserWarning, match="'claim'"):
        assert [reg._caller("mod", hook)(**kwargs) for hook, kwargs in calls] == direct
