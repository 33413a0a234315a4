"""Finding plugins: the ``dranet_cloud`` entry-point group, and their roles.

Roles are read off the hooks a plugin implements rather than declared
separately, so a plugin can never claim a role it has no code for.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pluggy

from . import hookspecs
from .errors import ConfigError
from .lazylog import LazyLogger

log = LazyLogger(__name__)

ENTRY_POINT_GROUP = "dranet_cloud"

NONE_NAMES = {"none", ""}

ROLE_HOOKS = {
    "cloud": ("instance_properties",),
    "profile": ("profile_config", "release_profile_config"),
}


@dataclass(frozen=True)
class PluginInfo:
    name: str
    distribution: str
    version: str
    roles: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "roles": list(self.roles),
        }


class PluginRegistry:
    """A pluggy manager plus per-plugin routing.

    The host calls exactly one plugin per decision, so it uses
    :meth:`caller` (a pluggy subset hook caller) instead of broadcasting.
    """

    def __init__(self, pm: pluggy.PluginManager | None = None, *, load_entry_points: bool = True):
        self.pm = pm or pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self._dist: dict[str, tuple[str, str]] = {}
        self._callers: dict[tuple[str, str], Any] = {}
        if load_entry_points:
            self.load_entry_points()

    def load_entry_points(self) -> None:
        from .entrypoints import plugin_entry_points

        for ep in plugin_entry_points(ENTRY_POINT_GROUP):
            if self.pm.has_plugin(ep.name):
                continue
            try:
                module = ep.load()
            except Exception as exc:  # a broken vendor package must not break the node
                log.warning("plugin %s (%s) failed to import: %s", ep.name, ep.value, exc)
                continue
            self.pm.register(module, name=ep.name)
            self._dist[ep.name] = (ep.distribution, ep.version)

    def register(
        self,
        module: ModuleType | object,
        name: str,
        distribution: str = "local",
        version: str = "0",
    ) -> None:
        """Register a plugin object directly (tests, built-ins)."""
        self.pm.register(module, name=name)
        self._dist[name] = (distribution, version)
        self._callers.clear()

    def names(self) -> list[str]:
        return sorted(n for n, _ in self.pm.list_name_plugin())

    def implements(self, name: str, hook: str) -> bool:
        plugin = self.pm.get_plugin(name)
        if plugin is None:
            return False
        caller = getattr(self.pm.hook, hook)
        return any(impl.plugin is plugin for impl in caller.get_hookimpls())

    def roles(self, name: str) -> tuple[str, ...]:
        roles = [
            r for r, hooks in ROLE_HOOKS.items() if all(self.implements(name, h) for h in hooks)
        ]
        if "cloud" not in roles and self.implements(name, "device_attributes"):
            roles.append("enricher")
        return tuple(roles)

    def info(self) -> list[PluginInfo]:
        out = []
        for name in self.names():
            dist, version = self._dist.get(name, ("?", "?"))
            out.append(PluginInfo(name, dist, version, self.roles(name)))
        return out

    def with_role(self, role: str) -> list[str]:
        return [n for n in self.names() if role in self.roles(n)]

    def resolve(
        self, requested: str, *, flag: str, allow_none: bool = True, also: tuple[str, ...] = ()
    ) -> str | None:
        """Map a DRANET-style name to an installed plugin; ``None`` for none.

        ``also``: other words the flag accepts (``cloud`` for
        ``--profile-provider``), listed and suggested on a typo.
        """
        key = requested.strip().lower()
        if key in NONE_NAMES and allow_none:
            return None
        name = self.aliases().get(key, key)
        if self.pm.get_plugin(name) is None:
            from .settings import did_you_mean

            installed = ", ".join(self.names()) or "no plugins"
            # Suggest only names that exist: a close installed name or alias,
            # else installing the plugin's own distribution (never a guessed
            # package name, which might not exist or belong to someone else).
            hint = did_you_mean(key, [*self.names(), *self.aliases(), *also])
            fix = hint or (
                "; install the distribution that provides that plugin next to dranet-cloud "
                "(`dranet-cloud plugins` lists what is installed)"
            )
            raise ConfigError(
                f"{flag} {requested!r} names no installed plugin (installed: {installed}"
                + "".join(f", or {w!r}" for w in (*also, *(("none",) if allow_none else ())))
                + f"){fix}"
            )
        return name

    def aliases(self) -> dict[str, str]:
        """Alias (lower-case) -> plugin name, from each plugin's ``provider_aliases``."""
        out: dict[str, str] = {}
        for name in self.names():
            if not self.implements(name, "provider_aliases"):
                continue
            for alias in self.call(name, "provider_aliases") or []:
                out.setdefault(str(alias).lower(), name)
        return out

    def caller(self, name: str, hook: str) -> Any:
        """A hook caller that reaches only plugin ``name``."""
        key = (name, hook)
        if key not in self._callers:
            others = [p for n, p in self.pm.list_name_plugin() if n != name]
            self._callers[key] = self.pm.subset_hook_caller(hook, remove_plugins=others)
        return self._callers[key]

    def call(self, name: str, hook: str, **kwargs: Any) -> Any:
        return self.caller(name, hook)(**kwargs)
