"""``dranet-cloud ipam``: look at and garbage-collect the node's IPAM database.

``list`` shows every allocation; ``gc`` frees the allocations of claims that
no longer exist (``--live-claims FILE``, one claim UID a line) or that are
older than a duration (``--older-than 2h``).  Given both, only allocations that
are not live *and* older than the duration are freed, which protects claims
prepared after the live list was taken.

Both open the database the daemon uses (``--ipam-db``, else
``$DRANET_CLOUD_IPAM_DB``, else ``/var/lib/dranet-cloud/ipam.db``) and refuse a
missing file rather than create an empty one.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, DranetCloudError
from .output import add_output_flag, emit_json, emit_table

if TYPE_CHECKING:
    from ..ipam import Allocation, SqliteStore

# Every command's parser is built on every run, so the store (and sqlite3) is
# imported only by the handlers; these mirror dranet_cloud.ipam.sqlite's
# IPAM_DB_ENV and DEFAULT_IPAM_DB for the help text (a test keeps them equal).
_DB_ENV_HELP = "DRANET_CLOUD_IPAM_DB"
_DB_DEFAULT_HELP = "/var/lib/dranet-cloud/ipam.db"

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta:
    """``30s``, ``10m``, ``2h``, ``7d`` or a sum such as ``1h30m``."""
    raw = text.strip().lower()
    pos, seconds = 0, 0.0
    while pos < len(raw):
        match = _DURATION_PART.match(raw, pos)
        if match is None:
            break
        seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if not raw or pos != len(raw):
        raise ConfigError(
            f"ipam gc: {text!r} is not a duration; use a number and a unit s, m, h or d "
            "(30s, 10m, 2h, 7d, 1h30m)"
        )
    return timedelta(seconds=seconds)


def read_live_claims(path: str) -> list[str]:
    """Claim UIDs from ``path`` (``-`` for stdin): one a line, blanks and ``#`` comments ignored."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"ipam gc: cannot read the live claims file {path} ({exc}); pass a file with one "
            "claim UID a line, e.g. from `kubectl get resourceclaims -A -o "
            "jsonpath='{.items[*].metadata.uid}' | tr ' ' '\\n'`"
        ) from exc
    claims = []
    for line in text.splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry:
            claims.append(entry)
    return claims


def _existing_store(args: argparse.Namespace) -> SqliteStore:
    """Open the database for inspection; a missing file is an error, not a new database.

    ``list`` or ``gc`` pointed at a mistyped path would otherwise report an
    empty pool and hide the real one.
    """
    from ..ipam import IPAM_DB_ENV, SqliteStore, resolve_db_path

    path = resolve_db_path(args.ipam_db)
    if not Path(path).is_file():
        raise ConfigError(
            f"ipam: no IPAM database at {path}; pass --ipam-db PATH or set {IPAM_DB_ENV} "
            "to the file the daemon uses"
        )
    return SqliteStore(path)


def _names(alloc: Allocation) -> list[str]:
    """Every name the NIC was seen under (interface and DRA device names)."""
    names = {k.removeprefix("name:") for k in alloc.owner.keys if k.startswith("name:")}
    if not alloc.owner.device.startswith(("mac:", "pci:", "name:")):
        names.add(alloc.owner.device)  # an owner written before identities (schema 1)
    return sorted(names)


def _as_json(alloc: Allocation) -> dict[str, Any]:
    claim = alloc.claim
    return {
        "pool": alloc.owner.pool,
        "device": alloc.owner.device,
        "names": _names(alloc),
        "keys": sorted(alloc.owner.keys),
        "claim_uid": alloc.owner.claim_uid,
        "claim": claim.qualified_name if claim is not None else None,
        "address": alloc.address,
        "static": alloc.static,
        "created_at": alloc.created_at.isoformat(),
    }


def _emit(allocs: Sequence[Allocation], output: str, empty_note: str) -> None:
    if output == "json":
        emit_json([_as_json(a) for a in allocs])
    elif allocs:
        emit_table(
            ("POOL", "DEVICE", "NAMES", "CLAIM", "ADDRESS", "KIND", "CREATED"),
            [
                (
                    a.owner.pool,
                    a.owner.device,
                    ",".join(_names(a)) or "-",
                    a.owner.claim_uid,
                    a.address,
                    "static" if a.static else "allocated",
                    a.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                )
                for a in allocs
            ],
        )
    else:
        sys.stdout.write(empty_note + "\n")


def _run_list(args: argparse.Namespace) -> int:
    try:
        with _existing_store(args) as store:
            allocs = store.list()
    except DranetCloudError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    _emit(allocs, args.output, "no allocations")
    return 0


def _run_gc(args: argparse.Namespace) -> int:
    try:
        if args.live_claims is None and args.older_than is None:
            raise ConfigError(
                "ipam gc: say what to free with --live-claims FILE (claims that still exist), "
                "--older-than DURATION, or both"
            )
        live = None if args.live_claims is None else read_live_claims(args.live_claims)
        age = None if args.older_than is None else parse_duration(args.older_than)
        with _existing_store(args) as store:
            freed = store.collect(live_claims=live, older_than=age)
    except DranetCloudError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.output == "table" and freed:
        sys.stdout.write(f"freed {len(freed)} allocation(s):\n")
    _emit(freed, args.output, "nothing to free")
    return 0


def _add_db_flag(parser: argparse.ArgumentParser) -> None:
    # No --ipam-memory here: an in-memory store has nothing to list or collect.
    parser.add_argument(
        "--ipam-db",
        metavar="PATH",
        default=None,
        help=f"IPAM SQLite database (env {_DB_ENV_HELP}, default {_DB_DEFAULT_HELP})",
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ipam list`` and ``ipam gc`` to the ``dranet-cloud`` parser."""
    ipam = subparsers.add_parser(
        "ipam",
        help="inspect and garbage-collect node-local IP allocations",
        description="Inspect and garbage-collect the node-local IPAM database.",
    )
    actions = ipam.add_subparsers(dest="ipam_command", metavar="{list,gc}", required=True)

    listing = actions.add_parser("list", help="show every allocation")
    _add_db_flag(listing)
    add_output_flag(listing)
    listing.set_defaults(func=_run_list)

    gc = actions.add_parser(
        "gc",
        help="free allocations of claims that are gone or too old",
        description=(
            "Free allocations whose claim UID is not in --live-claims, or that are older "
            "than --older-than; with both, only allocations matching both are freed."
        ),
    )
    _add_db_flag(gc)
    gc.add_argument(
        "--live-claims",
        metavar="FILE",
        help="file with the UIDs of claims that still exist, one a line ('-' for stdin)",
    )
    gc.add_argument(
        "--older-than", metavar="DURATION", help="free allocations older than this (30s, 2h, 7d)"
    )
    add_output_flag(gc)
    gc.set_defaults(func=_run_gc)
