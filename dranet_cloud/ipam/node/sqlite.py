"""The durable IPAM store: one SQLite file per node, shared by threads and processes.

Why it is safe:

* every operation takes the write lock before it reads anything it will
  decide on (:mod:`.transactions`): two processes never both see an address
  free;
* ``UNIQUE (family, addr_key)`` is the last guard: even a bug above it cannot
  store an address twice, and a partial unique index keeps one dynamic
  allocation per owner and family;
* WAL journaling means a process killed at any instant (SIGKILL included)
  leaves either the old or the new state; the next opener replays or discards
  the log.  ``synchronous=FULL`` (the default) also makes a committed
  allocation survive power loss; ``NORMAL`` is faster and still safe against
  process crashes, but the last commits may be lost if the machine loses power.

Why allocation does not slow down as the pool fills: addresses are stored as
fixed-width lower-case hex (8 digits for IPv4, 32 for IPv6), so text order is
numeric order and the unique index answers "occupied addresses from X upwards"
directly.  An allocation costs one index seek plus the length of the occupied
run at its random start (see :mod:`.freesearch`); nothing enumerates the range
or reads the whole table.

Beside it: :mod:`.schema` (tables, migrations), :mod:`.rows` (the queries a
write is made of) and :mod:`.transactions` (connection, group commits).
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Literal

from dranet_cloud.ipam.base import Allocation, IpamStore, Owner
from dranet_cloud.ipam.node import rows as sqlite_rows
from dranet_cloud.ipam.node import storefile
from dranet_cloud.ipam.node.memory import Clock, MemoryStore, utc_now
from dranet_cloud.ipam.node.schema import (
    DEFAULT_IPAM_DB,
    IPAM_DB_ENV,
    SCHEMA,
    SCHEMA_VERSION,
    UNUSED_INDEXES,
    migrate_from_1,
    resolve_db_path,
)
from dranet_cloud.ipam.node.transactions import DEFAULT_BUSY_TIMEOUT, SqliteTransactions
from dranet_cloud.ipam.requests import (
    InvalidIpamRequest,
    RandomSource,
    held_elsewhere,
    host_cidr,
    ordered_ranges,
    parse_static,
    require_collect_bounds,
    take_free,
    warn_outside,
)
from dranet_cloud.toolkit.errors import ConfigError
from dranet_cloud.toolkit.iprange import IPRange
from dranet_cloud.wire.claims import ClaimReference

__all__ = [
    "DEFAULT_IPAM_DB",
    "IPAM_DB_ENV",
    "SqliteStore",
    "StoreHealth",
    "Synchronous",
    "open_store",
    "quick_check",
    "resolve_db_path",
]

log = logging.getLogger(__name__)

_WRITABLE_RECHECK = 1.0

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]


def quick_check(conn: sqlite3.Connection, path: str) -> str | None:
    """``PRAGMA quick_check`` at open: the problem found, or ``None`` when the file is sound."""
    try:
        rows = [str(r[0]) for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
    except sqlite3.DatabaseError as exc:
        rows = [str(exc)]
    if rows == ["ok"]:
        return None
    problem = (
        f"ipam: {path} failed its integrity check ({'; '.join(rows)[:300]}); restore it from "
        "a backup or move it aside (allocations are then rebuilt as claims are prepared again)"
    )
    log.error("%s", problem)
    return problem


@dataclass(frozen=True)
class StoreHealth:
    """What ``/health`` says about the store.

    ``ok`` is False only when claims cannot be served (``reason`` says why:
    the file was lost or replaced, the last commit failed, the integrity
    check failed); ``warnings`` name degraded states in which claims still
    work (a read-only directory that the open file still commits through).
    """

    ok: bool
    reason: str | None = None
    warnings: tuple[str, ...] = ()


class SqliteStore(SqliteTransactions):
    """SQLite-backed :class:`~dranet_cloud.ipam.base.IpamStore`.

    One connection per store object, used under a lock, so a store may be
    shared by threads; each process opens its own store (a store carried
    across ``fork`` opens a fresh connection in the child).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "FULL",
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        rng: RandomSource | None = None,
        clock: Clock | None = None,
        create: bool = False,
    ) -> None:
        """``create``: start an empty store where the file is empty, has no schema
        or is missing although a store lived there (``--ipam-db-create``); a
        path where no store ever lived is created without it."""
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise InvalidIpamRequest(
                f"ipam: synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}"
            )
        super().__init__(path, busy_timeout)
        self.synchronous = synchronous
        self._random: RandomSource = rng if rng is not None else random.SystemRandom()
        self._clock: Clock = clock if clock is not None else utc_now
        self.integrity_problem: str | None = None
        self._writable_checked = 0.0
        self._warnings: tuple[str, ...] = ()
        self._create = create
        self._data_version = 0
        self._conn = self._open()

    # -- opening the file ------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        target = Path(self.path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"ipam: cannot create the directory of the IPAM database {self.path} ({exc}); "
                f"pass --ipam-db PATH or set {IPAM_DB_ENV} to a writable location"
            ) from exc
        storefile.prepare(
            self.path,
            create=self._create,
            schema=list(SCHEMA),
            version=SCHEMA_VERSION,
        )
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise ConfigError(
                f"ipam: cannot open the IPAM database {self.path} ({exc}); "
                f"pass --ipam-db PATH or set {IPAM_DB_ENV} to a writable file"
            ) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise ConfigError(
                    f"ipam: {self.path} cannot use write-ahead logging (journal mode {mode}); "
                    "put the IPAM database on a local filesystem"
                )
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version > SCHEMA_VERSION:
                    raise ConfigError(
                        f"ipam: {self.path} has schema version {version}, newer than this "
                        f"dranet-cloud understands ({SCHEMA_VERSION}); upgrade dranet-cloud"
                    )
                if version == 0 and not self._has_schema(conn):
                    self._refuse_schemaless()
                if version == 1:
                    migrate_from_1(conn)
                for statement in SCHEMA:
                    conn.execute(statement)
                for index in UNUSED_INDEXES:
                    conn.execute(f"DROP INDEX IF EXISTS {index}")
                if version < SCHEMA_VERSION:
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise self._error(exc) from exc
        except BaseException:
            conn.close()
            raise
        self.integrity_problem = quick_check(conn, self.path)
        self._files = storefile.identity(self.path)
        storefile.write_marker(self.path)
        self._conn_busy_ms = self._busy_ms
        try:
            self._recount(conn)
        except sqlite3.DatabaseError as exc:  # a damaged file: /health says so already
            log.warning("ipam: cannot count the allocations in %s for metrics: %s", self.path, exc)
        log.debug("ipam: opened %s (WAL, synchronous=%s)", self.path, self.synchronous)
        return conn

    def _has_schema(self, conn: sqlite3.Connection) -> bool:
        row = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'allocations'"
        ).fetchone()
        return row is not None

    def _refuse_schemaless(self) -> None:
        """A database without the IPAM schema is set up only when the operator asks."""
        if self._create:
            log.warning("ipam: %s had no IPAM schema; creating it (--ipam-db-create)", self.path)
            return
        raise storefile.StoreFileError(
            f"ipam: {self.path} is an SQLite database without the IPAM schema (no allocations "
            "table): not this program's store, or a store whose content was lost; point "
            "--ipam-db at the node's store, or pass --ipam-db-create to set up an empty store "
            "in it knowingly"
        )

    # -- the two steps a subclass may extend (the cluster journal does) ---------

    @staticmethod
    def _scan(conn: sqlite3.Connection, family: int) -> Callable[[int, int], Iterator[int]]:
        return sqlite_rows.scan(conn, family)

    @staticmethod
    def _insert(conn: sqlite3.Connection, alloc: Allocation, family: int, value: int) -> None:
        sqlite_rows.insert(conn, alloc, family, value)

    # -- the store API -----------------------------------------------------

    def allocate(
        self, owner: Owner, ranges: Sequence[IPRange], *, claim: ClaimReference | None = None
    ) -> list[str]:
        wanted = ordered_ranges(owner, ranges)
        with self._transaction() as conn:
            claim_devices = sqlite_rows.claim_devices(conn, owner)
            main, devices = sqlite_rows.identities(conn, owner, devices=claim_devices)
            # A claim with no rows in this pool (a new claim) has nothing to read back.
            held = sqlite_rows.rows_of(conn, owner, devices) if claim_devices else []
            now = self._clock()
            result: list[str] = []
            for rng in wanted:
                existing = next((row for row in held if row[0] == rng.version), None)
                if existing is not None:
                    # Compared as stored (family, hex key): parsing the CIDR text
                    # again was a good part of a kubelet retry's cost.
                    if not int(rng.start) <= int(existing[1], 16) <= int(rng.end):
                        warn_outside(log, owner, existing[2], rng)
                    result.append(existing[2])
                    continue
                occupied = self._scan(conn, rng.version)
                alloc, free = take_free(rng, self._random, occupied, owner, main, now, claim)
                self._insert(conn, alloc, rng.version, free)
                self._staged.append((alloc.owner.pool, rng.version, free, 1))
                result.append(alloc.address)
            if held or result:
                sqlite_rows.record_keys(conn, main, devices)
            if held:  # rows inserted just now already name the claim
                sqlite_rows.fill_claim(conn, owner, devices, claim)
            return result

    def reserve(
        self, owner: Owner, addresses: Sequence[str], *, claim: ClaimReference | None = None
    ) -> list[str]:
        wanted = parse_static(owner, addresses)
        with self._transaction() as conn:
            main, devices = sqlite_rows.identities(conn, owner)
            now = self._clock()
            for addr in wanted:
                row = conn.execute(
                    f"SELECT {sqlite_rows.COLUMNS} FROM allocations "
                    "WHERE family = ? AND addr_key = ?",
                    (addr.version, sqlite_rows.addr_key(addr.version, int(addr))),
                ).fetchone()
                if row is None:
                    alloc = Allocation(main, host_cidr(addr), True, now, claim)
                    self._insert(conn, alloc, addr.version, int(addr))
                    self._staged.append((alloc.owner.pool, addr.version, int(addr), 1))
                    continue
                holder = sqlite_rows.to_allocation(row)
                same = holder.owner.pool == owner.pool and holder.owner.claim_uid == owner.claim_uid
                if not same or holder.owner.device not in devices:
                    raise held_elsewhere(addr, owner, holder)
            if wanted:
                sqlite_rows.record_keys(conn, main, devices)
                sqlite_rows.fill_claim(conn, owner, devices, claim)
            return [host_cidr(a) for a in wanted]

    def release(self, owner: Owner) -> list[str]:
        with self._transaction() as conn:
            _main, devices = sqlite_rows.identities(conn, owner, strict=False)
            marks = ", ".join("?" for _ in devices)
            where = f"claim_uid = ? AND pool = ? AND device IN ({marks})"
            params = (owner.claim_uid, owner.pool, *devices)
            rows = conn.execute(
                f"SELECT address, family, addr_key FROM {sqlite_rows.CLAIM_ROWS} WHERE {where} "
                "ORDER BY family, addr_key",
                params,
            ).fetchall()
            conn.execute(f"DELETE FROM {sqlite_rows.CLAIM_ROWS} WHERE {where}", params)
            if rows:
                sqlite_rows.forget_unused_keys(conn, devices)
            self._staged += [(owner.pool, family, int(key, 16), -1) for _a, family, key in rows]
            return [str(address) for address, _f, _k in rows]

    def collect(
        self, live_claims: Iterable[str] | None = None, older_than: timedelta | None = None
    ) -> list[Allocation]:
        require_collect_bounds(live_claims, older_than)
        live = None if live_claims is None else sorted(set(live_claims))
        with self._transaction() as conn:
            where: list[str] = []
            params: list[object] = []
            if live is not None:
                conn.execute(
                    "CREATE TEMP TABLE IF NOT EXISTS live_claims (claim_uid TEXT PRIMARY KEY)"
                )
                conn.execute("DELETE FROM temp.live_claims")
                conn.executemany(
                    "INSERT INTO temp.live_claims (claim_uid) VALUES (?)", [(c,) for c in live]
                )
                where.append("claim_uid NOT IN (SELECT claim_uid FROM temp.live_claims)")
            if older_than is not None:
                where.append("created_at <= ?")
                params.append((self._clock() - older_than).timestamp())
            condition = " AND ".join(where)
            rows = conn.execute(
                f"SELECT {sqlite_rows.COLUMNS} FROM allocations WHERE {condition} "
                "ORDER BY pool, device, claim_uid, family, addr_key",
                params,
            ).fetchall()
            conn.execute(f"DELETE FROM allocations WHERE {condition}", params)
            if rows:
                sqlite_rows.forget_unused_keys(conn, (row[4] for row in rows))
            self._staged += [(row[3], row[0], int(row[1], 16), -1) for row in rows]
            if live is not None:
                conn.execute("DELETE FROM temp.live_claims")
        return [sqlite_rows.to_allocation(row) for row in rows]

    def held(self, owner: Owner) -> list[Allocation]:
        """What ``owner`` holds: dynamic allocations first, then by family and address."""
        with self._snapshot() as conn:
            _main, devices = sqlite_rows.identities(conn, owner, strict=False)
            rows = sqlite_rows.rows_of(conn, owner, devices)
            keys = sqlite_rows.keys_of(conn, devices)
        return [sqlite_rows.to_allocation(row, keys.get(row[4], frozenset())) for row in rows]

    def list(self) -> list[Allocation]:
        with self._snapshot() as conn:
            rows = conn.execute(
                f"SELECT {sqlite_rows.COLUMNS} FROM allocations "
                "ORDER BY pool, device, claim_uid, family, addr_key"
            ).fetchall()
            keys = sqlite_rows.keys_of(conn, None)
        return [sqlite_rows.to_allocation(row, keys.get(row[4], frozenset())) for row in rows]

    def record_claim_names(self, names: Mapping[str, tuple[str, str]]) -> int:
        """Record the namespace/name of claims whose rows know only the UID; rows changed."""
        if not names:
            return 0
        with self._transaction() as conn:
            return sqlite_rows.name_claims(conn, names)

    def get_meta(self, key: str) -> str | None:
        """A fact recorded about the store (``cluster_uid``), ``None`` when never recorded."""
        with self._snapshot() as conn:
            row = conn.execute("SELECT value FROM store_meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """Record a fact about the store, durably (replacing an earlier value)."""
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO store_meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # -- the tally (metrics) -----------------------------------------------------

    def _recount(self, conn: sqlite3.Connection) -> None:
        """Count the tally from the file (no write group may be open)."""
        rows = conn.execute("SELECT pool, count(*) FROM allocations GROUP BY pool").fetchall()
        self.tally.reset(
            {str(p): int(n) for p, n in rows}, lambda r: sqlite_rows.count_range(conn, r)
        )
        self._data_version = int(conn.execute("PRAGMA data_version").fetchone()[0])

    def watch_ranges(self, ranges: Sequence[IPRange]) -> None:
        """Count the addresses held in each of ``ranges`` in the tally from now on."""
        with self._snapshot() as conn:
            self.tally.watch(ranges, lambda r: sqlite_rows.count_range(conn, r))

    def recount_if_changed(self) -> bool:
        """Recount the tally if another process committed to the file since the last
        count; may wait for the store (never call it on the event loop)."""
        with self._snapshot() as conn:
            if int(conn.execute("PRAGMA data_version").fetchone()[0]) == self._data_version:
                return False
            self._recount(conn)
            return True

    def health(self) -> StoreHealth:
        """The store's state for ``/health``; never blocks (a few ``stat`` calls).

        Not ok: the file at the path is not the one opened, the integrity
        check at open failed, or the last commit failed (cleared by the next
        successful one).  Warnings (checked at most once a second): the file
        or its directory is not writable, which the open file survives.
        """
        now = time.monotonic()
        if now - self._writable_checked > _WRITABLE_RECHECK:
            self._writable_checked = now
            why = storefile.unwritable(self.path)
            self._warnings = tuple(storefile.directory_warnings(self.path, why))
            self.note_unwritable(why)
        reason = self._file_problem() or self.integrity_problem
        if reason is None and self._write_error:
            reason = f"ipam: the last write to {self.path} failed ({self._write_error})"
        return StoreHealth(reason is None, reason, self._warnings)

    def health_problem(self) -> str | None:
        """Why claims cannot be served now, or ``None`` (see :meth:`health`)."""
        return self.health().reason

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(
    path: str | None,
    memory: bool = False,
    *,
    env: Mapping[str, str] | None = None,
    synchronous: Synchronous = "FULL",
    create: bool = False,
) -> IpamStore:
    """The node's store: SQLite at ``path`` (or ``$DRANET_CLOUD_IPAM_DB``, or the default).

    ``memory=True`` gives a :class:`MemoryStore` and is only for an operator who
    asked for it: its allocations vanish with the process.
    """
    if memory:
        if path:
            raise ConfigError(
                f"ipam: both an in-memory store and the database {path} were requested; choose one"
            )
        log.warning("ipam: using an in-memory store; allocations are lost when the process exits")
        return MemoryStore()
    return SqliteStore(resolve_db_path(path, env), synchronous=synchronous, create=create)
