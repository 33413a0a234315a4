"""Printing results: JSON for machines (``-o json``), tables for people.

One dialect for every command (``tests/test_cli_dialect.py`` runs every
command that takes ``-o`` both ways): ``-o/--output`` takes :data:`OUTPUT_CHOICES`
with ``table`` as the default wherever it exists, a value a person reads goes
through :func:`human` (never a Python repr such as ``None``, ``True`` or
``['10.0.0.2/32']``), and devices are listed in :func:`natural_key` order
(``rdma2`` before ``rdma10``), the order ``ip link`` and ``ibv_devices`` use.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

# The one set of -o choices: a readable table (the default), or JSON.
OUTPUT_CHOICES = ("table", "json")
DEFAULT_OUTPUT = "table"
# `demo -o text` predates the common set; it still means the readable form.
_OUTPUT_ALIASES = {"text": "table"}


def _output(text: str) -> str:
    """An argparse type: the choice itself, or the older name it replaced."""
    return _OUTPUT_ALIASES.get(text, text)


def add_output_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--output",
        type=_output,
        choices=OUTPUT_CHOICES,
        default=DEFAULT_OUTPUT,
        help=f"output format: table for people, json for machines (default: {DEFAULT_OUTPUT})",
    )


def human(value: Any) -> str:
    """``value`` as a person reads it in a table or a ``key  value`` line.

    ``None`` is ``-`` (as the IPAM table writes a missing claim), booleans
    are ``true``/``false`` (as ``-o json`` and Kubernetes write them), lists
    are comma-joined and mappings ``key=value`` pairs.
    """
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return " ".join(f"{k}={human(v)}" for k, v in value.items()) or "-"
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return ",".join(human(v) for v in items) or "-"
    return str(value)


def error_text(exc: BaseException) -> str:
    """An exception as a person reads it: ``/x: Permission denied``, not ``[Errno 13] ..: '/x'``.

    Python writes an ``OSError`` with its errno and the file's repr.
    """
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror if exc.filename is None else f"{exc.filename}: {exc.strerror}"
    return str(exc)


_DIGITS = re.compile(r"(\d+)")
# A PCI address, or DRANET's DRA device name for one (pci-0000-00-05-0): fixed-
# width hex, whose text order is its numeric order (0000:56 before 0000:6c).
_PCI = re.compile(r"(?:pci-)?[0-9a-f]{4}[:-][0-9a-f]{2}[:-][0-9a-f]{2}[.-][0-7]", re.IGNORECASE)


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key putting ``rdma2`` before ``rdma10`` and ``eth9`` before ``eth10``.

    ``re.split`` with a capturing group alternates text and digit runs, so
    parts at the same position always compare str with str and int with int;
    the text itself breaks ties (``eth02`` and ``eth2``) so the order is total.
    A PCI address sorts as text: its digits are hex.
    """
    if _PCI.fullmatch(text):
        return (text,)
    parts = _DIGITS.split(text)
    return (*(int(p) if i % 2 else p for i, p in enumerate(parts)), text)


def device_key(name: str | None, pci_address: str | None = None) -> tuple[Any, ...]:
    """Natural order of devices: named interfaces first, then PCI-only functions."""
    return (not name, natural_key(name or pci_address or ""))


def emit_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


def emit_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(h) for h in headers]] + [["" if c is None else human(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        sys.stdout.write("\n")
        if n == 0:
            sys.stdout.write("  ".join("-" * w for w in widths) + "\n")


def emit_pairs(pairs: Sequence[tuple[str, Any]]) -> None:
    width = max((len(k) for k, _ in pairs), default=0)
    for k, v in pairs:
        sys.stdout.write(f"{k.ljust(width)}  {human(v)}\n")


def emit_document(doc: Mapping[str, Any]) -> None:
    """A JSON document (a NetworkConfig...) for people: ``key  value`` lines, then tables.

    Nested mappings become dotted keys (``interface.mtu``), a list of
    mappings (routes, rules, neighbors) a table of its own under its name
    whose columns are the keys its entries use, in the order they first
    appear; an empty document prints ``(empty)``.
    """
    pairs: list[tuple[str, Any]] = []
    tables: list[tuple[str, list[Mapping[str, Any]]]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):  # an empty one ({"interface": {}}) says nothing
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            tables.append((prefix, value))
        else:
            pairs.append((prefix, value))

    walk("", doc)
    if not pairs and not tables:
        sys.stdout.write("(empty)\n")
        return
    if pairs:
        emit_pairs(pairs)
    for name, entries in tables:
        columns = list(dict.fromkeys(key for entry in entries for key in entry))
        sys.stdout.write(f"\n{name}:\n")
        emit_table(
            [c.upper() for c in columns], [[entry.get(c) for c in columns] for entry in entries]
        )
