"""docs/architecture.md names every module of the core and of every plugin.

A newcomer finds a module's concept in the map before opening the module, so
a module the map leaves out is a module nobody finds; a name the map keeps
after its module moved sends them to a file that is not there.  Names in the
"Core modules" section are paths relative to ``dranet_cloud/``
(``ipam/sqlite.py``); ``__init__.py`` files are modules too.  A plugin's
module is named in the "Plugin packages" section by the skeleton
(``dranet_cloud_<cloud>/routing.py``), by its path, or, for a module several
plugins have, by its file name (``constants.py``).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dranet_cloud"
DOC = ROOT / "docs" / "architecture.md"

# A path to a Python file as the map writes it: `ipam/sqlite.py`, `models.py`,
# `dranet_cloud/wire/models.py`; never part of a longer word or path.
_MODULE_NAME = re.compile(r"(?<![\w/.<>-])((?:[\w]+/)*[\w]+\.py)(?![\w])")


def core_modules() -> list[str]:
    """Every ``*.py`` under dranet_cloud/, relative to it, sorted."""
    return sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py"))


def section(text: str, heading: str) -> str:
    """A level-2 section: from its heading to the next level-2 heading."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def core_section(text: str) -> str:
    return section(text, "Core modules")


def named_modules(text: str) -> set[str]:
    """The module paths a text names, without a leading ``dranet_cloud/``."""
    return {m.removeprefix("dranet_cloud/") for m in _MODULE_NAME.findall(text)}


def test_the_parser_reads_names_as_the_map_writes_them() -> None:
    text = "ipam/sqlite.py  x\n`models.py`, dranet_cloud/kube/node.py; dranet_cloud_<c>/plugin.py"
    assert named_modules(text) == {"ipam/sqlite.py", "models.py", "kube/node.py"}


def test_every_core_module_is_named_in_the_architecture_doc() -> None:
    named = named_modules(core_section(DOC.read_text(encoding="utf-8")))
    missing = [m for m in core_modules() if m not in named]
    assert not missing, (
        "docs/architecture.md does not name "
        + ", ".join(f"dranet_cloud/{m}" for m in missing)
        + ": add a line for each under the concept it serves (section 'Core modules')"
    )


def test_every_name_in_the_core_map_is_a_module() -> None:
    modules = set(core_modules())
    stale = sorted(named_modules(core_section(DOC.read_text(encoding="utf-8"))) - modules)
    assert not stale, (
        "docs/architecture.md names "
        + ", ".join(f"dranet_cloud/{m}" for m in stale)
        + " in 'Core modules', but no such module exists: update or remove the line"
    )


def test_every_plugin_module_is_named_in_the_architecture_doc() -> None:
    text = section(DOC.read_text(encoding="utf-8"), "Plugin packages")
    names = set(re.findall(r"[\w<>/.-]+\.py", text))
    missing: list[str] = []
    # Directories with an __init__.py: an editable install leaves dranet_cloud_<x>.egg-info.
    packages = sorted(p.parent for p in ROOT.glob("plugins/*/dranet_cloud_*/__init__.py"))
    for package in packages:
        for path in sorted(package.rglob("*.py")):
            rel = path.relative_to(package).as_posix()
            forms = {f"dranet_cloud_<cloud>/{rel}", path.relative_to(ROOT).as_posix(), rel}
            if not forms & names:
                missing.append(path.relative_to(ROOT).as_posix())
    assert len(packages) >= 7
    assert not missing, (
        f"docs/architecture.md does not name {', '.join(missing)}: add it to the skeleton "
        "or to the plugin's extra modules (section 'Plugin packages')"
    )
