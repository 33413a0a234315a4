"""Finding the ``dranet_cloud`` entry points without ``importlib.metadata``.

``importlib.metadata.entry_points()`` builds a distribution object for every
installed package and parses every ``entry_points.txt`` through the email
parser; on a node with a hundred packages that alone costs more than
cloud-init's whole ``ds-identify`` run, and every ``dranet-cloud detect`` and
every container start pays it.  This module reads the same files directly:
for each ``*.dist-info`` / ``*.egg-info`` directory on ``sys.path`` it opens
``entry_points.txt`` and keeps it only when it has our group, and reads the
name and version from ``METADATA`` only for those few.  The first
distribution of a name on ``sys.path`` wins, as with ``importlib.metadata``.

It also answers ``dranet-cloud --version`` (the core and every plugin).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import NamedTuple

GROUP = "dranet_cloud"
CORE_DISTRIBUTION = "dranet-cloud"
# Upper bound on what is read from one metadata file (they are a few kB).
_MAX_FILE_BYTES = 1 << 20


class PluginEntryPoint(NamedTuple):
    """One ``name = module[:attr]`` line of a distribution's ``[dranet_cloud]`` group."""

    name: str
    value: str
    distribution: str
    version: str

    def load(self) -> object:
        """Import the module (and attribute) the entry point names."""
        import importlib

        module_name, _, attr = self.value.partition(":")
        obj: object = importlib.import_module(module_name.strip())
        for part in attr.split("[", 1)[0].strip().split(".") if attr else ():
            obj = getattr(obj, part)
        return obj


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(_MAX_FILE_BYTES)
    except OSError:
        return None


def _metadata_dirs() -> Iterator[str]:
    for entry in sys.path:
        try:
            with os.scandir(entry or ".") as it:
                names = sorted(e.name for e in it)
        except OSError:
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                yield os.path.join(entry or ".", name)


def _name_version(meta_dir: str) -> tuple[str, str]:
    """``Name`` and ``Version`` from the metadata headers (the top of the file)."""
    text = _read(os.path.join(meta_dir, "METADATA")) or _read(os.path.join(meta_dir, "PKG-INFO"))
    name = version = ""
    for line in (text or "").splitlines():
        if not line.strip():
            break  # end of the headers
        key, _, value = line.partition(":")
        if key == "Name":
            name = value.strip()
        elif key == "Version":
            version = value.strip()
    if not name:
        stem = os.path.basename(meta_dir).rsplit(".", 1)[0]
        name, _, version = stem.partition("-")
    return name, version or "?"


def _group_lines(text: str, group: str) -> Iterator[tuple[str, str]]:
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            inside = line == f"[{group}]"
            continue
        if inside:
            key, sep, value = line.partition("=")
            if sep:
                yield key.strip(), value.strip()


def _normalize(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def plugin_entry_points(group: str = GROUP) -> list[PluginEntryPoint]:
    """Every entry point of ``group``, one per name, first distribution on ``sys.path`` first."""
    seen_dists: set[str] = set()
    seen_names: set[str] = set()
    out: list[PluginEntryPoint] = []
    for meta_dir in _metadata_dirs():
        text = _read(os.path.join(meta_dir, "entry_points.txt"))
        if text is None or f"[{group}]" not in text:
            continue
        dist, version = _name_version(meta_dir)
        if _normalize(dist) in seen_dists:
            continue
        seen_dists.add(_normalize(dist))
        for name, value in _group_lines(text, group):
            if name not in seen_names:
                seen_names.add(name)
                out.append(PluginEntryPoint(name, value, dist, version))
    return out


def installed_versions() -> list[tuple[str, str]]:
    """``(distribution, version)`` of the core, then of every plugin distribution."""
    core = "?"
    for meta_dir in _metadata_dirs():
        base = os.path.basename(meta_dir)
        if _normalize(base.split("-", 1)[0].rsplit(".", 1)[0]) != CORE_DISTRIBUTION:
            continue
        name, version = _name_version(meta_dir)
        if _normalize(name) == CORE_DISTRIBUTION:
            core = version
            break
    plugins = sorted({(ep.distribution, ep.version) for ep in plugin_entry_points()})
    return [(CORE_DISTRIBUTION, core), *plugins]
