"""``dranet-cloud plugins``: what is installed and which roles each plugin has.

A plugin that breaks the hook contract (a misspelt hook) is not listed: it is
named on stderr, with the fix, and the command exits 2.
"""

from __future__ import annotations

import argparse
from typing import Any

from dranet_cloud.cli.helptext import add_command
from dranet_cloud.cli.output import add_output_flag, emit_json, emit_table
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.toolkit.errors import PluginError


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "plugins",
        """list installed plugins and their roles

        List the installed dranet-cloud plugins: name, distribution, version and the roles read
        off the hooks each implements (cloud, profile, enricher). A plugin that breaks the hook
        contract (a misspelt hook) is named on stderr with the fix, and the command exits 2.

        dranet-cloud plugins
        dranet-cloud plugins -o json
        """,
    )
    add_output_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    registry = PluginRegistry(strict=False)
    infos = registry.info()
    if args.output == "json":
        emit_json([i.to_json() for i in infos])
    else:
        emit_table(
            ("NAME", "DISTRIBUTION", "VERSION", "ROLES"),
            [(i.name, i.distribution, i.version, ",".join(i.roles)) for i in infos],
        )
    if registry.load_errors:
        # The plugins that load are listed above; each refused one is named here
        # and the command fails, as every other command does with it installed.
        raise PluginError("\n".join(str(e) for e in registry.load_errors.values()))
    return 0
