"""How the IPAM store writes: one connection, group commits, deferred writes.

Every write is one ``SAVEPOINT`` inside a shared ``BEGIN IMMEDIATE``
transaction, so it takes the database's write lock before it reads anything
it will decide on, and a failing write rolls back only itself.  Writers that
arrive while another holds the store lock join its open transaction; the
last one in commits for all (:data:`MAX_GROUP_COMMIT` at most): with
``synchronous=FULL`` one fsync serves many allocations, and nobody gets an
answer before its allocation is durable.

For the server's event loop, :meth:`SqliteTransactions.deferred_writes`
turns waiting into :class:`~dranet_cloud.toolkit.errors.WouldBlock` (recorded on the
scope, see there) and leaves commits to the caller.

:class:`SqliteTransactions` holds this machinery for
:class:`~dranet_cloud.ipam.node.sqlite.SqliteStore`, which adds opening the file
and the store API.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from dranet_cloud.ipam.node import storefile
from dranet_cloud.ipam.node.pool_counts import AllocationTally, Delta
from dranet_cloud.ipam.node.schema import IPAM_DB_ENV
from dranet_cloud.toolkit.errors import (
    AddressConflict,
    ConfigError,
    ProviderUnavailable,
    WouldBlock,
)

__all__ = [
    "DEFAULT_BUSY_TIMEOUT",
    "MAX_GROUP_COMMIT",
    "DeferredWrites",
    "SqliteTransactions",
    "WriteGroup",
    "would_block",
]

log = logging.getLogger(__name__)

# Shorter than DRANET's 10 s request timeout: a request that cannot get the
# lock in time fails clearly (and is retried by the kubelet) instead of queueing.
DEFAULT_BUSY_TIMEOUT = 5.0
# At most this many concurrent writes share one COMMIT (one fsync).
MAX_GROUP_COMMIT = 64


class WriteGroup:
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


class DeferredWrites:
    """What :meth:`SqliteTransactions.deferred_writes` collected: the groups left
    open (not durable until committed), and whether a step would have had to wait.

    ``blocked`` is the first :class:`WouldBlock` raised in the scope: once
    set, the request's outcome, whatever the code between the caller and the
    store made of the exception, is not its answer.
    """

    __slots__ = ("batches", "blocked", "store")

    def __init__(self, store: SqliteTransactions) -> None:
        self.store = store
        self.batches: list[WriteGroup] = []
        self.blocked: WouldBlock | None = None


class _Scope(threading.local):
    deferred: DeferredWrites | None = None


_THREAD = _Scope()


def would_block(reason: str) -> WouldBlock:
    """The :class:`WouldBlock` to raise, first recorded on this thread's
    deferred-writes scope (if any), where no handler in between can lose it."""
    exc = WouldBlock(reason)
    scope = _THREAD.deferred
    if scope is not None and scope.blocked is None:
        scope.blocked = exc
    return exc


class SqliteTransactions:
    """One SQLite connection used under a lock, with group commits and deferred writes.

    A subclass opens the file (:meth:`_open`) and sets ``_conn``; this class
    never decides what is stored.
    """

    def __init__(self, path: str | os.PathLike[str], busy_timeout: float) -> None:
        self.path = str(path)
        self.busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._count_lock = threading.Lock()
        self._waiting = 0
        self._batch: WriteGroup | None = None
        self._write_error: str | None = None
        self._unwritable: str | None = None  # why the store cannot write, last seen
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
        self._conn: sqlite3.Connection | None = None

    def _open(self) -> sqlite3.Connection:
        """A new connection to the file, its schema ready (the subclass's job)."""
        raise NotImplementedError

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
        why = storefile.unwritable(self.path)
        if why is not None:  # the real cause, not a file that looks damaged
            if self._conn is not None:  # serving (at open, the error itself is the one line)
                self.note_unwritable(why)
            return ConfigError(
                f"ipam: cannot write the IPAM database {self.path} ({text}): {why}; or point "
                f"--ipam-db/{IPAM_DB_ENV} at a writable location"
            )
        return ConfigError(
            f"ipam: the IPAM database {self.path} failed ({text}); check the file "
            f"(PRAGMA integrity_check) or point --ipam-db/{IPAM_DB_ENV} elsewhere"
        )

    def note_unwritable(self, why: str | None) -> None:
        """Log exactly one line when the store turns unwritable, and one when it is again.

        Called by every write that fails on it and by every ``/health``
        look; a store that stays read-only must not fill the log.
        """
        with self._count_lock:
            before, self._unwritable = self._unwritable, why
        if why is not None and before is None:
            log.error(
                "ipam: the IPAM database %s became unwritable: %s (/health warns until that is "
                "fixed; a restart could not open it)",
                self.path,
                why,
            )
        elif why is None and before is not None:
            log.warning("ipam: the IPAM database %s is writable again", self.path)

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
        scope = _THREAD.deferred
        if scope is None or scope.store is not self:
            self._acquire(waiting=waiting)
            return None
        if not self._lock.acquire(blocking=False):
            raise would_block(f"ipam: the store {self.path} is in use by another thread")
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

    def _await_commit(self, batch: WriteGroup) -> None:
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
        """One write, atomic, committed together with writes that arrive meanwhile
        (the group commit of the module doc)."""
        scope = self._lock_for(waiting=True)
        failed: BaseException | None = None
        handoff = False
        try:
            conn = self._connection()
            batch = self._batch
            if batch is None:
                self._begin(conn, wait=scope is None)
                batch = self._batch = WriteGroup(conn.total_changes)
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
                raise would_block(f"ipam: {self.path} is locked by another process") from None
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
        outer = _THREAD.deferred
        _THREAD.deferred = scope
        try:
            yield scope
        finally:
            _THREAD.deferred = outer

    def commit_if_clean(self, batches: Sequence[WriteGroup]) -> bool:
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

    def commit_deferred(self, batches: Sequence[WriteGroup]) -> None:
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
    def _raise_failed(batches: Sequence[WriteGroup]) -> None:
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
                    raise would_block(f"ipam: {self.path} has writes waiting for their commit")
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

    def close(self) -> None:
        """Close the connection; later calls raise.  Closing twice is fine."""
        with self._lock:
            if self._conn is not None and os.getpid() == self._pid:
                if self._batch is not None:
                    self._commit_batch(self._conn)
                self._conn.close()
            self._conn = None
