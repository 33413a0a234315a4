"""Finding plugins: the ``dranet_cloud`` entry-point group, and their roles.

Roles are read off the hooks a plugin implements rather than declared
separately, so a plugin can never claim a role it has no code for.
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any

from . import hookspecs
from ._hookmarks import (
    PROJECT,
    SPEC_ATTR,
    ModuleHooks,
    Signature,
    call_with,
    is_plain,
    module_hooks,
    plain_signature,
)
from .errors import ConfigError, PluginError, UnknownHookError
from .lazylog import LazyLogger

if TYPE_CHECKING:
    from collections.abc import Callable

    import pluggy

log = LazyLogger(__name__)

ENTRY_POINT_GROUP = "dranet_cloud"

NONE_NAMES = {"none", ""}

ROLE_HOOKS = {
    "cloud": ("instance_properties",),
    "profile": ("profile_config", "release_profile_config"),
}


# Hooks the registry may call without pluggy while no PluginManager exists
# (auto-detection on a node with no evidence never needs one).
DIRECT_HOOKS = frozenset({"local_evidence"})


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


def _marked_functions(plugin: object) -> list[tuple[str, str, dict[str, Any]]]:
    """``(function name, hook it names, options)`` for each ``@hookimpl`` of ``plugin``.

    Read as pluggy's ``register`` reads a plugin: a module from its markers
    (:func:`dranet_cloud._hookmarks.module_hooks`), anything else by pluggy's
    own ``parse_hookimpl_opts``.
    """
    hooks = module_hooks(plugin)
    if hooks is not None:
        return [(f.__name__, hook, opts) for hook, impls in hooks.items() for f, opts in impls]
    import pluggy

    parser = pluggy.PluginManager(PROJECT)
    out = []
    for attr in dir(plugin):
        opts = parser.parse_hookimpl_opts(plugin, attr)
        if opts is not None:
            out.append((attr, opts.get("specname") or attr, dict(opts)))
    return out


def check_hook_names(plugin: object, name: str | None = None) -> None:
    """Refuse a plugin with an ``@hookimpl`` that names no hook (a misspelt hook).

    pluggy registers such a function silently, with no spec, and never calls
    it: the plugin then loads without the role or the answer its author
    wrote.  This is ``PluginManager.check_pending()`` for one plugin (an
    unknown hook is allowed only with ``optionalhook=True``), with a message
    that names the plugin (``name``, else the module's name), the function
    and the closest hook.  Raises :class:`~dranet_cloud.errors.UnknownHookError`.
    """
    label = name or getattr(plugin, "__name__", None) or type(plugin).__name__
    for func, hook, opts in _marked_functions(plugin):
        if hook in HOOK_NAMES or opts.get("optionalhook"):
            continue
        from .settings import did_you_mean  # error path only: settings imports logging

        specname = opts.get("specname")
        marked = f"@hookimpl(specname={specname!r})" if specname else "@hookimpl"
        hint = did_you_mean(hook, HOOK_NAMES) or (
            "; the hooks are " + ", ".join(sorted(HOOK_NAMES))
        )
        raise UnknownHookError(
            f"plugin {label}: function {func} is marked {marked} but {hook!r} is no hook"
            f"{hint} (fix the name in the plugin, or uninstall its distribution)"
        )


class PluginRegistry:
    """A pluggy manager plus per-plugin routing.

    The host calls exactly one plugin per decision, so it uses
    :meth:`caller` (a pluggy subset hook caller) instead of broadcasting.
    The manager is created on first use: until then, roles are read off the
    plugin modules' markers and :data:`DIRECT_HOOKS` are called directly, so
    a node with no evidence never imports pluggy (nor :mod:`inspect`).
    """

    def __init__(
        self,
        pm: pluggy.PluginManager | None = None,
        *,
        load_entry_points: bool = True,
        strict: bool = True,
    ):
        """``strict``: raise the first :class:`PluginError` of the installed plugins
        (a misspelt hook); otherwise only record them in :attr:`load_errors`
        (``dranet-cloud plugins`` lists the others, then reports them)."""
        self._pm = pm
        self._pm_lock = threading.Lock()
        if pm is not None:
            pm.add_hookspecs(hookspecs)
        # Loaded plugins not yet handed to the manager, in load order.
        self._pending: dict[str, object] = {}
        self._marks: dict[str, ModuleHooks | None] = {}
        self._dist: dict[str, tuple[str, str]] = {}
        self._callers: dict[tuple[str, str], Any] = {}
        self._singles: dict[tuple[str, str], Signature | None] = {}
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
        """The pluggy manager, created (and given the loaded plugins) on first use.

        Detection confirms candidates in threads, so two threads may get here
        at once.  The manager is published only once every loaded plugin is
        registered with it: until then :meth:`_hooks_of` answers from the
        plugins' markers, never from a manager that lacks a plugin (which
        made a detected cloud look like it had no hooks, and no roles).
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
            for name, module in list(self._pending.items()):
                pm.register(module, name=name)
            self._pm = pm
            self._pending.clear()
            self._forget_routes()
        return pm

    def _forget_routes(self) -> None:
        """Drop the per-plugin callers: a plugin registered since would be missed."""
        self._callers.clear()
        self._singles.clear()

    def _hooks_of(self, name: str) -> ModuleHooks | None:
        """The markers of a plugin not yet in the manager; ``None``: ask pluggy."""
        if self._pm is not None or name not in self._pending:
            return None
        if name not in self._marks:
            self._marks[name] = module_hooks(self._pending[name])
        return self._marks[name]

    def load_entry_points(self) -> None:
        from .entrypoints import plugin_entry_points

        for ep in plugin_entry_points(ENTRY_POINT_GROUP):
            if ep.name in self._pending or (self._pm is not None and self._pm.has_plugin(ep.name)):
                continue
            try:
                module = ep.load()
            except Exception as exc:  # a broken vendor package must not break the node
                log.warning("plugin %s (%s) failed to import: %s", ep.name, ep.value, exc)
                continue
            try:
                check_hook_names(module, ep.name)
            except PluginError as exc:
                self.load_errors[ep.name] = exc
                continue
            if self._pm is None:
                self._pending[ep.name] = module
            else:
                self._pm.register(module, name=ep.name)
                self._forget_routes()
            self._dist[ep.name] = (ep.distribution, ep.version)

    def register(
        self,
        module: ModuleType | object,
        name: str,
        distribution: str = "local",
        version: str = "0",
    ) -> None:
        """Register a plugin object directly (tests, built-ins).

        Raises :class:`~dranet_cloud.errors.UnknownHookError` for a misspelt hook.
        """
        check_hook_names(module, name)
        self.pm.register(module, name=name)
        self._dist[name] = (distribution, version)
        self._forget_routes()

    def names(self) -> list[str]:
        if self._pm is None:
            return sorted(self._pending)
        return sorted(n for n, _ in self.pm.list_name_plugin())

    def implements(self, name: str, hook: str) -> bool:
        hooks = self._hooks_of(name)
        if hooks is not None:
            return hook in hooks
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
        signature: Signature | None = None
        if self._pm is None:
            hooks = self._hooks_of(name) if hook in DIRECT_HOOKS else None
            impls = (hooks or {}).get(hook, [])
            if len(impls) == 1 and is_plain(impls[0][1]):
                signature = plain_signature(impls[0][0])
        else:
            signature = self._single_impl(name, hook)
        if signature is not None:
            called, result = call_with(signature, kwargs)
            if called:
                return result
        return self.caller(name, hook)(**kwargs)

    def _single_impl(self, name: str, hook: str) -> Signature | None:
        """``(function, argument names, names with defaults)`` when plugin ``name``
        has exactly one plain implementation of ``hook``: calling it with those
        arguments (the defaulted ones when given) is what pluggy would do.

        Every hook here is ``firstresult``, so pluggy returns that one
        implementation's result as it is; without wrappers there is nothing
        else for it to do, and its call machinery was a measurable part of a
        claim.  Anything else (wrappers, several implementations) goes
        through pluggy.
        """
        key = (name, hook)
        if key in self._singles:
            return self._singles[key]
        found: Signature | None = None
        caller = self.caller(name, hook)
        impls = caller.get_hookimpls()
        spec = caller.spec
        if (
            len(impls) == 1
            and not (impls[0].wrapper or impls[0].hookwrapper)
            and spec is not None
            and spec.opts.get("firstresult")
        ):
            impl = impls[0]
            found = (impl.function, tuple(impl.argnames), tuple(impl.kwargnames))
        self._singles[key] = found
        return found
