"""The plugins: a pluggy ``PluginManager`` over the ``dranet_cloud`` entry-point group.

Roles are read off the hooks a plugin implements rather than declared
separately, so a plugin can never claim a role it has no code for.  A plugin
whose ``@hookimpl`` names no hook is refused when it is registered (pluggy's
``check_pending``), and the host calls a plugin's hook one way:
:meth:`PluginRegistry.call`, through pluggy's own call path, so the hook-call
monitoring that feeds :attr:`PluginRegistry.error_observers` sees every call.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pluggy

from dranet_cloud.contract import hookspecs
from dranet_cloud.contract.settings import did_you_mean
from dranet_cloud.toolkit.errors import ConfigError, PluginError, UnknownHookError

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "dranet_cloud"

NONE_NAMES = {"none", ""}

ROLE_HOOKS = {
    "cloud": ("instance_properties",),
    "profile": ("profile_config", "release_profile_config"),
}


@dataclass(frozen=True)
class PluginInfo:
    """An installed plugin as ``dranet-cloud plugins`` lists it."""

    name: str
    distribution: str
    version: str
    roles: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "roles": list(self.roles)}


# The hooks of the contract: the functions of dranet_cloud.contract.hookspecs pluggy reads as specs.
_SPEC_READER = pluggy.PluginManager(hookspecs.PROJECT)
HOOK_NAMES = frozenset(n for n in dir(hookspecs) if _SPEC_READER.parse_hookspec_opts(hookspecs, n))


def _unknown_hook(plugin: str, hook: str, impl: pluggy.HookImpl) -> str:
    specname = impl.opts.get("specname")
    marked = f"@hookimpl(specname={specname!r})" if specname else "@hookimpl"
    hint = did_you_mean(hook, HOOK_NAMES) or ("; the hooks are " + ", ".join(sorted(HOOK_NAMES)))
    return (
        f"plugin {plugin}: function {impl.function.__name__} is marked {marked} but {hook!r} "
        f"is no hook{hint} (fix the name in the plugin, or uninstall its distribution)"
    )


def installed_versions() -> list[tuple[str, str]]:
    """``(distribution, version)`` of the core, then of every plugin distribution."""
    plugins = {
        (ep.dist.name, ep.dist.version)
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
        if ep.dist is not None
    }
    return [("dranet-cloud", importlib.metadata.version("dranet-cloud")), *sorted(plugins)]


class PluginRegistry(pluggy.PluginManager):
    """The installed plugins, their roles, and the one way the host calls them.

    A pluggy manager of the ``dranet_cloud`` hooks that loads the
    ``dranet_cloud`` entry points; what it adds is the host's view: roles read
    off the implemented hooks, names and aliases resolved from flags, one
    plugin's hook called at a time (:meth:`call`), and the plugins refused at
    load time (:attr:`load_errors`).
    """

    def __init__(
        self, *, load_entry_points: bool = True, strict: bool = True, blocked: Iterable[str] = ()
    ):
        """``strict``: raise the first :class:`PluginError` of the installed plugins
        (a misspelt hook); otherwise only record them in :attr:`load_errors`
        (``dranet-cloud plugins`` lists the others, then reports them).
        ``blocked``: entry-point names never loaded (pluggy's ``set_blocked``)."""
        super().__init__(hookspecs.PROJECT)
        # (plugin, hook) -> pluggy's caller of that plugin's implementations only.
        self._callers: dict[tuple[str, str], pluggy.HookCaller] = {}
        # (distribution, version) of plugins registered directly, not by entry point.
        self._local: dict[str, tuple[str, str]] = {}
        # Told of every exception a plugin's hook raises (plugin, hook,
        # exception), through pluggy's hook-call monitoring: /metrics counts them.
        self.error_observers: list[Callable[[str, str, BaseException], None]] = []
        # Installed plugins refused when registered, by entry-point name.
        self.load_errors: dict[str, PluginError] = {}
        self.add_hookspecs(hookspecs)
        self.add_hookcall_monitoring(lambda hook, impls, kwargs: None, self._observe)
        for name in blocked:
            self.set_blocked(name)
        if load_entry_points:
            self.load_entry_points()
            if strict and self.load_errors:
                raise next(iter(self.load_errors.values()))

    def load_entry_points(self) -> None:
        """Load the ``dranet_cloud`` entry points with pluggy's loader.

        pluggy stops at the first plugin that fails to import or is refused;
        then they are loaded again one name at a time, so that one broken
        vendor package (logged and skipped) or refused plugin (recorded in
        :attr:`load_errors`) does not keep the others from the node.
        """
        try:
            self.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
            return
        except Exception:  # which one failed is found below
            pass
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                self.load_setuptools_entrypoints(ENTRY_POINT_GROUP, name=ep.name)
            except PluginError as exc:
                self.load_errors[ep.name] = exc
            except Exception as exc:  # a broken vendor package must not break the node
                log.warning("plugin %s (%s) failed to import: %s", ep.name, ep.value, exc)

    def register(
        self,
        plugin: object,
        name: str | None = None,
        distribution: str = "local",
        version: str = "0",
    ) -> str | None:
        """Register a plugin (pluggy's loader, tests, built-ins); its name, or
        ``None`` when the name is blocked.

        Raises :class:`~dranet_cloud.toolkit.errors.UnknownHookError` for a misspelt
        hook (refused by ``check_pending``) and :class:`PluginError` for
        anything else pluggy refuses (an argument the hook does not pass).
        """
        try:
            registered = super().register(plugin, name)
        except pluggy.PluginValidationError as exc:
            label = name or self.get_canonical_name(plugin)
            detail = str(exc).replace("\n", "; ")
            raise PluginError(
                f"plugin {label}: {detail} (fix the plugin, or uninstall its distribution)"
            ) from exc
        if registered is None:
            return None
        self._callers.clear()  # a subset caller built before would miss it
        try:
            self.check_pending()
        except pluggy.PluginValidationError:
            hook, impl = next(
                (caller.name, impl)
                for caller in self.get_hookcallers(plugin) or ()
                if not caller.has_spec()
                for impl in caller.get_hookimpls()
                if impl.plugin is plugin and not impl.optionalhook
            )
            self.unregister(plugin)
            raise UnknownHookError(_unknown_hook(registered, hook, impl)) from None
        self._local[registered] = (distribution, version)
        return registered

    def unregister(self, plugin: object | None = None, name: str | None = None) -> Any | None:
        self._callers.clear()
        return super().unregister(plugin, name)

    def _observe(
        self,
        outcome: pluggy.Result[object],
        hook: str,
        impls: Sequence[pluggy.HookImpl],
        kwargs: Mapping[str, object],
    ) -> None:
        """Hook-call monitoring's ``after``: tell the observers of a plugin's exception."""
        exc = outcome.exception
        if exc is None:
            return
        plugin = ",".join(dict.fromkeys(impl.plugin_name for impl in impls))
        for observe in self.error_observers:
            try:
                observe(plugin, hook, exc)
            except Exception:
                log.exception("plugin error observer %r failed", observe)

    def names(self) -> list[str]:
        return sorted(n for n, p in self.list_name_plugin() if p is not None)

    def implements(self, name: str, hook: str) -> bool:
        caller: pluggy.HookCaller | None = getattr(self.hook, hook, None)
        return caller is not None and any(i.plugin_name == name for i in caller.get_hookimpls())

    def roles(self, name: str) -> tuple[str, ...]:
        roles = [
            r for r, hooks in ROLE_HOOKS.items() if all(self.implements(name, h) for h in hooks)
        ]
        if "cloud" not in roles and self.implements(name, "device_attributes"):
            roles.append("enricher")
        return tuple(roles)

    def info(self) -> list[PluginInfo]:
        dists = {
            self.get_name(p): (d.project_name, d.version) for p, d in self.list_plugin_distinfo()
        }
        out = []
        for name in self.names():
            dist, version = dists.get(name) or self._local.get(name, ("?", "?"))
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
        if self.get_plugin(name) is None:
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

    def call(self, name: str, hook: str, **kwargs: Any) -> Any:
        """Call hook ``hook`` of plugin ``name`` only, with keyword arguments.

        The host asks exactly one plugin per decision: pluggy's subset caller
        of the hook without every other plugin, kept until a plugin is
        registered or unregistered.
        """
        caller = self._callers.get((name, hook))
        if caller is None:
            others = [p for n, p in self.list_name_plugin() if n != name and p is not None]
            caller = self._callers[name, hook] = self.subset_hook_caller(hook, others)
        return caller(**kwargs)
