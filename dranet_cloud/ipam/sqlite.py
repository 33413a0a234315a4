"""The durable IPAM store: one SQLite file per node, shared by threads and processes.

Why it is safe:

* every operation is one ``BEGIN IMMEDIATE`` transaction, so it takes the
  database's write lock before it reads anything it will decide on; two
  processes can never both see an address as free;
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
"""

from __future__ import annotations

import json
import logging
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..errors import AddressConflict, ConfigError, ProviderUnavailable, RangeExhausted
from ..iprange import IPRange, address_of
from . import storefile
from .base import Allocation, IpamStore, Owner, pick_identities
from .freesearch import first_free
from .memory import Clock, MemoryStore, utc_now
from .requests import (
    InvalidIpamRequest,
    RandomSource,
    host_cidr,
    ordered_ranges,
    parse_static,
    require_collect_bounds,
    start_offset,
)
from .tally import AllocationTally, Delta

if TYPE_CHECKING:
    from ..claims import ClaimReference

log = logging.getLogger(__name__)

DEFAULT_IPAM_DB = "/var/lib/dranet-cloud/ipam.db"
IPAM_DB_ENV = "DRANET_CLOUD_IPAM_DB"
# 1: the first release (owners keyed by DeviceIdentifiers.name or MAC or PCI).
# 2: owners keyed by the NIC's stable identity, every key it was seen under in
#    device_keys, and the claim's namespace/name/pods on each allocation.
SCHEMA_VERSION = 2
# Shorter than DRANET's 10 s request timeout: a request that cannot get the
# lock in time fails clearly (and is retried by the kubelet) instead of queueing.
DEFAULT_BUSY_TIMEOUT = 5.0
# At most this many concurrent writes share one COMMIT (one fsync).
MAX_GROUP_COMMIT = 64
_WRITABLE_RECHECK = 1.0

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS allocations (
    id         INTEGER PRIMARY KEY,
    family     INTEGER NOT NULL CHECK (family IN (4, 6)),
    addr_key   TEXT    NOT NULL,  -- address as fixed-width hex: text order = numeric order
    address    TEXT    NOT NULL,  -- host CIDR as handed out (10.0.0.5/32)
    pool       TEXT    NOT NULL,
    device     TEXT    NOT NULL,  -- the NIC's identity: mac:..., pci:... or name:...
    claim_uid  TEXT    NOT NULL,
    static     INTEGER NOT NULL CHECK (static IN (0, 1)),
    created_at REAL    NOT NULL,  -- seconds since the Unix epoch
    claim_namespace TEXT,         -- NULL when the caller sent only the claim UID
    claim_name      TEXT,
    claim_pods      TEXT,         -- JSON [{"name": ..., "uid": ...}]
    UNIQUE (family, addr_key)
);
CREATE UNIQUE INDEX IF NOT EXISTS allocations_one_dynamic_per_family
    ON allocations (pool, device, claim_uid, family) WHERE static = 0;
"""

# Indexes of earlier releases that no query needs: a claim's rows are found by
# allocations_by_claim, and the garbage collector's age filter reads the whole
# (node-sized) table anyway.  Each cost every allocation an index page in its
# commit.  Dropping them changes no data, so the schema version stays; an older
# release that opens the file creates them again, which is harmless.
_UNUSED_INDEXES = ("allocations_by_owner", "allocations_by_age")

# Schema 2 additions; also what the migration from schema 1 runs.
_SCHEMA_2 = """
CREATE TABLE IF NOT EXISTS device_keys (
    device TEXT NOT NULL,  -- an identity in allocations.device
    key    TEXT NOT NULL,  -- a form the NIC was seen under: mac:, pci:, name:
    PRIMARY KEY (device, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS allocations_by_claim ON allocations (claim_uid, pool);
CREATE INDEX IF NOT EXISTS allocations_by_device ON allocations (device);
CREATE TABLE IF NOT EXISTS store_meta (
    key   TEXT PRIMARY KEY,  -- e.g. cluster_uid: the cluster the claims came from
    value TEXT NOT NULL
) WITHOUT ROWID;
"""

# Every statement that finds a claim's rows names its index.  Without ANALYZE
# statistics SQLite answers ``device IN (?)`` from allocations_by_device, which
# walks every row the NIC holds (thousands on a busy node) instead of the
# claim's two or three.
_CLAIM_ROWS = "allocations INDEXED BY allocations_by_claim"

_CLAIM_COLUMNS = ("claim_namespace", "claim_name", "claim_pods")

_COLUMNS = (
    "family, addr_key, address, pool, device, claim_uid, static, created_at, "
    "claim_namespace, claim_name, claim_pods"
)
_Row = tuple[int, str, str, str, str, str, int, float, str | None, str | None, str | None]


def _statements(script: str) -> list[str]:
    return [s for s in script.split(";") if s.strip()]


def _migrate_from_1(conn: sqlite3.Connection) -> None:
    """Schema 1 -> 2 inside the opener's transaction; every row is kept as it is.

    Schema-1 owners hold a raw name, MAC or PCI address in ``device``; the
    keys it stands for are recorded (``eth1`` -> ``name:eth1``,
    ``pci-0000-00-05-0`` -> ``pci:0000:00:05.0`` too), so the NIC's new
    identity finds them and a release in any form frees them.
    """
    from ..nic import legacy_keys

    present = {row[1] for row in conn.execute("PRAGMA table_info(allocations)")}
    for column in _CLAIM_COLUMNS:
        if column not in present:
            conn.execute(f"ALTER TABLE allocations ADD COLUMN {column} TEXT")
    for statement in _statements(_SCHEMA_2):
        conn.execute(statement)
    devices = [str(d) for (d,) in conn.execute("SELECT DISTINCT device FROM allocations")]
    conn.executemany(
        "INSERT OR IGNORE INTO device_keys (device, key) VALUES (?, ?)",
        [(d, k) for d in devices for k in sorted(legacy_keys(d))],
    )
    log.info("ipam: migrated the IPAM database from schema 1 to 2 (%d devices)", len(devices))


def _addr_key(family: int, value: int) -> str:
    return f"{value:08x}" if family == 4 else f"{value:032x}"


def _claim_of(
    claim_uid: str, namespace: str | None, name: str | None, pods: str | None
) -> ClaimReference | None:
    if namespace is None and name is None and pods is None:
        return None
    from ..claims import ClaimReference, PodReference

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


def _to_allocation(row: _Row, keys: frozenset[str] = frozenset()) -> Allocation:
    _family, _key, address, pool, device, claim_uid, static, created, ns, name, pods = row
    return Allocation(
        owner=Owner(pool, device, claim_uid, keys),
        address=address,
        static=bool(static),
        created_at=datetime.fromtimestamp(created, timezone.utc),
        claim=_claim_of(claim_uid, ns, name, pods),
    )


def resolve_db_path(
    path: str | os.PathLike[str] | None, env: Mapping[str, str] | None = None
) -> str:
    """``path`` if given, else ``$DRANET_CLOUD_IPAM_DB``, else the default file."""
    if path is not None and str(path) != "":
        return str(path)
    environ = os.environ if env is None else env
    return environ.get(IPAM_DB_ENV) or DEFAULT_IPAM_DB


class _Batch:
    """Writes that share one COMMIT; ``done`` is set once it committed or failed.

    ``changes_at_begin`` is the connection's change counter when the group's
    transaction began: a group whose writes changed nothing (a kubelet retry)
    commits without touching the disk.
    """

    __slots__ = ("changes_at_begin", "deltas", "done", "error", "size")

    def __init__(self, changes_at_begin: int = 0) -> None:
        self.done = threading.Event()
        self.error: Exception | None = None
        self.size = 0
        self.changes_at_begin = changes_at_begin
        self.deltas: list[Delta] = []  # for the tally, once committed


class WouldBlock(BaseException):
    """A write inside :meth:`SqliteStore.deferred_writes` would have had to wait.

    The store lock is held by another thread, or another process holds the
    database's write lock.  Nothing was read or written; the caller runs the
    request again where waiting is allowed.  It derives from
    ``BaseException`` so that the plugin and host code between the caller
    and the store, which turns ordinary exceptions into error answers, lets
    it through untouched.
    """


class DeferredWrites:
    """What :meth:`SqliteStore.deferred_writes` collected: the groups left open.

    Their writes are not durable, and nobody may learn of them, until
    :meth:`SqliteStore.commit_deferred` (or :meth:`SqliteStore.commit_if_clean`)
    has committed every group listed here.
    """

    __slots__ = ("batches", "store")

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.batches: list[_Batch] = []


_THREAD = threading.local()


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


class SqliteStore:
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
        self.path = str(path)
        self.synchronous = synchronous
        self.busy_timeout = busy_timeout
        self._random: RandomSource = rng if rng is not None else random.SystemRandom()
        self._clock: Clock = clock if clock is not None else utc_now
        self._lock = threading.Lock()
        # Group commit: writers that arrive while another holds the lock join
        # its open transaction; the last one in commits for all (see _transaction).
        self._count_lock = threading.Lock()
        self._waiting = 0
        self._batch: _Batch | None = None
        self.integrity_problem: str | None = None
        self._write_error: str | None = None
        self._writable_checked = 0.0
        self._warnings: tuple[str, ...] = ()
        self._create = create
        self._files: storefile.FileIdentity = ()
        self._abandoned: list[sqlite3.Connection] = []  # inherited across fork: never touched
        self._pid = os.getpid()
        self._busy_ms = int(busy_timeout * 1000)
        # The connection's busy timeout now: 0 while the loop's deferred writes
        # use it (they must not wait), set back before a write that may wait.
        self._conn_busy_ms = self._busy_ms
        # Addresses held per pool and range (``/metrics``), kept as commits land;
        # ``_staged`` holds the changes of the write under way.
        self.tally = AllocationTally()
        self._staged: list[Delta] = []
        self._data_version = 0
        self._conn: sqlite3.Connection | None = self._open()

    # -- connection and transactions ---------------------------------------

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
            schema=_statements(_SCHEMA) + _statements(_SCHEMA_2),
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
                    _migrate_from_1(conn)
                for statement in _statements(_SCHEMA) + _statements(_SCHEMA_2):
                    conn.execute(statement)
                for index in _UNUSED_INDEXES:
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

    def _file_problem(self) -> str | None:
        """Why the file at the path is no longer the one opened (a few ``stat`` calls)."""
        return storefile.file_problem(self._files) if self._files else None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise ConfigError(f"ipam: the store {self.path} is closed")
        if os.getpid() != self._pid:
            # A connection must not be used on both sides of a fork; keep the
            # parent's object alive (closing it here could disturb the parent)
            # and open our own.
            self._abandoned.append(self._conn)
            self._pid = os.getpid()
            self._conn = self._open()
        return self._conn

    def _error(self, exc: sqlite3.Error) -> Exception:
        text = str(exc)
        if isinstance(exc, sqlite3.OperationalError) and "locked" in text:
            return ProviderUnavailable(
                f"ipam: the IPAM database {self.path} stayed locked for more than "
                f"{self.busy_timeout:g} s ({text}); another process holds a long transaction, "
                "retry later"
            )
        self._write_error = text
        return ConfigError(
            f"ipam: the IPAM database {self.path} failed ({text}); check the file "
            f"(PRAGMA integrity_check) or point --ipam-db/{IPAM_DB_ENV} elsewhere"
        )

    def _acquire(self, waiting: bool) -> None:
        """Take the connection lock within ``busy_timeout``, or fail clearly."""
        if waiting:
            with self._count_lock:
                self._waiting += 1
        try:
            acquired = self._lock.acquire(timeout=self.busy_timeout)
        finally:
            if waiting:
                with self._count_lock:
                    self._waiting -= 1
        if not acquired:
            raise ProviderUnavailable(
                f"ipam: the IPAM store {self.path} was busy for more than "
                f"{self.busy_timeout:g} s (other requests hold it); retry later"
            )

    def _lock_for(self, *, waiting: bool) -> DeferredWrites | None:
        """Take the store lock; the :meth:`deferred_writes` scope of this thread, if any.

        Inside such a scope the lock is only tried: :class:`WouldBlock` when
        another thread holds it.
        """
        scope: DeferredWrites | None = getattr(_THREAD, "deferred", None)
        if scope is None or scope.store is not self:
            self._acquire(waiting=waiting)
            return None
        if not self._lock.acquire(blocking=False):
            raise WouldBlock(f"ipam: the store {self.path} is in use by another thread")
        return scope

    def _commit_batch(self, conn: sqlite3.Connection) -> None:
        """COMMIT the open group (under ``_lock``) and tell every member the outcome."""
        batch, self._batch = self._batch, None
        if batch is None:
            return
        try:
            lost = self._file_problem()
            if lost is not None:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                log.error("%s", lost)
                batch.error = storefile.StoreFileError(lost)
                return
            if conn.in_transaction:
                conn.execute("COMMIT")
                self.tally.apply(batch.deltas)
            self._write_error = None
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            batch.error = self._error(exc)
        finally:
            batch.done.set()

    def _await_commit(self, batch: _Batch) -> None:
        """Wait until the group ``batch`` is committed; commit it ourselves if nobody does."""
        while not batch.done.wait(0.02):
            if self._lock.acquire(blocking=False):
                try:
                    if self._batch is batch and self._conn is not None:
                        self._commit_batch(self._conn)
                finally:
                    self._lock.release()
        if batch.error is not None:
            raise batch.error

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write, atomic, committed together with writes that arrive meanwhile.

        Group commit: each write runs in a SAVEPOINT of one shared ``BEGIN
        IMMEDIATE`` transaction, so a failing write rolls back only itself.
        A writer that sees others waiting for the lock leaves the transaction
        open for them and waits; the last one commits for the whole group.
        With ``synchronous=FULL`` that is one fsync for many allocations, and
        nobody gets an answer before its allocation is durable.
        """
        scope = self._lock_for(waiting=True)
        failed: BaseException | None = None
        handoff = False
        try:
            conn = self._connection()
            batch = self._batch
            if batch is None:
                self._begin(conn, wait=scope is None)
                batch = self._batch = _Batch(conn.total_changes)
            try:
                conn.execute("SAVEPOINT ipam_write")
                self._staged = []
                yield conn
                conn.execute("RELEASE ipam_write")
                batch.deltas += self._staged
                batch.size += 1
            except BaseException as exc:
                failed = exc
                if conn.in_transaction:
                    conn.execute("ROLLBACK TO ipam_write")
                    conn.execute("RELEASE ipam_write")
                elif self._batch is batch:
                    # SQLite rolled the whole transaction back (I/O error, disk
                    # full): every write of the group is lost; say so to all.
                    self._batch = None
                    batch.error = (
                        self._error(exc)
                        if isinstance(exc, sqlite3.Error)
                        else ConfigError(
                            f"ipam: {self.path}: the transaction was rolled back ({exc}); "
                            "retry the request"
                        )
                    )
                    batch.done.set()
            if self._batch is batch:
                if scope is not None:
                    # Even after a failed write: the group may hold other writes,
                    # and a commit (an fsync) must not run on this thread.
                    if batch not in scope.batches:
                        scope.batches.append(batch)
                elif self._waiting > 0 and batch.size < MAX_GROUP_COMMIT:
                    handoff = True
                else:
                    self._commit_batch(conn)
        finally:
            self._lock.release()
        if failed is not None:
            if isinstance(failed, sqlite3.IntegrityError):
                raise AddressConflict(
                    f"ipam: {self.path} refused a duplicate record ({failed}); another "
                    "writer got there first, retry the request"
                ) from failed
            if isinstance(failed, sqlite3.Error):
                raise self._error(failed) from failed
            raise failed
        if handoff:
            self._await_commit(batch)
        elif batch.error is not None:
            raise batch.error

    def _busy(self, conn: sqlite3.Connection, ms: int) -> None:
        """Set the connection's busy timeout to ``ms`` unless it already is.

        Runs of deferred writes (busy timeout 0) and waiting writes alternate
        rarely, so this skips two PRAGMAs per group that a toggle around every
        ``BEGIN`` cost.
        """
        if self._conn_busy_ms != ms:
            conn.execute(f"PRAGMA busy_timeout = {ms}")
            self._conn_busy_ms = ms

    def _begin(self, conn: sqlite3.Connection, *, wait: bool) -> None:
        """``BEGIN IMMEDIATE``; without ``wait``, :class:`WouldBlock` instead of
        waiting for another process's write lock."""
        lost = self._file_problem()
        if lost is not None:
            raise storefile.StoreFileError(lost)
        try:
            self._busy(conn, self._busy_ms if wait else 0)
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if not wait and ("locked" in str(exc) or "busy" in str(exc)):
                raise WouldBlock(f"ipam: {self.path} is locked by another process") from None
            raise self._error(exc) from exc
        except sqlite3.Error as exc:
            raise self._error(exc) from exc

    @contextmanager
    def deferred_writes(self) -> Iterator[DeferredWrites]:
        """Writes on this thread neither wait nor commit until the caller says so.

        For a caller that must never block (the server's event loop): a write
        that would wait for the store lock or for another process raises
        :class:`WouldBlock` before touching anything, and a write that went
        through stays in the open group (listed in the scope) instead of
        being committed.  The caller must then commit the listed groups with
        :meth:`commit_if_clean` or :meth:`commit_deferred` *before* telling
        anyone what was written: until then it is not durable.
        """
        scope = DeferredWrites(self)
        outer = getattr(_THREAD, "deferred", None)
        _THREAD.deferred = scope
        try:
            yield scope
        finally:
            _THREAD.deferred = outer

    def commit_if_clean(self, batches: Sequence[_Batch]) -> bool:
        """Commit ``batches`` now if that writes nothing to disk; never blocks.

        True when every group is settled (committed here or by another
        thread); False when a group holds changes, or the lock is busy, so
        :meth:`commit_deferred` must run where waiting is allowed.  Raises a
        group's failure like :meth:`commit_deferred`.
        """
        if not self._lock.acquire(blocking=False):
            return False
        try:
            conn = self._conn
            for batch in batches:
                if self._batch is batch and conn is not None:
                    if conn.total_changes != batch.changes_at_begin:
                        return False
                    self._commit_batch(conn)
        finally:
            self._lock.release()
        self._raise_failed(batches)
        return True

    def commit_deferred(self, batches: Sequence[_Batch]) -> None:
        """Commit the groups a :meth:`deferred_writes` scope left open (one
        fsync for all of them); raises if any of them failed."""
        for batch in batches:
            if batch.done.is_set():
                continue
            self._acquire(waiting=False)
            try:
                if self._batch is batch and self._conn is not None:
                    self._commit_batch(self._conn)
            finally:
                self._lock.release()
        self._raise_failed(batches)

    @staticmethod
    def _raise_failed(batches: Sequence[_Batch]) -> None:
        for batch in batches:
            if not batch.done.is_set():  # pragma: no cover - groups end under the lock
                raise RuntimeError("ipam: a deferred write group was never committed")
            if batch.error is not None:
                raise batch.error

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: several SELECTs that see one state, no write lock."""
        scope = self._lock_for(waiting=False)
        try:
            conn = self._connection()
            if self._batch is not None:
                if scope is not None:
                    # Reporting it needs a commit first, and that may not run here.
                    raise WouldBlock(f"ipam: {self.path} has writes waiting for their commit")
                self._commit_batch(conn)  # never report what is not durable yet
            lost = self._file_problem()
            if lost is not None:
                raise storefile.StoreFileError(lost)
            try:
                self._busy(conn, self._busy_ms)
                conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    if conn.in_transaction:
                        conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise self._error(exc) from exc
        finally:
            self._lock.release()

    # -- queries used inside a transaction ------------------------------------

    @staticmethod
    def _claim_devices(conn: sqlite3.Connection, owner: Owner) -> list[str]:
        """The identities holding rows of the owner's claim in its pool."""
        return [
            str(d)
            for (d,) in conn.execute(
                f"SELECT DISTINCT device FROM {_CLAIM_ROWS} WHERE claim_uid = ? AND pool = ?",
                (owner.claim_uid, owner.pool),
            )
        ]

    @classmethod
    def _identities(
        cls,
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
            devices = cls._claim_devices(conn, owner)
        held: dict[str, frozenset[str]] = {}
        for device in devices:
            rows = conn.execute("SELECT key FROM device_keys WHERE device = ?", (device,))
            held[device] = frozenset(str(k) for (k,) in rows)
        target, found = pick_identities(owner, held, strict=strict)
        return Owner(owner.pool, target, owner.claim_uid, owner.all_keys), found

    @staticmethod
    def _rows_of(conn: sqlite3.Connection, owner: Owner, devices: Sequence[str]) -> list[_Row]:
        marks = ", ".join("?" for _ in devices)
        return list(
            conn.execute(
                f"SELECT {_COLUMNS} FROM {_CLAIM_ROWS} "
                f"WHERE claim_uid = ? AND pool = ? "
                f"AND device IN ({marks}) ORDER BY static, family, addr_key",
                (owner.claim_uid, owner.pool, *devices),
            ).fetchall()
        )

    @staticmethod
    def _record(conn: sqlite3.Connection, owner: Owner, devices: Sequence[str] = ()) -> None:
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

    @staticmethod
    def _fill_claim(
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
            f"UPDATE {_CLAIM_ROWS} SET claim_namespace = ?, claim_name = ?, claim_pods = ? "
            f"WHERE claim_uid = ? AND pool = ? AND device IN ({marks}) AND "
            "claim_namespace IS NULL AND claim_name IS NULL AND claim_pods IS NULL",
            (*_claim_values(claim), owner.claim_uid, owner.pool, *devices),
        )

    @staticmethod
    def _forget_unused_keys(conn: sqlite3.Connection, devices: Iterable[str]) -> None:
        """Drop the keys of identities among ``devices`` that hold nothing any more."""
        conn.executemany(
            "DELETE FROM device_keys WHERE device = ? "
            "AND NOT EXISTS (SELECT 1 FROM allocations WHERE device = ?)",
            [(d, d) for d in sorted(set(devices))],
        )

    @staticmethod
    def _scan(conn: sqlite3.Connection, family: int) -> Callable[[int, int], Iterator[int]]:
        def scan(lo: int, hi: int) -> Iterator[int]:
            cursor = conn.execute(
                "SELECT addr_key FROM allocations WHERE family = ? AND addr_key BETWEEN ? AND ? "
                "ORDER BY addr_key",
                (family, _addr_key(family, lo), _addr_key(family, hi)),
            )
            try:
                for (key,) in cursor:
                    yield int(key, 16)
            finally:
                cursor.close()

        return scan

    @staticmethod
    def _insert(conn: sqlite3.Connection, alloc: Allocation, family: int, value: int) -> None:
        """Store ``alloc``, whose address is ``value`` in IPv``family`` (known to
        every caller, so the text form is not parsed back; the caller stages it
        for the tally)."""
        conn.execute(
            f"INSERT INTO allocations ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                family,
                _addr_key(family, value),
                alloc.address,
                alloc.owner.pool,
                alloc.owner.device,
                alloc.owner.claim_uid,
                int(alloc.static),
                alloc.created_at.timestamp(),
                *_claim_values(alloc.claim),
            ),
        )

    # -- the store API -----------------------------------------------------

    def allocate(
        self, owner: Owner, ranges: Sequence[IPRange], *, claim: ClaimReference | None = None
    ) -> list[str]:
        wanted = ordered_ranges(owner, ranges)
        with self._transaction() as conn:
            claim_devices = self._claim_devices(conn, owner)
            main, devices = self._identities(conn, owner, devices=claim_devices)
            # A claim with no rows in this pool (a new claim) has nothing to read back.
            held = self._rows_of(conn, owner, devices) if claim_devices else []
            now = self._clock()
            result: list[str] = []
            for rng in wanted:
                existing = next((row for row in held if row[0] == rng.version), None)
                if existing is not None:
                    # Compared as stored (family, hex key): parsing the CIDR text
                    # again was a good part of a kubelet retry's cost.
                    if not int(rng.start) <= int(existing[1], 16) <= int(rng.end):
                        log.warning(
                            "ipam: %s keeps %s although it is outside the range %s it asked for",
                            owner,
                            existing[2],
                            rng,
                        )
                    result.append(existing[2])
                    continue
                begin = start_offset(rng, self._random)
                free = first_free(
                    int(rng.start), int(rng.end), begin, self._scan(conn, rng.version)
                )
                if free is None:
                    raise RangeExhausted(
                        f"ipam: no free address left in IPv{rng.version} range {rng} for "
                        f"{owner} ({rng.size} of {rng.size} held); free addresses with "
                        "`dranet-cloud ipam gc` or configure a larger range"
                    )
                alloc = Allocation(
                    main, host_cidr(address_of(rng.version, free)), False, now, claim
                )
                self._insert(conn, alloc, rng.version, free)
                self._staged.append((alloc.owner.pool, rng.version, free, 1))
                result.append(alloc.address)
            if held or result:
                self._record(conn, main, devices)
            if held:  # rows inserted just now already name the claim
                self._fill_claim(conn, owner, devices, claim)
            return result

    def reserve(
        self, owner: Owner, addresses: Sequence[str], *, claim: ClaimReference | None = None
    ) -> list[str]:
        wanted = parse_static(owner, addresses)
        with self._transaction() as conn:
            main, devices = self._identities(conn, owner)
            now = self._clock()
            for addr in wanted:
                row = conn.execute(
                    f"SELECT {_COLUMNS} FROM allocations WHERE family = ? AND addr_key = ?",
                    (addr.version, _addr_key(addr.version, int(addr))),
                ).fetchone()
                if row is None:
                    alloc = Allocation(main, host_cidr(addr), True, now, claim)
                    self._insert(conn, alloc, addr.version, int(addr))
                    self._staged.append((alloc.owner.pool, addr.version, int(addr), 1))
                    continue
                holder = _to_allocation(row)
                same = holder.owner.pool == owner.pool and holder.owner.claim_uid == owner.claim_uid
                if not same or holder.owner.device not in devices:
                    raise AddressConflict(
                        f"ipam: {addr} requested by {owner} is already held by {holder.owner} "
                        f"(since {holder.created_at.isoformat()}); pick another address or "
                        "release the holder's claim"
                    )
            if wanted:
                self._record(conn, main, devices)
                self._fill_claim(conn, owner, devices, claim)
            return [host_cidr(a) for a in wanted]

    def release(self, owner: Owner) -> list[str]:
        with self._transaction() as conn:
            _main, devices = self._identities(conn, owner, strict=False)
            marks = ", ".join("?" for _ in devices)
            where = f"claim_uid = ? AND pool = ? AND device IN ({marks})"
            params = (owner.claim_uid, owner.pool, *devices)
            rows = conn.execute(
                f"SELECT address, family, addr_key FROM {_CLAIM_ROWS} WHERE {where} "
                "ORDER BY family, addr_key",
                params,
            ).fetchall()
            conn.execute(f"DELETE FROM {_CLAIM_ROWS} WHERE {where}", params)
            if rows:
                self._forget_unused_keys(conn, devices)
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
                f"SELECT {_COLUMNS} FROM allocations WHERE {condition} "
                "ORDER BY pool, device, claim_uid, family, addr_key",
                params,
            ).fetchall()
            conn.execute(f"DELETE FROM allocations WHERE {condition}", params)
            if rows:
                self._forget_unused_keys(conn, (row[4] for row in rows))
            self._staged += [(row[3], row[0], int(row[1], 16), -1) for row in rows]
            if live is not None:
                conn.execute("DELETE FROM temp.live_claims")
        return [_to_allocation(row) for row in rows]

    def held(self, owner: Owner) -> list[Allocation]:
        """What ``owner`` holds: dynamic allocations first, then by family and address."""
        with self._snapshot() as conn:
            _main, devices = self._identities(conn, owner, strict=False)
            rows = self._rows_of(conn, owner, devices)
            keys = self._keys_of(conn, devices)
        return [_to_allocation(row, keys.get(row[4], frozenset())) for row in rows]

    @staticmethod
    def _keys_of(
        conn: sqlite3.Connection, devices: Iterable[str] | None
    ) -> dict[str, frozenset[str]]:
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

    def list(self) -> list[Allocation]:
        with self._snapshot() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM allocations "
                "ORDER BY pool, device, claim_uid, family, addr_key"
            ).fetchall()
            keys = self._keys_of(conn, None)
        return [_to_allocation(row, keys.get(row[4], frozenset())) for row in rows]

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

    @staticmethod
    def _count_range(conn: sqlite3.Connection, rng: IPRange) -> int:
        row = conn.execute(
            "SELECT count(*) FROM allocations WHERE family = ? AND addr_key BETWEEN ? AND ?",
            (
                rng.version,
                _addr_key(rng.version, int(rng.start)),
                _addr_key(rng.version, int(rng.end)),
            ),
        ).fetchone()
        return int(row[0])

    def _recount(self, conn: sqlite3.Connection) -> None:
        """Count the tally from the file (no write group may be open)."""
        rows = conn.execute("SELECT pool, count(*) FROM allocations GROUP BY pool").fetchall()
        self.tally.reset({str(p): int(n) for p, n in rows}, lambda r: self._count_range(conn, r))
        self._data_version = int(conn.execute("PRAGMA data_version").fetchone()[0])

    def watch_ranges(self, ranges: Sequence[IPRange]) -> None:
        """Count the addresses held in each of ``ranges`` in the tally from now on."""
        with self._snapshot() as conn:
            self.tally.watch(ranges, lambda r: self._count_range(conn, r))

    def recount_if_changed(self) -> bool:
        """Recount the tally if another process committed to the file since the last
        count; may wait for the store (never call it on the event loop)."""
        with self._snapshot() as conn:
            if int(conn.execute("PRAGMA data_version").fetchone()[0]) == self._data_version:
                return False
            self._recount(conn)
            return True

    def close(self) -> None:
        """Close the connection; later calls raise.  Closing twice is fine."""
        with self._lock:
            if self._conn is not None and os.getpid() == self._pid:
                if self._batch is not None:
                    self._commit_batch(self._conn)
                self._conn.close()
            self._conn = None

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
            self._warnings = tuple(storefile.directory_warnings(self.path))
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
