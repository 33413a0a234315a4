"""Entry point: builds the argument parser from small sub-command modules.

Each module exposes ``register(subparsers)``; heavy imports (httpx, plugin
toolkits) happen inside the handlers so ``dranet-cloud detect`` stays cheap.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from ..errors import DranetCloudError

# Sub-command modules, in help order.
COMMAND_MODULES = (
    "plugins_cmd",
    "provider_cmds",
    "emulate_cmd",
    "demo_cmd",
    "ipam_cmd",
    "serve_cmd",
)

log = logging.getLogger("dranet_cloud")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dranet-cloud",
        description="Tell DRANET what the cloud knows about this node's NICs.",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="more logging on stderr (-v info, -vv debug)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.endswith(name):
                continue  # sub-command not shipped in this build
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)]
    logging.basicConfig(
        level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    # httpx logs every request at INFO; only -vv should show that.
    logging.getLogger("httpx").setLevel(level if args.verbose >= 2 else logging.WARNING)
    try:
        code: int = args.func(args)
        return code
    except DranetCloudError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `dranet-cloud ipam list | head`: the reader left; say nothing more.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
