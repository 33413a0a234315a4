"""``dranet-cloud ipam``: look at and garbage-collect the node's IPAM database.

``list`` shows every allocation with its claim's namespace/name and pod when
known; ``gc`` frees the allocations of claims the Kubernetes API proves gone
(``--kubernetes``), or, on air-gapped nodes, that a complete live-claims file
proves gone (``--live-claims FILE``); see :mod:`dranet_cloud.ipam.node.reclaim` for
the rules.  Age alone frees only with ``--unsafe-free-by-age``.

Both open the database the daemon uses (``--ipam-db``, else
``$DRANET_CLOUD_IPAM_DB``, else ``/var/lib/dranet-cloud/ipam.db``) and refuse a
missing file rather than create an empty one.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from dranet_cloud.cli.common import add_scope_flag, cluster_scope
from dranet_cloud.cli.gc_flags import (
    KUBECONFIG_HELP,
    LIVE_CLAIMS_HELP,
    add_budget_flag,
    build_source,
    parse_duration,
    parse_grace,
    removed_older_than,
)
from dranet_cloud.cli.helptext import add_command
from dranet_cloud.cli.output import add_output_flag, emit_json, emit_table, natural_key
from dranet_cloud.ipam import (
    DEFAULT_IPAM_DB,
    IPAM_DB_ENV,
    Allocation,
    SqliteStore,
    resolve_db_path,
)
from dranet_cloud.ipam.cluster.allocator import open_cluster_ipam
from dranet_cloud.ipam.cluster.journal import ClusterJournal
from dranet_cloud.ipam.node.backup import backup
from dranet_cloud.ipam.node.reclaim import ClaimsFile, RunCutShort, reclaim
from dranet_cloud.toolkit.errors import ConfigError, DranetCloudError


def read_live_claims(path: str) -> list[str]:
    """Live claim UIDs from ``path`` (``-`` for stdin), only when the file proves itself complete.

    Raises :class:`~dranet_cloud.ipam.node.reclaim.NothingProven` for an empty,
    truncated or unmarked file.
    """
    live, _ = ClaimsFile(path).read()
    return sorted(live)


def _existing_store(args: argparse.Namespace) -> SqliteStore:
    """Open the database for inspection; a missing file is an error, not a new database.

    ``list`` or ``gc`` pointed at a mistyped path would otherwise report an
    empty pool and hide the real one.
    """
    path = resolve_db_path(args.ipam_db)
    if not Path(path).is_file():
        raise ConfigError(
            f"ipam: no IPAM database at {path}; pass --ipam-db PATH or set {IPAM_DB_ENV} "
            "to the file the daemon uses"
        )
    return SqliteStore(path)


def _gc_store(args: argparse.Namespace, source: Any) -> Any:
    """The store ``ipam gc`` frees through: the journal, wrapped in cluster scope."""
    cluster = cluster_scope(args)
    store = _existing_store(args)
    if cluster is None:
        return store
    store.close()

    node, kubeconfig = cluster
    client = getattr(source, "client", None)  # the claims' API client, when it is one
    extra = {"claims": source} if hasattr(source, "find") else {}
    return open_cluster_ipam(
        resolve_db_path(args.ipam_db), node=node, kubeconfig=kubeconfig, api=client, **extra
    )


def _names(alloc: Allocation) -> list[str]:
    """Every name the NIC was seen under (interface and DRA device names)."""
    names = {k.removeprefix("name:") for k in alloc.owner.keys if k.startswith("name:")}
    if not alloc.owner.device.startswith(("mac:", "pci:", "name:")):
        names.add(alloc.owner.device)  # an owner written before identities (schema 1)
    return sorted(names, key=natural_key)


def _in_order(allocs: Sequence[Allocation]) -> list[Allocation]:
    """Allocations by pool, then device names in natural order (rdma2 before rdma10).

    The sort is stable, so one device's allocations keep the store's order
    (claim, family, address).
    """
    return sorted(
        allocs,
        key=lambda a: (
            a.owner.pool,
            not _names(a),  # a NIC known by no name (an owner of schema 1) last
            [natural_key(name) for name in _names(a)],
            a.owner.device,
        ),
    )


def _as_json(alloc: Allocation) -> dict[str, Any]:
    claim = alloc.claim
    return {
        "pool": alloc.owner.pool,
        "device": alloc.owner.device,
        "names": _names(alloc),
        "keys": sorted(alloc.owner.keys),
        "claim_uid": alloc.owner.claim_uid,
        "claim": claim.qualified_name if claim is not None else None,
        "pods": [] if claim is None else [p.name for p in claim.pods],
        "address": alloc.address,
        "static": alloc.static,
        "created_at": alloc.created_at.isoformat(),
    }


def _claim_name(alloc: Allocation) -> str:
    claim = alloc.claim
    return (claim.qualified_name if claim is not None else None) or "-"


def _pods(alloc: Allocation) -> str:
    claim = alloc.claim
    return ",".join(p.name for p in claim.pods) if claim is not None and claim.pods else "-"


def _emit(
    allocs: Sequence[Allocation],
    output: str,
    empty_note: str,
    states: dict[str, str] | None = None,
) -> None:
    """``states`` (cluster scope): address -> where its IPAddress object stands."""
    extra = () if states is None else ("IPADDRESS",)
    allocs = _in_order(allocs)
    if output == "json":
        docs = [_as_json(a) for a in allocs]
        if states is not None:
            for doc in docs:
                doc["ipaddress"] = states.get(doc["address"], "-")
        emit_json(docs)
    elif allocs:
        emit_table(
            (
                "POOL",
                "DEVICE",
                "NAMES",
                "CLAIM",
                "NAMESPACE/NAME",
                "POD",
                "ADDRESS",
                "KIND",
                "CREATED",
                *extra,
            ),
            [
                (
                    a.owner.pool,
                    a.owner.device,
                    ",".join(_names(a)) or "-",
                    a.owner.claim_uid,
                    _claim_name(a),
                    _pods(a),
                    a.address,
                    "static" if a.static else "allocated",
                    a.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    *(() if states is None else (states.get(a.address, "-"),)),
                )
                for a in allocs
            ],
        )
    else:
        sys.stdout.write(empty_note + "\n")


def _run_list(args: argparse.Namespace) -> int:
    states: dict[str, str] | None = None
    try:
        with _existing_store(args) as store:
            allocs = store.list()
        if args.ipam_scope == "cluster":  # the journal's view of each object
            journal = ClusterJournal(store.path)
            try:
                states = {r.address: r.state for r in journal.all_rows()}
            finally:
                journal.close()
    except DranetCloudError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    _emit(allocs, args.output, "no allocations", states)
    return 0


def _run_gc(args: argparse.Namespace) -> int:
    close = None
    partial: RunCutShort | None = None
    try:
        if args.older_than is not None:
            raise ConfigError(
                removed_older_than("ipam gc --older-than", "--kubernetes", "--unsafe-free-by-age")
            )
        grace = parse_grace("--grace", args.grace)
        unsafe = _optional_duration(args.unsafe_free_by_age)
        node = args.node_name or os.environ.get("NODE_NAME") or None
        source, close = build_source(
            what="ipam gc",
            kubernetes=args.kubernetes,
            kubeconfig=args.kubeconfig,
            live_claims=args.live_claims,
            unsafe_age=unsafe,
            budget=("--budget", args.budget),
            adopt=args.adopt_cluster,
            node=node,
            grace=grace,
        )
        with _gc_store(args, source) as store:
            if source is not None:
                try:
                    result = reclaim(
                        store, source, grace=grace, dry_run=args.dry_run, force=args.force
                    )
                except RunCutShort as exc:  # what was freed before the failure is reported
                    partial, result = exc, exc.result
                freed, summary = result.freed, result.summary()
                extra = getattr(store, "cluster_reclaim", None)
                if callable(extra) and partial is None:
                    # Cluster scope, run once by an operator: every object of the project
                    # whose claim is gone, except those of other nodes that still exist.
                    swept = extra(source, grace=grace, dry_run=args.dry_run, everyone=True)
                    summary += "\n" + swept.sweep.summary()
            else:
                assert unsafe is not None
                freed = _free_by_age(store, unsafe, args.dry_run)
                verb = "would free" if args.dry_run else "freed"
                summary = f"ipam gc {verb} {len(freed)} allocation(s) by age alone (unsafe)"
    except DranetCloudError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    finally:
        if close is not None:
            close()
    print(summary, file=sys.stderr)
    if args.output == "table" and freed:
        verb = "would free" if args.dry_run else "freed"
        sys.stdout.write(f"{verb} {len(freed)} allocation(s):\n")
    _emit(freed, args.output, "nothing to free")
    if partial is not None:
        print(f"error: {partial}", file=sys.stderr)
        return partial.exit_code
    return 0


def _run_backup(args: argparse.Namespace) -> int:
    try:
        result = backup(resolve_db_path(args.ipam_db), args.to)
    except DranetCloudError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    emit_json(result.to_json())
    return 0


def _optional_duration(text: str | None) -> timedelta | None:
    return None if text is None else parse_duration(text)


def _free_by_age(store: SqliteStore, older_than: timedelta, dry_run: bool) -> list[Allocation]:
    if not dry_run:
        return store.collect(older_than=older_than)

    cutoff = datetime.now(timezone.utc) - older_than
    return [a for a in store.list() if a.created_at <= cutoff]


def _add_db_flag(parser: argparse.ArgumentParser) -> None:
    # No --ipam-memory here: an in-memory store has nothing to list or collect.
    parser.add_argument(
        "--ipam-db",
        metavar="PATH",
        default=None,
        help=f"IPAM SQLite database (env {IPAM_DB_ENV}, default {DEFAULT_IPAM_DB})",
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ipam list``, ``ipam gc`` and ``ipam backup`` to the ``dranet-cloud`` parser."""
    ipam = add_command(
        subparsers,
        "ipam",
        """inspect and garbage-collect node-local IP allocations

        Inspect and garbage-collect the node-local IPAM database.

        dranet-cloud ipam list
        dranet-cloud ipam gc --kubernetes --dry-run
        dranet-cloud ipam backup --to /var/lib/dranet-cloud/ipam-copy.db
        """,
    )
    actions = ipam.add_subparsers(dest="ipam_command", metavar="{list,gc,backup}", required=True)

    listing = add_command(
        actions,
        "list",
        """show every allocation

        Show every allocation of the node's IPAM database with its device, claim (namespace/name
        and pod when known), address and age; in cluster scope also where each address's
        IPAddress object stands.

        dranet-cloud ipam list
        dranet-cloud ipam list --ipam-db /var/lib/dranet-cloud/ipam.db -o json
        dranet-cloud ipam list --ipam-scope cluster
        """,
    )
    _add_db_flag(listing)
    add_scope_flag(listing)
    add_output_flag(listing)
    listing.set_defaults(func=_run_list)

    gc = add_command(
        actions,
        "gc",
        """free the allocations of claims proven gone

        Free the allocations of claims that the Kubernetes API proves gone (--kubernetes: GET
        answers 404 or another UID, or a complete list lacks the UID). An API error, timeout or
        partial list frees nothing more. Allocations younger than --grace before the evidence
        was taken are kept. The API must be the cluster the store's claims came from (kube-
        system Namespace UID): another cluster frees nothing (exit 2). A store that records no
        cluster yet adopts one only from proof: a claim it holds is live there (or serve's own
        API answered, or --adopt-cluster); a run without it frees nothing (exit 2).

        dranet-cloud ipam gc --kubernetes --dry-run      # what would be freed
        dranet-cloud ipam gc --kubernetes --grace 5m --budget 2m
        dranet-cloud ipam gc --live-claims claims.txt   # air-gapped: a complete list
        """,
    )
    _add_db_flag(gc)
    gc.add_argument(
        "--kubernetes",
        action="store_true",
        help="ask the Kubernetes API which claims are gone (needs get and list on "
        "resourceclaims.resource.k8s.io, and get on the kube-system namespace; with "
        "--node-name also list on pods: claims known only by UID are then named from this "
        "node's pods instead of a list of every claim)",
    )
    gc.add_argument("--kubeconfig", metavar="FILE", default=None, help=KUBECONFIG_HELP)
    add_scope_flag(gc)
    gc.add_argument(
        "--node-name",
        default=None,
        metavar="NAME",
        help="this node's Kubernetes name (default: $NODE_NAME): for --ipam-scope cluster, and "
        "for --kubernetes, which then lists this node's pods once to name and judge their "
        "claims",
    )
    gc.add_argument(
        "--grace",
        default="2m",
        metavar="DURATION",
        help="keep allocations younger than this before the evidence was taken "
        "(default 2m; 0s allowed)",
    )
    gc.add_argument("--dry-run", action="store_true", help="free nothing; list what would be freed")
    gc.add_argument(
        "--force",
        action="store_true",
        help="free even when every claim of the store (10 allocations or more) is proven "
        "gone; without it such a run frees nothing and says how many it would free",
    )
    gc.add_argument(
        "--adopt-cluster",
        action="store_true",
        help="the API is this node's cluster: record its cluster (kube-system Namespace UID) "
        "as the store's even when the store recorded another one (the node moved) or none and "
        "no claim it holds is live there (every claim really is gone)",
    )
    add_budget_flag(gc, "--budget")
    gc.add_argument("--live-claims", metavar="FILE", help=LIVE_CLAIMS_HELP)
    gc.add_argument(
        "--unsafe-free-by-age",
        metavar="DURATION",
        default=None,
        help="UNSAFE: free every allocation older than this, whether its claim lives or not",
    )
    gc.add_argument("--older-than", default=None, help=argparse.SUPPRESS)
    add_output_flag(gc)
    gc.set_defaults(func=_run_gc)

    saved = add_command(
        actions,
        "backup",
        """copy the live database consistently (safe while serve runs)

        Copy the IPAM database with SQLite's online backup API: one consistent snapshot holding
        every allocation committed before the copy started, taken while `serve` keeps answering.
        The copy is checked (PRAGMA integrity_check) and renamed into place only when complete;
        an existing file is never replaced.

        dranet-cloud ipam backup --to /var/lib/dranet-cloud/ipam-before-0.2.db
        dranet-cloud ipam backup --ipam-db /var/lib/dranet-cloud/ipam.db --to copy.db
        """,
    )
    _add_db_flag(saved)
    saved.add_argument("--to", required=True, metavar="FILE", help="the new backup file")
    saved.set_defaults(func=_run_backup)
