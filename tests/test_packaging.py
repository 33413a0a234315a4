"""Distribution metadata a vendor or operator relies on."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[1]
PLUGINS = sorted(p for p in (REPO / "plugins").iterdir() if (p / "pyproject.toml").is_file())


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_every_plugin_pins_the_core_minor_version(plugin: Path) -> None:
    """The hook contract may change between core minor versions (0.1 -> 0.2)."""
    project = tomllib.loads((plugin / "pyproject.toml").read_text())["project"]
    core = [d for d in project["dependencies"] if d.replace(" ", "").startswith("dranet-cloud")]
    assert core == ["dranet-cloud>=0.2,<0.3"], (
        f"{plugin.name}: depend on 'dranet-cloud>=0.2,<0.3' (the core range), not {core}"
    )


def test_core_declares_the_testing_extra_for_the_conformance_suite() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert any(d.startswith("pytest") for d in extras["testing"])
    assert any(d.startswith("prometheus-client") for d in extras["server"])
