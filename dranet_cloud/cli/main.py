"""Entry point: builds the argument parser from small sub-command modules.

Each module exposes ``register(subparsers)``.  Only the module of the
command on the command line is imported (a build may leave a command's
module out); ``--help`` and unknown commands load them all.

Strictness, because a flag that is silently misread is worse than an error:
abbreviations are off on every parser (``--cloud-provider`` is not
``--cloud-provider-hint``), ``-v`` and ``--log-format`` are accepted anywhere
on the command line, and every error is one line without a traceback (``-vv``
logs the traceback of an unexpected one); a flag error is that line and a
hint to ``--help``, not the usage.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from dranet_cloud.cli.helptext import examples_epilog
from dranet_cloud.cli.output import error_text
from dranet_cloud.host.plugin_manager import installed_versions
from dranet_cloud.toolkit.errors import DranetCloudError
from dranet_cloud.toolkit.log_format import configure_cli, error_line

# Sub-command -> module, in help order.
COMMANDS = {
    "plugins": "plugins_cmd",
    "detect": "provider_cmds",
    "describe": "provider_cmds",
    "profile": "provider_cmds",
    "emulate": "emulate_cmd",
    "demo": "demo_cmd",
    "ipam": "ipam_cmd",
    "serve": "serve_cmd",
    "health": "health_cmd",
}
COMMAND_MODULES = tuple(dict.fromkeys(COMMANDS.values()))

log = logging.getLogger("dranet_cloud")


class _Formatter(argparse.HelpFormatter):
    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """Text with line breaks (a command's examples) is printed as written."""
        if "\n" in text:
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)


class Parser(argparse.ArgumentParser):
    """``ArgumentParser`` with abbreviations off; sub-parsers inherit the class."""

    # Set by main() from --log-format/env: usage errors become one JSON line.
    log_format = "text"
    # Set by main(): the (sub-)command on the command line, for the hint.
    command_prog = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """One line naming the flag, and a hint: not the whole usage before it.

        argparse prints the usage first (22 lines for ``serve``), which pushes
        the one line that matters off a pod's log view; ``--help`` has the rest.
        """
        prog = self.prog
        if message.startswith("unrecognized arguments") and Parser.command_prog:
            prog = Parser.command_prog  # the root reports them; the command has the flags
        hint = f"see `{prog} --help` for every flag"
        if Parser.log_format == "json":
            self.exit(2, error_line(f"{prog}: {message} ({hint})", "json") + "\n")
        self.exit(2, f"{prog}: error: {message}\n{hint}\n")


class _VersionAction(argparse.Action):
    """``--version``: the core and every installed plugin distribution."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        for dist, version in installed_versions():
            sys.stdout.write(f"{dist} {version}\n")
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or with ``only`` just the commands of its module."""
    parser = Parser(
        prog="dranet-cloud",
        description="Tell DRANET what the cloud knows about this node's NICs.",
        epilog=examples_epilog(
            [
                "dranet-cloud demo                 # the whole job against an emulated cloud",
                "dranet-cloud describe -o json     # what this node's NICs get from the cloud",
                "dranet-cloud ipam gc --help       # every command has its own help",
            ]
        ),
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="more logging on stderr (-v info, -vv debug); accepted anywhere",
    )
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=os.environ.get("DRANET_CLOUD_LOG_FORMAT", "text"),
        help="log lines as text or one JSON object a line, both with timestamps "
        "(env DRANET_CLOUD_LOG_FORMAT); accepted anywhere",
    )
    parser.add_argument(
        "--version", action=_VersionAction, help="print the core's and every plugin's version"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    modules = [COMMANDS[only]] if only in COMMANDS else list(COMMAND_MODULES)
    for name in modules:
        try:
            module = importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.endswith(name):
                continue  # sub-command not shipped in this build
            raise
        module.register(sub)
    return parser


def _split_global(argv: list[str]) -> tuple[list[str], int, str | None]:
    """Take ``-v``/``-vv``/``--verbose`` and ``--log-format X`` out of ``argv``, wherever they are.

    Operators add ``-v`` at the end of a command they just ran; argparse only
    accepts a global flag before the sub-command.  Everything after ``--`` is
    left alone.
    """
    rest: list[str] = []
    verbose = 0
    log_format: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest.extend(argv[i:])
            break
        if arg == "--verbose" or (len(arg) > 1 and arg.startswith("-") and set(arg[1:]) == {"v"}):
            verbose += 1 if arg == "--verbose" else len(arg) - 1
        elif arg == "--log-format" and i + 1 < len(argv):
            log_format = argv[i + 1]
            i += 1
        elif arg.startswith("--log-format="):
            log_format = arg.partition("=")[2]
        else:
            rest.append(arg)
        i += 1
    return rest, verbose, log_format


def _command_of(argv: list[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def _command_prog(parser: argparse.ArgumentParser, argv: list[str]) -> str:
    """``dranet-cloud ipam gc``: the deepest sub-command the words of ``argv`` name."""
    prog = parser.prog
    for arg in argv:
        if arg.startswith("-"):
            continue
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        child = subs[0].choices.get(arg) if subs else None
        if child is None:
            break
        parser, prog = child, child.prog
    return prog


def main(argv: Sequence[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    rest, verbose, log_format = _split_global(raw)
    Parser.log_format = log_format or os.environ.get("DRANET_CLOUD_LOG_FORMAT", "text")
    parser = build_parser(_command_of(rest))
    Parser.command_prog = _command_prog(parser, rest)
    if log_format is not None:
        rest = ["--log-format", log_format, *rest]
    args = parser.parse_args(rest)
    if args.log_format not in ("text", "json"):  # from the environment: argparse checks only flags
        parser.error(
            f"DRANET_CLOUD_LOG_FORMAT={args.log_format!r}: expected text or json "
            "(or pass --log-format)"
        )
    args.verbose += verbose

    configure_cli(args.verbose, args.log_format)
    try:
        code: int = args.func(args)
        return code
    except DranetCloudError as exc:
        print(error_line(str(exc), args.log_format), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `dranet-cloud ipam list | head`: the reader left; say nothing more.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:
        # A file or socket the operator named: say which, without a traceback.
        log.debug("%s failed", args.command, exc_info=True)

        print(error_line(f"{args.command}: {error_text(exc)}", args.log_format), file=sys.stderr)
        return 1
    except Exception as exc:
        log.debug("%s failed", args.command, exc_info=True)
        print(
            error_line(
                f"{args.command}: unexpected {type(exc).__name__}: {exc} "
                "(a bug; rerun with -vv for the traceback and report it)",
                args.log_format,
            ),
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
