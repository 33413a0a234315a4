"""dranet_cloud._hookmarks answers as pluggy does, and a misspelt hook stops a plugin.

``_hookmarks`` imitates pluggy so that detection never imports it; every test
here puts the imitation beside the installed pluggy on the same input, so a
pluggy release that changes its rules fails here rather than in production.
"""

from __future__ import annotations

import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pluggy
import pytest

from dranet_cloud import _hookmarks, hookspecs
from dranet_cloud._hookmarks import IMPL_ATTR, PROJECT, SPEC_ATTR, hookimpl
from dranet_cloud.cli.main import main
from dranet_cloud.errors import PluginError, UnknownHookError
from dranet_cloud.plugins import HOOK_NAMES, PluginRegistry, check_hook_names
from dranet_cloud.testing import HostRootBuilder

# --- the markers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "opts",
    [
        {},
        {"tryfirst": True},
        {"trylast": True, "optionalhook": True},
        {"hookwrapper": True},
        {"wrapper": True},
        {"specname": "local_evidence"},
    ],
)
def test_hookimpl_marks_functions_as_pluggy_does(opts: dict[str, object]) -> None:
    def ours() -> None: ...

    def theirs() -> None: ...

    (hookimpl(**opts)(ours) if opts else hookimpl(ours))  # type: ignore[call-overload]
    marker = pluggy.HookimplMarker(PROJECT)
    (marker(**opts)(theirs) if opts else marker(theirs))  # type: ignore[call-overload]
    assert getattr(ours, IMPL_ATTR) == getattr(theirs, IMPL_ATTR)


def test_hookspecs_are_marked_as_pluggy_marks_firstresult_specs() -> None:
    def spec() -> None: ...

    pluggy.HookspecMarker(PROJECT)(firstresult=True)(spec)
    expected = getattr(spec, SPEC_ATTR)
    specs = {
        n: f
        for n, f in vars(hookspecs).items()
        if isinstance(f, types.FunctionType) and f.__module__ == hookspecs.__name__ and n[0] != "_"
    }
    assert {"local_evidence", "instance_properties", "sample_host"} <= set(specs)
    assert {n: getattr(f, SPEC_ATTR, None) for n, f in specs.items()} == {
        n: expected for n in specs
    }
    assert set(specs) == HOOK_NAMES
    # pluggy reads the same specs off the module.
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    assert {n for n in vars(pm.hook) if getattr(pm.hook, n).has_spec()} == HOOK_NAMES
    assert isinstance(hookspecs.hookspec, pluggy.HookspecMarker)


# --- reading a plugin, and the unknown-hook check --------------------------------------

PLUGINS = {
    "good": """
@hookimpl
def local_evidence(context):
    return None
def helper(x):  # not marked: no hook
    return x
""",
    "misspelt": """
@hookimpl
def local_evidence(context):
    return None
@hookimpl
def device_atributes(context, instance, device):
    return {}
""",
    "misspelt_specname": """
@hookimpl(specname="local_evidense")
def evidence(context):
    return None
""",
    "optional_unknown": """
@hookimpl(optionalhook=True)
def some_future_hook(context):
    return None
""",
    "renamed": """
@hookimpl(specname="device_config")
def config_for(context, instance, device):
    return None
@hookimpl(wrapper=True, specname="device_config")
def wrap(context):
    return (yield)
""",
    "far_off": """
@hookimpl
def frobnicate():
    return None
""",
}


def plugin_module(key: str, body: str | None = None) -> types.ModuleType:
    module = types.ModuleType(f"hookmarks_{key}")
    module.hookimpl = hookimpl  # type: ignore[attr-defined]
    exec(textwrap.dedent(body or PLUGINS[key]), module.__dict__)  # the test plugins are inline
    return module


def plugin_object(key: str) -> object:
    """The same plugin as a class instance: read by pluggy's own parser."""
    module = plugin_module(key)
    members = {n: f for n, f in vars(module).items() if isinstance(f, types.FunctionType)}
    cls = type(f"Plugin_{key}", (), {n: staticmethod(f) for n, f in members.items()})
    return cls()


def pluggy_refusal(plugin: object) -> str | None:
    """The hook pluggy's ``check_pending`` names for ``plugin``, or ``None``."""
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(plugin, name="p")
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        return str(exc).split("'")[1]  # "unknown hook 'NAME' in plugin ..."
    return None


@pytest.mark.parametrize("key", sorted(PLUGINS))
@pytest.mark.parametrize("make", [plugin_module, plugin_object])
def test_check_hook_names_refuses_what_check_pending_refuses(key: str, make: Any) -> None:
    plugin = make(key)
    expected = pluggy_refusal(make(key))
    if expected is None:
        check_hook_names(plugin, "p")
    else:
        with pytest.raises(UnknownHookError, match=f"but '{expected}' is no hook"):
            check_hook_names(plugin, "p")
    assert (expected is None) == (key in ("good", "optional_unknown", "renamed"))


@pytest.mark.parametrize("key", sorted(PLUGINS))
def test_plugin_hooks_of_a_module_are_the_hooks_pluggy_registers(key: str) -> None:
    module = plugin_module(key)
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(module, name="p")
    theirs = {
        (hook, impl.function.__name__, impl.argnames, impl.kwargnames, impl.wrapper)
        for hook in vars(pm.hook)
        for impl in getattr(pm.hook, hook).get_hookimpls()
    }
    ours = {
        (hook, func, sig[1], sig[2], bool(opts["wrapper"]))
        for hook, impls in _hookmarks.plugin_hooks(module).items()
        for func, sig, opts in impls
        if sig is not None
    }
    assert ours == theirs


def test_only_pluggy_reads_a_plugin_object() -> None:
    """A class instance goes to pluggy's own parser (a module never needs pluggy)."""
    assert _hookmarks._module_hooks(plugin_object("good")) is None
    hooks = _hookmarks.plugin_hooks(plugin_object("renamed"))
    assert sorted(f for f, _, _ in hooks["device_config"]) == ["config_for", "wrap"]


ARG_PLUGINS = {  # device_config is passed context, instance and device
    "extra_required": "def device_config(context, instance, device, mtu):",
    "extra_defaulted": "def device_config(context, device, mtu=1500):",
    "fewer": "def device_config(device):",
}


@pytest.mark.parametrize("key", sorted(ARG_PLUGINS))
def test_check_hook_names_refuses_arguments_pluggy_refuses(key: str) -> None:
    module = plugin_module(key, f"@hookimpl\n{ARG_PLUGINS[key]}\n    return None\n")
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    try:
        pm.register(module, name="p")
        refused = False
    except pluggy.PluginValidationError:
        refused = True
    if refused:
        with pytest.raises(PluginError, match=r"function device_config .* requires 'mtu'"):
            check_hook_names(module, "p")
    else:
        check_hook_names(module, "p")
    assert refused == (key == "extra_required")


def sig_plain(context, device, claim=None, extra=1):  # type: ignore[no-untyped-def]
    return (context, device, claim, extra)


def sig_none():  # type: ignore[no-untyped-def]
    return "none"


@pytest.mark.parametrize("func", [sig_plain, sig_none])
def test_plain_signature_is_pluggys_argument_binding(func: Any) -> None:
    opts = pluggy.HookimplMarker(PROJECT)(func).dranet_cloud_impl  # type: ignore[attr-defined]
    impl = pluggy.HookImpl(None, "p", func, opts)
    sig = _hookmarks.plain_signature(func)
    assert sig is not None and sig[1:] == (impl.argnames, impl.kwargnames)


def test_the_message_names_plugin_function_and_closest_hook() -> None:
    with pytest.raises(UnknownHookError) as exc:
        check_hook_names(plugin_module("misspelt"), "acme")
    assert str(exc.value).startswith(
        "plugin acme: function device_atributes is marked @hookimpl but 'device_atributes' "
        "is no hook; did you mean 'device_attributes'?"
    )
    with pytest.raises(UnknownHookError) as exc:
        check_hook_names(plugin_module("misspelt_specname"))
    assert "plugin hookmarks_misspelt_specname: function evidence is marked " in str(exc.value)
    assert "@hookimpl(specname='local_evidense')" in str(exc.value)
    assert "did you mean 'local_evidence'?" in str(exc.value)
    with pytest.raises(UnknownHookError) as exc:
        check_hook_names(plugin_module("far_off"), "far")
    assert "the hooks are " in str(exc.value) and "device_attributes" in str(exc.value)


def test_register_refuses_a_misspelt_hook() -> None:
    reg = PluginRegistry(load_entry_points=False)
    with pytest.raises(UnknownHookError, match="plugin acme: function device_atributes"):
        reg.register(plugin_module("misspelt"), "acme")
    assert "acme" not in reg.names()


# --- a real entry-point-installed plugin with a misspelt hook --------------------------

TYPO_MODULE = "dranet_cloud_acmetypo"


@pytest.fixture()
def installed_typo_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A distribution on ``sys.path`` whose ``dranet_cloud`` entry point misspells a hook."""
    site = tmp_path / "site"
    dist = site / "dranet_cloud_acmetypo-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: dranet-cloud-acmetypo\nVersion: 1.0\n\n"
    )
    (dist / "entry_points.txt").write_text(f"[dranet_cloud]\nacmetypo = {TYPO_MODULE}\n")
    (site / f"{TYPO_MODULE}.py").write_text(
        "from dranet_cloud.hookspecs import hookimpl\n" + textwrap.dedent(PLUGINS["misspelt"])
    )
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop(TYPO_MODULE, None)


@pytest.mark.usefixtures("installed_typo_plugin")
def test_an_installed_plugin_with_a_misspelt_hook_does_not_load() -> None:
    with pytest.raises(UnknownHookError, match="plugin acmetypo: function device_atributes"):
        PluginRegistry()
    reg = PluginRegistry(strict=False)
    assert list(reg.load_errors) == ["acmetypo"]
    assert "acmetypo" not in reg.names() and "gce" in reg.names()


@pytest.mark.usefixtures("installed_typo_plugin")
def test_plugins_lists_the_others_and_fails_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["plugins"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "gce" in out and "acmetypo" not in out
    assert "plugin acmetypo: function device_atributes" in err
    assert "did you mean 'device_attributes'?" in err


@pytest.mark.usefixtures("installed_typo_plugin")
def test_serve_refuses_to_start_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = HostRootBuilder(tmp_path / "bare").dmi(sys_vendor="Supermicro").build()
    sock = tmp_path / "s.sock"
    code = main(["serve", "--listen", f"unix://{sock}", "--host-root", str(bare)])
    err = capsys.readouterr().err
    assert code == 2 and "no role" not in err  # refused before anything else is looked at
    assert "plugin acmetypo: function device_atributes" in err
    assert "did you mean 'device_attributes'?" in err
    assert not sock.exists()
