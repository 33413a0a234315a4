"""``dranet-cloud detect`` on a node with no evidence starts neither the host nor a server.

Auto-detection needs the entry points, the host root and each plugin's
``local_evidence``; loading a plugin loads its own modules (its snapshot
model, metadata client and profile, so pydantic, httpx and sqlite3 come with
them), but a bare-metal node (the common ``none`` answer) does not import
the host, the Kubernetes client, the caches or the server stack.
The host path (a provider was found, or one was named) must behave exactly as
before: an auto-detected provider that cannot start is reported as ``none``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from dranet_cloud import entrypoints
from dranet_cloud.context import ProviderContext
from dranet_cloud.entrypoints import PluginEntryPoint
from dranet_cloud.hostroot import HostRoot
from dranet_cloud.plugins import PluginRegistry
from dranet_cloud.testing import HostRootBuilder
from dranet_cloud.testing.environ import isolated_environ

HEAVY = ("lightkube", "cachetools", "fastapi", "uvicorn", "starlette")
PLUGINS = ("gce", "aws", "aliyun", "webhook", "cks")

# Runs the CLI in a fresh interpreter, then records what it imported.
WRAPPER = """
import sys
import json
from dranet_cloud.cli.main import main
report, argv = sys.argv[1], sys.argv[2:]
code = main(argv)
with open(report, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def run_recording(tmp_path: Path, *args: str) -> tuple[dict[str, object], str]:
    report = tmp_path / "modules.json"
    env = isolated_environ()
    res = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(report), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    data: dict[str, object] = json.loads(report.read_text())
    return data, res.stdout


@pytest.fixture()
def bare_metal(tmp_path: Path) -> Path:
    return (
        HostRootBuilder(tmp_path / "bm")
        .dmi(sys_vendor="Supermicro", product_name="X13")
        .nic("eno1", "3c:ec:ef:00:00:01")
        .build()
    )


@pytest.mark.parametrize("output", ["json", "table"])
def test_detect_none_imports_no_heavy_module(tmp_path: Path, bare_metal: Path, output: str) -> None:
    data, stdout = run_recording(tmp_path, "detect", "--host-root", str(bare_metal), "-o", output)
    modules = data["modules"]
    assert isinstance(modules, list)
    # Every installed plugin was loaded and asked for local evidence...
    for name in PLUGINS:
        assert f"dranet_cloud_{name}.plugin" in modules
    # ...without the host, the Kubernetes client, the caches or the server stack.
    heavy = [m for m in modules if m.split(".")[0] in HEAVY]
    assert heavy == []
    assert "dranet_cloud.host" not in modules
    # Only the one sub-command module on the command line.
    assert (
        "dranet_cloud.cli.serve_cmd" not in modules and "dranet_cloud.cli.ipam_cmd" not in modules
    )
    assert data["code"] == 0
    if output == "json":
        result = json.loads(stdout)
        assert list(result) == ["provider", "explicit", "evidence", "elapsed_ms"]
        assert result["provider"] == "none" and result["explicit"] is False
        assert result["evidence"] == "no local evidence of any installed plugin"
    else:
        assert stdout.split()[:4] == ["provider", "none", "explicit", "false"]  # no Python repr


# --- direct calls answer as pluggy does (the markers: tests/test_hookmarks.py) -----------


def _fake_plugin_module(name: str, body: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType(name)
    exec(body, module.__dict__)  # the test plugins are written inline
    monkeypatch.setitem(sys.modules, name, module)


PLUGIN_BODIES = {
    # specname: the hook's name is not the function's; the impl takes fewer args.
    "renamed": """
from dranet_cloud.hookspecs import hookimpl
@hookimpl(specname="local_evidence")
def evidence(context):
    return "DMI " + context.host_root.dmi("sys_vendor")
@hookimpl
def instance_properties(context, deadline):
    raise AssertionError("not called")
""",
    "noargs": """
from dranet_cloud.hookspecs import hookimpl
@hookimpl
def local_evidence():
    return None
@hookimpl
def instance_properties(context, deadline):
    raise AssertionError("not called")
""",
    # A wrapper is left to pluggy (it has no answer of its own).
    "wrapped": """
from dranet_cloud.hookspecs import hookimpl
@hookimpl(wrapper=True)
def local_evidence(context):
    return (yield)
@hookimpl
def instance_properties(context, deadline):
    raise AssertionError("not called")
""",
    "profile": """
from dranet_cloud.hookspecs import hookimpl
@hookimpl
def profile_config(context, instance, device, claim_uid, config):
    return None
@hookimpl
def release_profile_config(context, instance, device, claim_uid, config):
    return True
""",
}


@pytest.fixture()
def lazy_registry(monkeypatch: pytest.MonkeyPatch) -> PluginRegistry:
    eps = []
    for name, body in PLUGIN_BODIES.items():
        _fake_plugin_module(f"lazyplug_{name}", body, monkeypatch)
        eps.append(PluginEntryPoint(name, f"lazyplug_{name}", f"lazyplug-{name}", "1"))
    monkeypatch.setattr(entrypoints, "plugin_entry_points", lambda group: eps)
    return PluginRegistry()


def test_detection_answers_without_pluggy_as_pluggy_does(
    lazy_registry: PluginRegistry, tmp_path: Path
) -> None:
    root = HostRootBuilder(tmp_path / "n").dmi(sys_vendor="Acme", product_name="X").build()
    context = ProviderContext(host_root=HostRoot(root), env={})

    def answers(reg: PluginRegistry) -> list[object]:
        return [
            reg.names(),
            reg.with_role("cloud"),
            reg.with_role("profile"),
            [reg.implements(n, "local_evidence") for n in reg.names()],
            [reg.call(n, "local_evidence", context=context) for n in ("renamed", "noargs")],
        ]

    lazy = answers(lazy_registry)
    assert lazy_registry._pm is None, "roles and local evidence must not need pluggy"
    assert lazy[1] == ["noargs", "renamed", "wrapped"] and lazy[2] == ["profile"]
    assert lazy[4] == ["DMI Acme", None]
    # The wrapper goes through pluggy (which finds no inner answer)...
    assert lazy_registry.call("wrapped", "local_evidence", context=context) is None
    assert lazy_registry._pm is not None
    # ...and a manager-backed registry answers exactly as the lazy one did.
    eager = PluginRegistry()
    _ = eager.pm
    assert answers(eager) == lazy


def test_instance_snapshot_is_still_importable_from_context() -> None:
    from dranet_cloud import context, snapshot
    from dranet_cloud.context import InstanceSnapshot

    assert InstanceSnapshot is snapshot.InstanceSnapshot
    assert context.InstanceSnapshot is InstanceSnapshot
    assert InstanceSnapshot(provider="x").summary() == {"provider": "x", "endpoint": None}
    with pytest.raises(AttributeError, match="NoSuchName"):
        _ = context.NoSuchName


def test_ipam_help_names_the_real_database_defaults() -> None:
    """The ipam command spells its help without importing the store; keep them equal."""
    from dranet_cloud.cli import ipam_cmd
    from dranet_cloud.ipam import DEFAULT_IPAM_DB, IPAM_DB_ENV

    assert ipam_cmd._DB_ENV_HELP == IPAM_DB_ENV
    assert ipam_cmd._DB_DEFAULT_HELP == DEFAULT_IPAM_DB


# --- the host path is unchanged -----------------------------------------------------


@pytest.fixture(scope="module")
def aliyun_node() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        sample = PluginRegistry().call(
            "aliyun", "sample_host", dest=Path(tmp) / "node", variant=None
        )
        yield sample.root


def detect(root: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    exe = [sys.executable, "-m", "dranet_cloud.cli.main", "detect", "--host-root", str(root)]
    res = subprocess.run(
        [*exe, *extra], capture_output=True, text=True, env={**os.environ, **env}, timeout=60
    )
    assert res.returncode == 0, res.stderr
    return res


def detect_json(root: Path, env: dict[str, str], *extra: str) -> dict[str, object]:
    out: dict[str, object] = json.loads(detect(root, env, *extra, "-o", "json").stdout)
    return out


def test_auto_detected_provider_that_cannot_start_is_none(aliyun_node: Path) -> None:
    # Confirmation (instance-id) answers; loading the NICs gets 503 until the deadline.
    emu = PluginRegistry().call(
        "aliyun",
        "emulator",
        fixture=None,
        listen="127.0.0.1:0",
        faults="unavailable-for=60;path=/latest/meta-data/network",
    )
    with emu:
        data = detect_json(aliyun_node, dict(emu.env), "--metadata-deadline", "0.3")
        loaded = [r for r in emu.log if r.path.startswith("/latest/meta-data/network")]
    assert data["provider"] == "none" and data["explicit"] is False
    assert "start-up failed" in str(data["evidence"])
    assert loaded, "the host must try to load the confirmed provider's instance"


def test_auto_detected_provider_that_starts_is_reported(aliyun_node: Path) -> None:
    emu = PluginRegistry().call(
        "aliyun", "emulator", fixture=None, listen="127.0.0.1:0", faults=None
    )
    with emu:
        data = detect_json(aliyun_node, dict(emu.env))
    assert data["provider"] == "aliyun" and data["explicit"] is False


def test_evidence_without_an_answer_is_none_with_the_reason(aliyun_node: Path) -> None:
    emu = PluginRegistry().call(
        "aliyun", "emulator", fixture=None, listen="127.0.0.1:0", faults=None
    )
    with emu:
        env = dict(emu.env)
    # The emulator is gone: its port refuses connections.
    lines = detect(aliyun_node, env, "--probe-timeout", "0.3").stdout.splitlines()
    assert lines[0].split() == ["provider", "none"]
    assert any(line.strip().startswith("not aliyun:") for line in lines)


def test_a_lazily_configured_line_keeps_the_chosen_format(aliyun_node: Path) -> None:
    """Detection logs after a deferred set-up: the line still has its format and timestamp."""
    emu = PluginRegistry().call(
        "aliyun", "emulator", fixture=None, listen="127.0.0.1:0", faults=None
    )
    with emu:
        env = dict(emu.env)
    res = detect(aliyun_node, env, "--probe-timeout", "0.3", "--log-format", "json")
    lines = [json.loads(line) for line in res.stderr.splitlines()]
    assert lines, "the unconfirmed evidence must be reported"
    assert all(line["ts"].endswith("Z") for line in lines)
    assert any(
        line["level"] == "WARNING" and "aliyun had local evidence" in line["msg"] for line in lines
    )
