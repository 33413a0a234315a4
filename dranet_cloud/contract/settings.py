"""Plugin settings (``--set plugin.key=value``) that are checked before anything starts.

A typo in a setting (``aws.allow_imdsv=true``) used to be accepted and
silently ignored, so the node ran with the default the operator meant to
change.  Each plugin now declares its keys and their types through the
``plugin_settings`` hook; :func:`check_settings` refuses an unknown plugin, an
unknown key or a value of the wrong type with a :class:`ConfigError` (exit 2)
that names what is valid.

Values stay strings in :class:`~dranet_cloud.contract.context.ProviderOptions`: the
plugin that reads them keeps its own parsing, the check only proves they will
parse.  A plugin that does not implement the hook (an older plugin) gets its
keys through unchecked, with a warning, rather than being broken by an
upgrade of the core.

Nothing here imports pydantic or httpx: ``detect`` checks settings too.
"""

from __future__ import annotations

import difflib  # only on the error path
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from dranet_cloud.toolkit.errors import ConfigError

log = logging.getLogger(__name__)

SettingKind = Literal["bool", "int", "float", "seconds", "str", "path", "choice"]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


@dataclass(frozen=True)
class Setting:
    """One key a plugin reads from ``context.options.settings``.

    ``name`` is the part after the plugin's prefix (``allow_imdsv1`` for
    ``aws.allow_imdsv1``).  ``kind`` decides what a value must look like:
    ``bool`` (true/false/1/0/yes/no/on/off), ``int``, ``float``, ``seconds``
    (a finite number > 0), ``str``, ``path`` (non-empty) or ``choice`` (one of
    ``choices``, case-insensitive).
    """

    name: str
    kind: SettingKind = "str"
    help: str = ""
    choices: tuple[str, ...] = ()

    def problem(self, value: str) -> str | None:
        """Why ``value`` is not acceptable, or ``None``."""
        text = value.strip()
        if self.kind == "bool":
            if text.lower() not in _TRUE | _FALSE:
                return "expected true or false"
        elif self.kind == "int":
            try:
                int(text)
            except ValueError:
                return "expected a whole number"
        elif self.kind in ("float", "seconds"):
            try:
                number = float(text)
            except ValueError:
                return "expected a number"
            if not math.isfinite(number):
                return "expected a finite number"
            if self.kind == "seconds" and number <= 0:
                return "expected a number of seconds greater than 0"
        elif self.kind == "path":
            if not text:
                return "expected a file path"
        elif self.kind == "choice" and text.lower() not in {c.lower() for c in self.choices}:
            return "expected one of " + ", ".join(self.choices)
        return None

    def describe(self) -> str:
        kind = "|".join(self.choices) if self.kind == "choice" else self.kind
        return f"{self.name} ({kind})"


class PluginRegistry(Protocol):
    """What the checks ask of :class:`dranet_cloud.host.plugin_manager.PluginRegistry`.

    A protocol rather than an import: the registry suggests names with
    :func:`did_you_mean` from here, so importing it back would be a circle.
    """

    def names(self) -> list[str]: ...

    def aliases(self) -> dict[str, str]: ...

    def implements(self, name: str, hook: str) -> bool: ...

    def call(self, name: str, hook: str, **kwargs: Any) -> Any: ...


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest candidate, or an empty string."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def declared_settings(registry: PluginRegistry, name: str) -> dict[str, Setting] | None:
    """The keys plugin ``name`` declares, or ``None`` when it declares nothing."""
    if not registry.implements(name, "plugin_settings"):
        return None
    declared = registry.call(name, "plugin_settings") or []
    return {s.name: s for s in declared}


def check_settings(registry: PluginRegistry, settings: Mapping[str, str]) -> None:
    """Refuse settings for unknown plugins, unknown keys and values of the wrong type."""
    names = registry.names()
    for key, value in settings.items():
        plugin, dot, rest = key.partition(".")
        if not dot or not plugin or not rest:
            raise ConfigError(
                f"--set {key}={value}: a setting is PLUGIN.KEY=VALUE (e.g. aws.allow_imdsv1=true)"
            )
        if plugin not in names:
            real = registry.aliases().get(plugin.lower())
            hint = (
                f"; settings use the plugin name: --set {real}.{rest}=..."
                if real
                else did_you_mean(plugin, names)
            )
            raise ConfigError(
                f"--set {key}: no installed plugin is named {plugin!r} "
                f"(installed: {', '.join(names) or 'none'}){hint}"
            )
        declared = declared_settings(registry, plugin)
        if declared is None:
            log.warning(
                "--set %s: plugin %s declares no settings (no plugin_settings hook); "
                "the value is passed through unchecked",
                key,
                plugin,
            )
            continue
        spec = declared.get(rest)
        if spec is None:
            valid = ", ".join(f"{plugin}.{s.describe()}" for s in declared.values())
            raise ConfigError(
                f"--set {key}: plugin {plugin} has no setting {rest!r}"
                f"{did_you_mean(rest, declared)} (valid: {valid or 'none, it takes no settings'})"
            )
        why = spec.problem(value)
        if why is not None:
            raise ConfigError(f"--set {key}={value}: {why} for {plugin}.{spec.describe()}")
