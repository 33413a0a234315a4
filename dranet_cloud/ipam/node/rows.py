"""An allocation as a row of the IPAM database, and the queries a write is made of.

Addresses are stored as fixed-width lower-case hex (8 digits for IPv4, 32 for
IPv6, :func:`addr_key`), so text order is numeric order and the unique index
answers "occupied addresses from X upwards" directly (:func:`scan`).

Every function here runs inside a transaction the caller holds
(:meth:`~dranet_cloud.ipam.node.transactions.SqliteTransactions._transaction`
or ``_snapshot``) and decides nothing about locking or commits.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone

from dranet_cloud.ipam.base import Allocation, Owner, pick_identities
from dranet_cloud.toolkit.iprange import IPRange
from dranet_cloud.wire.claims import ClaimReference, PodReference

log = logging.getLogger(__name__)

# Every statement that finds a claim's rows names its index.  Without ANALYZE
# statistics SQLite answers ``device IN (?)`` from allocations_by_device, which
# walks every row the NIC holds (thousands on a busy node) instead of the
# claim's two or three.
CLAIM_ROWS = "allocations INDEXED BY allocations_by_claim"

COLUMNS = (
    "family, addr_key, address, pool, device, claim_uid, static, created_at, "
    "claim_namespace, claim_name, claim_pods"
)
Row = tuple[int, str, str, str, str, str, int, float, str | None, str | None, str | None]
"""One row of ``allocations`` in :data:`COLUMNS` order."""


def addr_key(family: int, value: int) -> str:
    """The stored form of address ``value`` of IPv``family``: fixed-width hex."""
    return f"{value:08x}" if family == 4 else f"{value:032x}"


def _claim_of(
    claim_uid: str, namespace: str | None, name: str | None, pods: str | None
) -> ClaimReference | None:
    if namespace is None and name is None and pods is None:
        return None

    refs: list[PodReference] = []
    try:
        for pod in json.loads(pods) if pods else []:
            if isinstance(pod, dict) and isinstance(pod.get("name"), str):
                refs.append(PodReference(pod["name"], str(pod.get("uid") or "")))
    except ValueError:
        log.warning(
            "ipam: claim %s: unreadable pod list %r, ignored",
            claim_uid,
            pods[:80] if pods else pods,
        )
    return ClaimReference(uid=claim_uid, namespace=namespace, name=name, pods=tuple(refs))


def _claim_values(claim: ClaimReference | None) -> tuple[str | None, str | None, str | None]:
    if claim is None:
        return None, None, None
    pods = json.dumps([{"name": p.name, "uid": p.uid} for p in claim.pods]) if claim.pods else None
    return claim.namespace, claim.name, pods


def to_allocation(row: Row, keys: frozenset[str] = frozenset()) -> Allocation:
    """The :class:`Allocation` a row stores; ``keys``: the forms its NIC was seen under."""
    _family, _key, address, pool, device, claim_uid, static, created, ns, name, pods = row
    return Allocation(
        owner=Owner(pool, device, claim_uid, keys),
        address=address,
        static=bool(static),
        created_at=datetime.fromtimestamp(created, timezone.utc),
        claim=_claim_of(claim_uid, ns, name, pods),
    )


def claim_devices(conn: sqlite3.Connection, owner: Owner) -> list[str]:
    """The identities holding rows of the owner's claim in its pool."""
    return [
        str(d)
        for (d,) in conn.execute(
            f"SELECT DISTINCT device FROM {CLAIM_ROWS} WHERE claim_uid = ? AND pool = ?",
            (owner.claim_uid, owner.pool),
        )
    ]


def identities(
    conn: sqlite3.Connection,
    owner: Owner,
    *,
    strict: bool = True,
    devices: list[str] | None = None,
) -> tuple[Owner, list[str]]:
    """The owner new rows go under, and every identity holding this NIC's rows.

    A claim holds rows on a few devices at most, so the candidates are
    that claim's identities in this pool (``devices``, when the caller
    already read them) and their recorded keys.
    """
    if devices is None:
        devices = claim_devices(conn, owner)
    held: dict[str, frozenset[str]] = {}
    for device in devices:
        rows = conn.execute("SELECT key FROM device_keys WHERE device = ?", (device,))
        held[device] = frozenset(str(k) for (k,) in rows)
    target, found = pick_identities(owner, held, strict=strict)
    return Owner(owner.pool, target, owner.claim_uid, owner.all_keys), found


def rows_of(conn: sqlite3.Connection, owner: Owner, devices: Sequence[str]) -> list[Row]:
    """The rows of the owner's claim in its pool held by ``devices``, dynamic first."""
    marks = ", ".join("?" for _ in devices)
    return list(
        conn.execute(
            f"SELECT {COLUMNS} FROM {CLAIM_ROWS} "
            f"WHERE claim_uid = ? AND pool = ? "
            f"AND device IN ({marks}) ORDER BY static, family, addr_key",
            (owner.claim_uid, owner.pool, *devices),
        ).fetchall()
    )


def record_keys(conn: sqlite3.Connection, owner: Owner, devices: Sequence[str] = ()) -> None:
    """Record the owner's keys under its identity and under every linked
    identity among ``devices`` that holds rows (a schema-1 name, a form
    the NIC was allocated under before): those rows then show every name
    in ``ipam list`` and are tied to the NIC's MAC/PCI address, so a NIC
    that later takes the old name does not match them."""
    targets = {owner.device}
    others = [d for d in devices if d != owner.device]
    if others:
        marks = ", ".join("?" for _ in others)
        targets.update(
            str(d)
            for (d,) in conn.execute(
                f"SELECT DISTINCT device FROM allocations WHERE device IN ({marks})", others
            )
        )
    conn.executemany(
        "INSERT OR IGNORE INTO device_keys (device, key) VALUES (?, ?)",
        [(d, k) for d in sorted(targets) for k in sorted(owner.all_keys)],
    )


def fill_claim(
    conn: sqlite3.Connection, owner: Owner, devices: Sequence[str], claim: ClaimReference | None
) -> None:
    """Record the claim's namespace/name on rows allocated when only its UID was known.

    A gen1 call (UID only) retried by gen2 DRANET after an upgrade must not
    leave the allocation unreclaimable by namespace/name.
    """
    if claim is None or (claim.namespace is None and claim.name is None and not claim.pods):
        return
    marks = ", ".join("?" for _ in devices)
    conn.execute(
        f"UPDATE {CLAIM_ROWS} SET claim_namespace = ?, claim_name = ?, claim_pods = ? "
        f"WHERE claim_uid = ? AND pool = ? AND device IN ({marks}) AND "
        "claim_namespace IS NULL AND claim_name IS NULL AND claim_pods IS NULL",
        (*_claim_values(claim), owner.claim_uid, owner.pool, *devices),
    )


def name_claims(conn: sqlite3.Connection, names: Mapping[str, tuple[str, str]]) -> int:
    """Record ``uid -> (namespace, name)`` on the rows that know only the UID; rows changed.

    Leak reclaiming learned the names from the API (the node's pods, or one
    complete list): recorded, the claim is proven by one GET from then on,
    never again by a list of every claim.  Rows that name a claim keep theirs.
    """
    changed = 0
    for uid, (namespace, name) in sorted(names.items()):
        cursor = conn.execute(
            f"UPDATE {CLAIM_ROWS} SET claim_namespace = ?, claim_name = ? "
            "WHERE claim_uid = ? AND claim_namespace IS NULL AND claim_name IS NULL",
            (namespace, name, uid),
        )
        changed += max(cursor.rowcount, 0)
    return changed


def forget_unused_keys(conn: sqlite3.Connection, devices: Iterable[str]) -> None:
    """Drop the keys of identities among ``devices`` that hold nothing any more."""
    conn.executemany(
        "DELETE FROM device_keys WHERE device = ? "
        "AND NOT EXISTS (SELECT 1 FROM allocations WHERE device = ?)",
        [(d, d) for d in sorted(set(devices))],
    )


def keys_of(conn: sqlite3.Connection, devices: Iterable[str] | None) -> dict[str, frozenset[str]]:
    """The keys recorded for each of ``devices`` (``None``: every identity)."""
    if devices is None:
        rows = conn.execute("SELECT device, key FROM device_keys").fetchall()
    else:
        wanted = sorted(set(devices))
        marks = ", ".join("?" for _ in wanted)
        rows = conn.execute(
            f"SELECT device, key FROM device_keys WHERE device IN ({marks})", wanted
        ).fetchall()
    out: dict[str, set[str]] = {}
    for device, key in rows:
        out.setdefault(str(device), set()).add(str(key))
    return {d: frozenset(k) for d, k in out.items()}


def scan(conn: sqlite3.Connection, family: int) -> Callable[[int, int], Iterator[int]]:
    """The occupied addresses of IPv``family`` between two values, ascending (for
    :func:`~dranet_cloud.ipam.freesearch.first_free`)."""

    def occupied(lo: int, hi: int) -> Iterator[int]:
        cursor = conn.execute(
            "SELECT addr_key FROM allocations WHERE family = ? AND addr_key BETWEEN ? AND ? "
            "ORDER BY addr_key",
            (family, addr_key(family, lo), addr_key(family, hi)),
        )
        try:
            for (key,) in cursor:
                yield int(key, 16)
        finally:
            cursor.close()

    return occupied


def insert(conn: sqlite3.Connection, alloc: Allocation, family: int, value: int) -> None:
    """Store ``alloc``, whose address is ``value`` in IPv``family`` (known to
    every caller, so the text form is not parsed back; the caller stages it
    for the tally)."""
    conn.execute(
        f"INSERT INTO allocations ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            family,
            addr_key(family, value),
            alloc.address,
            alloc.owner.pool,
            alloc.owner.device,
            alloc.owner.claim_uid,
            int(alloc.static),
            alloc.created_at.timestamp(),
            *_claim_values(alloc.claim),
        ),
    )


def count_range(conn: sqlite3.Connection, rng: IPRange) -> int:
    """How many addresses of ``rng`` are held."""
    row = conn.execute(
        "SELECT count(*) FROM allocations WHERE family = ? AND addr_key BETWEEN ? AND ?",
        (
            rng.version,
            addr_key(rng.version, int(rng.start)),
            addr_key(rng.version, int(rng.end)),
        ),
    ).fetchone()
    return int(row[0])
