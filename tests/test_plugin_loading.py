"""Loading plugins: a misspelt hook stops its plugin, a broken one is skipped, blocked
names stay out.

Each installed plugin here is a real throw-away distribution (a ``*.dist-info``
directory with ``entry_points.txt`` naming the ``dranet_cloud`` group, and its
module) on the path, loaded as the host loads every plugin: by pluggy's
entry-point loader.
"""

from __future__ import annotations

import logging
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from dranet_cloud.cli.main import main
from dranet_cloud.contract.hookspecs import hookimpl
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.testing.cli import run_cli
from dranet_cloud.toolkit.errors import PluginError, UnknownHookError

PLUGINS = {
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
    "far_off": """
@hookimpl
def frobnicate():
    return None
""",
    "optional_unknown": """
@hookimpl(optionalhook=True)
def some_future_hook(context):
    return None
@hookimpl(specname="local_evidence")
def evidence(context):
    return "renamed"
""",
    "extra_argument": """
@hookimpl
def device_config(context, instance, device, mtu):
    return None
""",
    "broken": """
raise ImportError("no module named 'vendor_sdk'")
""",
}


def plugin_module(key: str, name: str | None = None) -> types.ModuleType:
    module = types.ModuleType(name or f"loading_{key}")
    module.hookimpl = hookimpl  # type: ignore[attr-defined]
    exec(textwrap.dedent(PLUGINS[key]), module.__dict__)  # the test plugins are inline
    return module


def install(site: Path, name: str, key: str) -> None:
    """Write distribution ``dranet-cloud-NAME`` whose entry point ``NAME`` is plugin ``key``."""
    module = f"dranet_cloud_{name}"
    dist = site / f"{module}-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: dranet-cloud-{name}\nVersion: 1.0\n\n"
    )
    (dist / "entry_points.txt").write_text(f"[dranet_cloud]\n{name} = {module}\n")
    body = "from dranet_cloud.contract.hookspecs import hookimpl\n" + textwrap.dedent(PLUGINS[key])
    (site / f"{module}.py").write_text(body)


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory on ``sys.path`` for throw-away plugin distributions."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    yield site
    for name in [m for m in sys.modules if m.startswith("dranet_cloud_acme")]:
        del sys.modules[name]


@pytest.fixture()
def typo_site(site: Path) -> Path:
    install(site, "acmetypo", "misspelt")
    return site


# --- the message ------------------------------------------------------------------------


def test_the_message_names_plugin_function_and_closest_hook() -> None:
    reg = PluginRegistry(load_entry_points=False)
    with pytest.raises(UnknownHookError) as exc:
        reg.register(plugin_module("misspelt"), "acme")
    assert str(exc.value) == (
        "plugin acme: function device_atributes is marked @hookimpl but 'device_atributes' "
        "is no hook; did you mean 'device_attributes'? (fix the name in the plugin, or "
        "uninstall its distribution)"
    )
    assert exc.value.exit_code == 2
    with pytest.raises(UnknownHookError) as exc:
        reg.register(plugin_module("misspelt_specname"), "renamed")
    assert "plugin renamed: function evidence is marked " in str(exc.value)
    assert "@hookimpl(specname='local_evidense')" in str(exc.value)
    assert "did you mean 'local_evidence'?" in str(exc.value)
    with pytest.raises(UnknownHookError) as exc:
        reg.register(plugin_module("far_off"), "far")
    assert "the hooks are " in str(exc.value) and "device_attributes" in str(exc.value)
    assert reg.names() == []  # each refused plugin was unregistered


def test_an_optional_unknown_hook_loads() -> None:
    reg = PluginRegistry(load_entry_points=False)
    reg.register(plugin_module("optional_unknown"), "future")
    assert reg.names() == ["future"]
    assert reg.call("future", "local_evidence", context=None) == "renamed"


def test_an_argument_the_hook_does_not_pass_is_refused() -> None:
    reg = PluginRegistry(load_entry_points=False)
    with pytest.raises(PluginError, match=r"plugin extra: .*'mtu'.*uninstall") as exc:
        reg.register(plugin_module("extra_argument"), "extra")
    assert exc.value.exit_code == 2 and reg.names() == []


# --- installed plugins ------------------------------------------------------------------


@pytest.mark.usefixtures("typo_site")
def test_an_installed_plugin_with_a_misspelt_hook_does_not_load() -> None:
    with pytest.raises(UnknownHookError, match="plugin acmetypo: function device_atributes"):
        PluginRegistry()
    reg = PluginRegistry(strict=False)
    assert list(reg.load_errors) == ["acmetypo"]
    assert "acmetypo" not in reg.names() and "gce" in reg.names()
    assert not reg.has_plugin("acmetypo")


def test_the_installed_cli_refuses_a_misspelt_plugin(typo_site: Path) -> None:
    """``dranet-cloud plugins`` as a real process, the distribution found on PYTHONPATH."""
    res = run_cli("plugins", env={"PYTHONPATH": str(typo_site)})
    assert res.returncode == 2, res.stderr
    names = [line.split()[0] for line in res.stdout.splitlines()[2:]]
    assert "gce" in names and "acmetypo" not in names
    assert (
        "plugin acmetypo: function device_atributes is marked @hookimpl but 'device_atributes' "
        "is no hook; did you mean 'device_attributes'?"
    ) in res.stderr


@pytest.mark.usefixtures("typo_site")
def test_plugins_lists_the_others_and_fails_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["plugins"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "gce" in out and "acmetypo" not in out
    assert "plugin acmetypo: function device_atributes" in err
    assert "did you mean 'device_attributes'?" in err


@pytest.mark.usefixtures("typo_site")
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


def test_disable_plugin_lets_a_node_start_without_the_refused_plugin(
    typo_site: Path, tmp_path: Path
) -> None:
    """The operator's way out while the vendor fixes its hook: ``--disable-plugin`` is
    pluggy's ``set_blocked``, so the distribution's module is never even imported."""
    bare = HostRootBuilder(tmp_path / "bare").dmi(sys_vendor="Supermicro").build()
    env = {"PYTHONPATH": str(typo_site)}
    refused = run_cli("detect", "--host-root", str(bare), env=env)
    assert refused.returncode == 2 and "plugin acmetypo" in refused.stderr
    (typo_site / "dranet_cloud_acmetypo.py").write_text("raise SystemExit('imported')\n")
    res = run_cli("detect", "--host-root", str(bare), "--disable-plugin", "acmetypo", env=env)
    assert res.returncode == 0, res.stderr
    assert "acmetypo" not in res.stderr and "imported" not in res.stderr
    res = run_cli(
        "detect",
        "--host-root",
        str(bare),
        "--disable-plugin",
        "acmetypo",
        "--cloud-provider-hint",
        "none",
        env=env,
    )
    assert res.returncode == 0, res.stderr


def test_a_plugin_that_fails_to_import_is_logged_and_skipped(
    site: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A broken vendor package must not break the node: the others load."""
    install(site, "acmebroken", "broken")
    install(site, "acmegood", "optional_unknown")
    with caplog.at_level(logging.WARNING, logger="dranet_cloud.host.plugin_manager"):
        reg = PluginRegistry()
    assert "acmebroken" not in reg.names() and reg.load_errors == {}
    assert {"acmegood", "gce"} <= set(reg.names())
    assert "plugin acmebroken (dranet_cloud_acmebroken) failed to import" in caplog.text
    assert "vendor_sdk" in caplog.text
    info = {i.name: i for i in reg.info()}
    assert (info["acmegood"].distribution, info["acmegood"].version) == (
        "dranet-cloud-acmegood",
        "1.0",
    )


@pytest.mark.usefixtures("typo_site")
def test_blocked_names_are_never_loaded() -> None:
    reg = PluginRegistry(blocked=["acmetypo", "gce"])  # strict: the typo is never reached
    assert reg.load_errors == {}
    assert "gce" not in reg.names() and "acmetypo" not in reg.names() and "aws" in reg.names()
    assert reg.is_blocked("gce") and reg.get_plugin("gce") is None
    assert reg.register(plugin_module("optional_unknown"), "gce") is None  # pluggy: blocked
    assert "gce" not in reg.names()
