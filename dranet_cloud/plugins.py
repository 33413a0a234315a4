"""The plugins: found in the ``dranet_cloud`` entry-point group, checked, called.

Roles are read off the hooks a plugin implements rather than declared
separately, so a plugin can never claim a role it has no code for.  A plugin
whose ``@hookimpl`` names no hook is refused when it is loaded
(:func:`check_hook_names`), and every hook is called one way:
:meth:`PluginRegistry.call`.
"""

from __future__ import annotations

import logging
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any

from . import hookspecs
from ._hookmarks import PROJECT, SPEC_ATTR, Impl, Signature, call_with, is_plain, plugin_hooks
from .errors import ConfigError, PluginError, UnknownHookError

if TYPE_CHECKING:
    from collections.abc import Callable

    import pluggy

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "dranet_cloud"

NONE_NAMES = {"none", ""}

ROLE_HOOKS = {
    "cloud": ("instance_properties",),
    "profile": ("profile_config", "release_profile_config"),
}


class PluginInfo:
    """An installed plugin as ``dranet-cloud plugins`` lists it."""

    __slots__ = ("distribution", "name", "roles", "version")

    def __init__(self, name: str, distribution: str, version: str, roles: tuple[str, ...]):
        self.name = name
        self.distribution = distribution
        self.version = version
        self.roles = roles

    def _key(self) -> tuple[str, str, str, tuple[str, ...]]:
        return (self.name, self.distribution, self.version, self.roles)

    def __eq__(self, other: object) -> bool:
        return type(other) is PluginInfo and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return "PluginInfo(name={!r}, distribution={!r}, version={!r}, roles={!r})".format(
            *self._key()
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "roles": list(self.roles),
        }


# The hooks of the contract: the functions of dranet_cloud.hookspecs marked as specs.
HOOK_NAMES = frozenset(n for n, f in vars(hookspecs).items() if hasattr(f, SPEC_ATTR))


def check_hook_names(plugin: object, name: str | None = None) -> None:
    """Refuse a plugin with an ``@hookimpl`` that names no hook (a misspelt hook).

    pluggy registers such a function silently, with no spec, and never calls
    it: the plugin then loads without the role or the answer its author
    wrote.  This is ``PluginManager.check_pending()`` for one plugin (an
    unknown hook is allowed only with ``optionalhook=True``), with a message
    that names the plugin (``name``, else the module's name), the function
    and the closest hook.  Raises :class:`~dranet_cloud.errors.UnknownHookError`.

    It also refuses, as pluggy's ``register`` does, an implementation that
    requires an argument its hook does not pass (:class:`PluginError`).
    """
    label = name or getattr(plugin, "__name__", None) or type(plugin).__name__
    _check_hooks(label, plugin_hooks(plugin))


def _check_hooks(label: str, hooks: dict[str, list[Impl]]) -> None:
    for hook, impls in hooks.items():
        for func, signature, opts in impls:
            if hook not in HOOK_NAMES:
                if not opts.get("optionalhook"):
                    raise UnknownHookError(_unknown_hook(label, func, hook, opts))
                continue
            extra = [a for a in signature[1] if a not in _HOOK_ARGS[hook]] if signature else []
            if extra:
                raise PluginError(
                    f"plugin {label}: function {func} (hook {hook!r}) requires "
                    f"{', '.join(map(repr, extra))}, which the hook does not pass (it passes "
                    f"{', '.join(_HOOK_ARGS[hook]) or 'nothing'}); drop them or give them defaults"
                )


def _spec_args(hook: str) -> tuple[str, ...]:
    code = getattr(hookspecs, hook).__code__
    return tuple(code.co_varnames[: code.co_argcount])


# Hook -> the arguments the host passes it (its spec's parameters).
_HOOK_ARGS = {n: _spec_args(n) for n in HOOK_NAMES}


def _unknown_hook(label: str, func: str, hook: str, opts: dict[str, Any]) -> str:
    from .settings import did_you_mean  # error path only: settings imports logging

    specname = opts.get("specname")
    marked = f"@hookimpl(specname={specname!r})" if specname else "@hookimpl"
    hint = did_you_mean(hook, HOOK_NAMES) or ("; the hooks are " + ", ".join(sorted(HOOK_NAMES)))
    return (
        f"plugin {label}: function {func} is marked {marked} but {hook!r} is no hook"
        f"{hint} (fix the name in the plugin, or uninstall its distribution)"
    )


class PluginRegistry:
    """The installed plugins, their roles, and the one way the host calls them.

    The host asks exactly one plugin per decision, and every hook is
    ``firstresult``, so :meth:`call` reaches one plugin's one implementation:
    it calls it directly with the arguments pluggy would pass.  Only what
    pluggy alone can run (a wrapper, several implementations of one hook)
    goes through a pluggy manager, created then; a node that needs none,
    like every ``detect``, never imports pluggy (nor :mod:`inspect`).
    Roles and routes are read off each plugin by
    :func:`dranet_cloud._hookmarks.plugin_hooks`, which reads them as pluggy
    does.
    """

    def __init__(self, *, load_entry_points: bool = True, strict: bool = True):
        """``strict``: raise the first :class:`PluginError` of the installed plugins
        (a misspelt hook); otherwise only record them in :attr:`load_errors`
        (``dranet-cloud plugins`` lists the others, then reports them)."""
        self._pm: pluggy.PluginManager | None = None
        self._pm_lock = threading.Lock()
        # Every plugin, by name, in load order; those not yet given to the manager.
        self._plugins: dict[str, object] = {}
        self._pending: dict[str, object] = {}
        self._hooks: dict[str, dict[str, list[Impl]]] = {}
        self._dist: dict[str, tuple[str, str]] = {}
        self._routes: dict[tuple[str, str], Signature | None] = {}
        self._callers: dict[tuple[str, str], Any] = {}
        # Told of every exception a plugin's hook raises through call()
        # (plugin, hook, exception): /metrics counts them.  Cheaper than
        # pluggy's call monitoring, which wraps every call, failing or not.
        self.error_observers: list[Callable[[str, str, BaseException], None]] = []
        # Installed plugins refused by check_hook_names, by entry-point name.
        self.load_errors: dict[str, PluginError] = {}
        if load_entry_points:
            self.load_entry_points()
            if strict and self.load_errors:
                raise next(iter(self.load_errors.values()))

    @property
    def pm(self) -> pluggy.PluginManager:
        """The pluggy manager, created (and given every plugin) on first use.

        Detection confirms candidates in threads, so two threads may get here
        at once; the lock hands each plugin to the manager once.  Roles and
        routes never wait for it: they are read off the plugins themselves.
        """
        pm = self._pm
        if pm is not None and not self._pending:
            return pm
        with self._pm_lock:
            if self._pm is None:
                import pluggy

                pm = pluggy.PluginManager(PROJECT)
                pm.add_hookspecs(hookspecs)
            else:
                pm = self._pm
            for name, plugin in list(self._pending.items()):
                pm.register(plugin, name=name)
            self._pm = pm
            self._pending.clear()
            self._callers.clear()  # a subset caller built before would miss a plugin
        return pm

    def _add(self, plugin: object, name: str, distribution: str, version: str) -> None:
        """Accept a plugin whose hooks name real hooks (else raise :class:`PluginError`)."""
        hooks = plugin_hooks(plugin)
        _check_hooks(name, hooks)  # check_hook_names, reading the plugin once
        self._plugins[name] = self._pending[name] = plugin
        self._dist[name] = (distribution, version)
        self._hooks[name] = hooks
        self._routes = {k: v for k, v in self._routes.items() if k[0] != name}

    def load_entry_points(self) -> None:
        from .entrypoints import plugin_entry_points

        for ep in plugin_entry_points(ENTRY_POINT_GROUP):
            if ep.name in self._plugins:
                continue
            try:
                module = ep.load()
            except Exception as exc:  # a broken vendor package must not break the node
                log.warning("plugin %s (%s) failed to import: %s", ep.name, ep.value, exc)
                continue
            try:
                self._add(module, ep.name, ep.distribution, ep.version)
            except PluginError as exc:
                self.load_errors[ep.name] = exc

    def register(
        self,
        module: ModuleType | object,
        name: str,
        distribution: str = "local",
        version: str = "0",
    ) -> None:
        """Register a plugin object directly (tests, built-ins).

        Raises :class:`~dranet_cloud.errors.PluginError` for a misspelt hook, and
        pluggy's own errors for anything else its manager refuses.
        """
        if name in self._plugins:
            raise ValueError(f"a plugin is already registered as {name!r}")
        self._add(module, name, distribution, version)
        try:
            self.pm  # noqa: B018 - pluggy validates it now, as it always did
        except BaseException:
            del self._plugins[name]
            self._pending.pop(name, None)
            raise

    def names(self) -> list[str]:
        return sorted(self._plugins)

    def get_plugin(self, name: str) -> object | None:
        """The plugin object (module) registered as ``name``."""
        return self._plugins.get(name)

    def implements(self, name: str, hook: str) -> bool:
        return hook in self._hooks.get(name, {})

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
        if name not in self._plugins:
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

    def call(self, name: str, hook: str, **kwargs: Any) -> Any:
        """Call hook ``hook`` of plugin ``name`` only, with keyword arguments."""
        try:
            return self._call(name, hook, kwargs)
        except BaseException as exc:
            for observe in self.error_observers:
                try:
                    observe(name, hook, exc)
                except Exception:
                    log.exception("plugin error observer %r failed", observe)
            raise

    def _call(self, name: str, hook: str, kwargs: dict[str, Any]) -> Any:
        key = (name, hook)
        try:
            route = self._routes[key]
        except KeyError:
            route = self._routes[key] = self._route(name, hook)
        if route is not None:
            called, result = call_with(route, kwargs)
            if called:
                return result
        return self._caller(name, hook)(**kwargs)

    def _route(self, name: str, hook: str) -> Signature | None:
        """How to call plugin ``name``'s ``hook`` directly, or ``None``: through pluggy.

        Every hook of the contract is ``firstresult``, so for one plain
        implementation pluggy returns that implementation's result as it is;
        its call machinery was a measurable part of a claim.  Anything else
        (a wrapper, several implementations, a name that is no hook) is
        pluggy's to run.
        """
        impls = self._hooks.get(name, {}).get(hook, [])
        if hook in HOOK_NAMES and len(impls) == 1 and is_plain(impls[0][2]):
            return impls[0][1]
        return None

    def _caller(self, name: str, hook: str) -> Any:
        """A pluggy hook caller that reaches only plugin ``name``."""
        key = (name, hook)
        pm = self.pm
        if key not in self._callers:
            others = [p for n, p in pm.list_name_plugin() if n != name]
            self._callers[key] = pm.subset_hook_caller(hook, remove_plugins=others)
        return self._callers[key]
