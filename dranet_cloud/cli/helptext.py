"""Adding a sub-command with the help every command has: a description and examples.

An operator reads ``dranet-cloud X --help`` next to kubectl's; every command
(and ``ipam gc``, ``profile get``...) says what it does in a sentence or two
and shows at least one command line to copy.  A command's help is written
as one text block that reads as it prints::

    one-line summary (the COMMAND list of the parent's --help)

    What the command does, in as many lines as it takes.

    dranet-cloud COMMAND --flag       # an example, with what it shows
    dranet-cloud COMMAND -o json

``tests/test_cli_dialect.py`` walks the parser tree, requires both parts,
and parses every example, so an example cannot drift from the flags.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

EXAMPLES_HEADING = "examples:"
PROGRAM = "dranet-cloud"


def examples_epilog(examples: Sequence[str]) -> str:
    """The epilog listing ``examples``, one command line each (kept as written)."""
    return "\n".join([EXAMPLES_HEADING, *(f"  {line}" for line in examples)])


def parse_help(name: str, text: str) -> tuple[str, str, list[str]]:
    """``(summary, description, examples)`` of a help block (see the module docstring).

    Refuses a block without a description paragraph or whose last paragraph
    is not command lines, so a command cannot ship without either.
    """
    paragraphs: list[list[str]] = [[]]
    for line in text.strip().splitlines():
        line = line.strip()
        if line:
            paragraphs[-1].append(line)
        elif paragraphs[-1]:
            paragraphs.append([])
    if len(paragraphs) < 3:
        raise ValueError(f"{name}: help needs a summary, a description and examples")
    examples = paragraphs[-1]
    if not all(line.startswith(f"{PROGRAM} ") for line in examples):
        raise ValueError(f"{name}: the last help paragraph must be {PROGRAM} command lines")
    description = " ".join(line for paragraph in paragraphs[1:-1] for line in paragraph)
    return " ".join(paragraphs[0]), description, examples


def add_command(sub: Any, name: str, text: str, **kwargs: Any) -> argparse.ArgumentParser:
    """``sub.add_parser(name)`` with the summary, description and examples of ``text``."""
    summary, description, examples = parse_help(name, text)
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=description,
        epilog=examples_epilog(examples),
        **kwargs,
    )
    return parser


class _HelpWithListing(argparse.Action):
    """``-h/--help`` that adds what this installation offers below the examples.

    The listing is computed when help is asked for, not when the parser is
    built: other commands' start-up never loads the plugins.
    """

    def __init__(
        self, option_strings: list[str], dest: str, listing: Callable[[], str], **kwargs: Any
    ) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)
        self.listing = listing

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        parser.epilog = f"{parser.epilog}\n\n{self.listing()}"
        parser.print_help()
        parser.exit()


def add_listing_help(parser: argparse.ArgumentParser, listing: Callable[[], str]) -> None:
    """``-h/--help`` ending with ``listing()`` (the parser was made with ``add_help=False``)."""
    parser.add_argument(
        "-h",
        "--help",
        action=_HelpWithListing,
        listing=listing,
        help="show this help message and exit",
    )
