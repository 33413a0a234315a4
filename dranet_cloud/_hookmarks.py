"""pluggy's hook markers, and its reading of a plugin module, without importing pluggy.

Why: every ``dranet-cloud detect`` (each node start) imports every plugin
module and asks each for ``local_evidence``; importing pluggy (which brings
:mod:`inspect`) costs more than a bare-metal node's whole detection.  So
plugin modules are marked, read and called by the code here, and a pluggy
``PluginManager`` is created only for what pluggy alone can run (a wrapper,
several implementations of one hook) or read (a plugin that is not a module).

The rule: everything here gives exactly pluggy's answer, so a plugin behaves
the same whether pluggy or this module handles it.

* :data:`hookimpl` sets the same attribute, holding the same options dict, as
  ``pluggy.HookimplMarker("dranet_cloud")``, and :func:`firstresult_spec` the
  same as ``pluggy.HookspecMarker("dranet_cloud")(firstresult=True)``.
* :func:`plugin_hooks` finds a module's marked functions and the hook each
  implements (``specname`` or the function's name), as
  ``PluginManager.register`` does; anything else (a plugin object, a marked
  static/class/bound method) it hands to pluggy's own parser.
* :func:`plain_signature` and :func:`call_with` pass a single implementation
  the arguments pluggy would (required ones by position, defaulted ones only
  when given); ``None``/``False`` hands the call to pluggy, which then
  raises its own error.

How it is tested: ``tests/test_hookmarks.py`` puts each of these beside
pluggy itself (the installed version) on the same functions and plugins:
the options dicts must be equal, the hooks found must be the ones pluggy
registers, the arguments passed must be the ones pluggy passes, and
:func:`dranet_cloud.plugins.check_hook_names` must refuse exactly the
plugins pluggy's ``check_pending()`` (unknown hook) and ``register``
(argument the hook does not pass) refuse.  A pluggy upgrade that changes
any of them fails that test.
"""

from __future__ import annotations

from types import FunctionType, MethodType, ModuleType
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypedDict, TypeVar, Unpack

    _F = TypeVar("_F", bound=Callable[..., object])

    class _Options(TypedDict, total=False):
        """The options of ``pluggy.HookimplMarker.__call__``."""

        wrapper: bool
        hookwrapper: bool
        optionalhook: bool
        tryfirst: bool
        trylast: bool
        specname: str | None


PROJECT = "dranet_cloud"
# The attributes pluggy's markers set and its PluginManager reads.
IMPL_ATTR = PROJECT + "_impl"
SPEC_ATTR = PROJECT + "_spec"


# pluggy's options and their defaults (the typed form, _Options, is for mypy only).
IMPL_DEFAULTS: dict[str, Any] = {
    "wrapper": False,
    "hookwrapper": False,
    "optionalhook": False,
    "tryfirst": False,
    "trylast": False,
    "specname": None,
}


class HookimplMarker:
    """``pluggy.HookimplMarker(PROJECT)`` without importing pluggy.

    It sets exactly the options dict pluggy's sets, so a ``PluginManager``
    created later parses plugin modules unchanged.  Options are keywords
    (``@hookimpl(specname=...)``), as every plugin passes them.
    """

    __slots__ = ("project_name",)

    def __init__(self, project_name: str) -> None:
        self.project_name = project_name

    @overload
    def __call__(self, function: _F, /, **options: Unpack[_Options]) -> _F: ...

    @overload
    def __call__(
        self, function: None = ..., /, **options: Unpack[_Options]
    ) -> Callable[[_F], _F]: ...

    def __call__(
        self, function: _F | None = None, /, **options: Unpack[_Options]
    ) -> _F | Callable[[_F], _F]:
        unknown = set(options) - set(IMPL_DEFAULTS)
        if unknown:
            raise TypeError(f"hookimpl() got unexpected options {sorted(unknown)}")
        opts = {**IMPL_DEFAULTS, **options}

        def mark(func: _F) -> _F:
            setattr(func, self.project_name + "_impl", dict(opts))
            return func

        return mark if function is None else mark(function)


hookimpl = HookimplMarker(PROJECT)


def firstresult_spec(func: _F) -> _F:
    """``pluggy.HookspecMarker(PROJECT)(firstresult=True)``, without pluggy."""
    opts = {"firstresult": True, "historic": False, "warn_on_impl": None, "warn_on_impl_args": None}
    setattr(func, SPEC_ATTR, opts)
    return func


# (function, required argument names, defaulted argument names)
Signature = tuple[Any, tuple[str, ...], tuple[str, ...]]

# One implementation of a hook in a plugin: the function's name in the plugin,
# how to call it directly (None: only pluggy can), its marker's options.
Impl = tuple[str, Signature | None, dict[str, Any]]


def plugin_hooks(plugin: object) -> dict[str, list[Impl]]:
    """Hook name -> ``plugin``'s implementations, as pluggy's ``register`` reads them.

    The hook is the marker's ``specname``, else the function's name.  A
    module (every entry point) is read here, without pluggy; anything else
    (a plugin object, a module marking a static, class or bound method) by
    pluggy's own ``parse_hookimpl_opts`` and ``HookImpl``.
    """
    found = _module_hooks(plugin)
    if found is not None:
        return found
    import pluggy

    parser = pluggy.PluginManager(PROJECT)
    out: dict[str, list[Impl]] = {}
    for attr in dir(plugin):
        marked = parser.parse_hookimpl_opts(plugin, attr)
        if marked is None:
            continue
        opts: dict[str, Any] = {**IMPL_DEFAULTS, **marked}
        impl = pluggy.HookImpl(plugin, "", getattr(plugin, attr), opts)  # type: ignore[arg-type]
        signature = (impl.function, tuple(impl.argnames), tuple(impl.kwargnames))
        out.setdefault(opts["specname"] or attr, []).append((attr, signature, opts))
    return out


def _module_hooks(plugin: object) -> dict[str, list[Impl]] | None:
    """:func:`plugin_hooks` of a module, or ``None`` when only pluggy can tell."""
    if type(plugin) is not ModuleType:
        return None
    out: dict[str, list[Impl]] = {}
    for attr, value in vars(plugin).items():
        if isinstance(value, FunctionType):
            opts = getattr(value, IMPL_ATTR, None)
            if isinstance(opts, dict):
                impl = (attr, plain_signature(value), opts)
                out.setdefault(opts.get("specname") or attr, []).append(impl)
        elif isinstance(value, (staticmethod, classmethod, MethodType)) and (
            getattr(value, IMPL_ATTR, None) is not None or getattr(value.__func__, IMPL_ATTR, None)
        ):
            return None
    return out


def plain_signature(func: Any) -> Signature | None:
    """The arguments pluggy passes a plain module-level function.

    ``None`` for anything pluggy unwraps or binds (``__wrapped__``, methods,
    nested or class-level functions): ask pluggy.
    """
    if not isinstance(func, FunctionType) or hasattr(func, "__wrapped__"):
        return None
    if "." in func.__qualname__:
        return None
    code = func.__code__
    names = code.co_varnames[: code.co_argcount]
    split = len(names) - len(func.__defaults__ or ())
    return func, tuple(names[:split]), tuple(names[split:])


def call_with(signature: Signature, kwargs: dict[str, Any]) -> tuple[bool, Any]:
    """Call as pluggy would: required arguments by position, defaulted ones only
    when given.  ``(False, None)`` when a required one is missing (pluggy then
    warns and raises its own ``HookCallError``)."""
    func, required, optional = signature
    if not all(a in kwargs for a in required):
        return False, None
    extra = {a: kwargs[a] for a in optional if a in kwargs}
    return True, func(*[kwargs[a] for a in required], **extra)


def is_plain(opts: dict[str, Any]) -> bool:
    """An implementation pluggy would simply call (not a wrapper of others)."""
    return not (opts.get("wrapper") or opts.get("hookwrapper"))
