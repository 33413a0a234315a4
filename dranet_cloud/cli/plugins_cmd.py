"""``dranet-cloud plugins``: what is installed and which roles each plugin has."""

from __future__ import annotations

import argparse
from typing import Any

from .output import add_output_flag, emit_json, emit_table


def register(sub: Any) -> None:
    p = sub.add_parser("plugins", help="list installed plugins and their roles")
    add_output_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..plugins import PluginRegistry

    infos = PluginRegistry().info()
    if args.output == "json":
        emit_json([i.to_json() for i in infos])
    else:
        emit_table(
            ("NAME", "DISTRIBUTION", "VERSION", "ROLES"),
            [(i.name, i.distribution, i.version, ",".join(i.roles)) for i in infos],
        )
    return 0
