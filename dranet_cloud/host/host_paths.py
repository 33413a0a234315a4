"""Which node directories each plugin reads under the host root, in one place.

A sidecar sees only what its pod mounts under ``--host-root``.  A plugin that
reads a node file its deployment does not mount serves nothing for it (the
Azure ``azure-ipoib`` profile and the Hyper-V KVP pool under
``/var/lib/hyperv`` were the case), so every plugin declares its directories
with the ``host_paths`` hook, and everything that must agree with the mounts
reads them from here: the overlays' test (every path a plugin documented for
an overlay declares is mounted by it, and nothing else), the conformance
suite (the plugin's answers on its sample node cut down to its declaration
are the whole node's answers) and ``serve`` start-up (a WARNING naming each
declared directory the host root does not hold, with the fix).

A path is a node directory as the plugin sees it under the host root
(``/proc/net``, not the ``/proc/1/net`` a manifest mounts there).
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Iterable

from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.node.hostroot import HostRoot

log = logging.getLogger(__name__)

# What the core reads on every node, whichever plugins run: the NICs and PCI
# functions it resolves DRANET's devices to (``/sys/class/net``,
# ``/sys/bus/pci``, ``/sys/class/infiniband``) and DMI for detection.
CORE_HOST_PATHS: tuple[str, ...] = ("/sys",)
CORE = "dranet-cloud"  # the name the core's own paths are reported under

__all__ = [
    "CORE",
    "CORE_HOST_PATHS",
    "HostPathError",
    "covered_by",
    "declared_host_paths",
    "missing_under",
    "normalize_host_path",
    "required_host_paths",
]


class HostPathError(ValueError):
    """A ``host_paths`` answer that is not a list of absolute node directories."""


def normalize_host_path(plugin: str, path: object) -> str:
    """``path`` checked and written one way (absolute, no ``..``, no trailing ``/``).

    Raises :class:`HostPathError` naming the plugin and the fix: a mount is
    matched by prefix, so ``sys/`` or ``/sys/../proc`` would never match.
    """
    if not isinstance(path, str) or not path.startswith("/"):
        raise HostPathError(
            f"plugin {plugin}: host_paths() entry {path!r} is not an absolute node path "
            "(write the directory as the node names it, e.g. '/var/lib/hyperv')"
        )
    norm = posixpath.normpath(path)
    if norm in ("/", "//") or ".." in norm.split("/") or norm != path.rstrip("/"):
        raise HostPathError(
            f"plugin {plugin}: host_paths() entry {path!r} must be a normalized directory "
            f"below / (write {norm!r}, and never the whole node)"
        )
    return norm


def declared_host_paths(registry: PluginRegistry, name: str) -> tuple[str, ...] | None:
    """The plugin's ``host_paths`` answer, checked and sorted; ``None`` without the hook."""
    if not registry.implements(name, "host_paths"):
        return None
    answer = registry.call(name, "host_paths")
    if answer is None:
        return None
    if isinstance(answer, str) or not isinstance(answer, Iterable):
        raise HostPathError(f"plugin {name}: host_paths() must return a list of paths")
    return tuple(sorted({normalize_host_path(name, p) for p in answer}))


def required_host_paths(
    registry: PluginRegistry, names: Iterable[str]
) -> dict[str, tuple[str, ...]]:
    """Plugin name (and :data:`CORE`) -> the node directories it reads.

    A plugin without the hook is taken to read only what the core reads; the
    overlays' test and the plugin layout test require the hook of every
    plugin in this repository, so that a forgotten directory is a test
    failure, not a 500 on a node.
    """
    out: dict[str, tuple[str, ...]] = {CORE: CORE_HOST_PATHS}
    for name in names:
        out[name] = declared_host_paths(registry, name) or ()
    return out


def covered_by(path: str, mounted: Iterable[str]) -> str | None:
    """The mounted node directory that holds ``path`` (itself or an ancestor), or ``None``."""
    for mount in mounted:
        if path == mount or path.startswith(mount.rstrip("/") + "/"):
            return mount
    return None


def missing_under(
    host_root: HostRoot, registry: PluginRegistry, names: Iterable[str]
) -> list[tuple[str, str]]:
    """(plugin, path) for each declared directory the host root does not hold."""
    missing: list[tuple[str, str]] = []
    for name in sorted(set(names)):
        for path in declared_host_paths(registry, name) or ():
            if not os.path.isdir(host_root.path(path)):
                missing.append((name, path))
    return missing


def warn_missing(host_root: HostRoot, registry: PluginRegistry, names: Iterable[str]) -> None:
    """One WARNING per declared directory the host root lacks, naming the fix.

    The sidecar still starts (a plugin may serve its other answers without
    it), but the claims that need the directory would fail one by one with
    a message about a file; this says it once, at start, in deployment terms.
    """
    try:
        missing = missing_under(host_root, registry, names)
    except HostPathError as exc:
        log.warning("%s", exc)
        return
    for plugin, path in missing:
        log.warning(
            "plugin %s reads %s on the node, but %s does not exist under the host root %s: "
            "mount the node's %s read-only at %s in the sidecar (deploy/overlays has an "
            "overlay per kind of node that does; see docs/byodp-server.md)",
            plugin,
            path,
            path,
            host_root.root,
            path,
            host_root.path(path),
        )
