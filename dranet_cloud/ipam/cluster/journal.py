"""The node's SQLite store as the journal of a cluster-scope allocator.

An address belongs to a claim only once the API created its ``IPAddress``
(:mod:`.allocator`).  The node store works as in node scope and records, in
one more table of the same file, where each row stands with the API:

* ``pending``: the intent.  The row was committed *before* the create was
  sent, so a crash, a lost reply or a timeout leaves a trace that the next
  try (or the collector) resolves by reading the object back;
* ``bound``: the API answered 201 (or the object was found naming this
  claim); the object's UID is recorded, and only now may the address be
  handed out;
* ``releasing``: a release is deleting the object (recorded *before* the
  delete, so the node's own deletes are never taken for someone else's and
  repaired); a row left in it (the delete failed) is retried by the collector.

A row without a record in that table was written in node scope (the node
switched scopes); the allocator treats it like an intent.

While a cluster call runs on the thread (:func:`cluster_call`) the
candidate search of :class:`~dranet_cloud.ipam.node.sqlite.SqliteStore` also
skips what the range's :class:`RangeView` shows taken elsewhere, and each
inserted row gets its ``pending`` record in the same transaction; the rest is
the node store's own code.
"""

from __future__ import annotations

import bisect
import heapq
import random
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from dranet_cloud.ipam.base import Allocation, Owner
from dranet_cloud.ipam.node import rows as sqlite_rows
from dranet_cloud.ipam.node.sqlite import SqliteStore
from dranet_cloud.toolkit.iprange import IPRange, address_of

PENDING = "pending"
BOUND = "bound"
RELEASING = "releasing"
UNBACKED = "unbacked"  # a row written in node scope: no object record at all

_OBJECTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS ip_address_objects (
    family   INTEGER NOT NULL,
    addr_key TEXT    NOT NULL,  -- as in allocations: the row this record is about
    state    TEXT    NOT NULL CHECK (state IN ('pending', 'bound', 'releasing')),
    uid      TEXT,              -- the IPAddress object's metadata.uid once known
    PRIMARY KEY (family, addr_key)
) WITHOUT ROWID
"""

_ROW_COLUMNS = (
    "a.family, a.addr_key, a.address, a.pool, a.device, a.claim_uid, a.static, a.created_at, "
    "a.claim_namespace, a.claim_name, a.claim_pods"
)


class RangeView:
    """The addresses of one range that the cluster holds, as far as this node knows.

    Fed by the range's watch (:mod:`.range_view`: the objects of the blocks
    this node uses), by this node's own creates and deletes, and by every 409
    it meets (an address someone holds that the watch does not show: an
    object without a block label, or one the watch has not delivered yet).
    It only steers the choice of a candidate; the create's 409 is what keeps
    addresses unique, so a stale view costs a wasted write, never a duplicate.
    """

    def __init__(self, rng: IPRange, home: int = 0) -> None:
        self.range = rng
        self.lo = int(rng.start)
        self.hi = int(rng.end)
        self._taken: list[int] = []
        self._lock = threading.Lock()
        # Where this node's next search starts (an offset into the range):
        # first the home derived from the node's name, then next fit.
        self.home = home % rng.size
        self.start = self.home
        self._random = random.Random(home)

    def advance(self, value: int) -> None:
        """Next fit: the next search starts after ``value`` (taken by this node, or
        found taken), so a node's allocations cost no walk over its own earlier ones."""
        self.home = (value - self.lo + 1) % self.range.size

    def jump(self, spans: Sequence[tuple[int, int]], choices: int = 3) -> None:
        """After a lost race (a create answered 409 for an address the view showed
        free), restart the search inside one of the widest free stretches of
        ``spans`` (inclusive value bounds: the watched blocks), not right after
        the lost address.

        Why: the node that won is filling the same stretch and goes on at the
        next address; a loser that went there too would meet it again at every
        step.  Which of the ``choices`` widest stretches, and where in its middle
        half, is drawn at random, so two losers do not pick the same point.
        """
        gaps: list[tuple[int, int]] = []  # (size, first value)
        with self._lock:
            for lo, hi in spans:
                lo, hi = max(lo, self.lo), min(hi, self.hi)
                if lo > hi:
                    continue
                prev = lo - 1
                i = bisect.bisect_left(self._taken, lo)
                j = bisect.bisect_right(self._taken, hi)
                for value in self._taken[i:j]:
                    if value - prev > 1:
                        gaps.append((value - prev - 1, prev + 1))
                    prev = value
                if hi > prev:
                    gaps.append((hi - prev, prev + 1))
        if not gaps:
            return
        gaps.sort(reverse=True)
        size, first = self._random.choice(gaps[:choices])
        quarter = size // 4
        start = first + quarter + self._random.randrange(max(1, size - 2 * quarter))
        self.home = (start - self.lo) % self.range.size

    def add(self, value: int) -> None:
        with self._lock:
            i = bisect.bisect_left(self._taken, value)
            if i == len(self._taken) or self._taken[i] != value:
                self._taken.insert(i, value)

    def discard(self, value: int) -> None:
        with self._lock:
            i = bisect.bisect_left(self._taken, value)
            if i < len(self._taken) and self._taken[i] == value:
                del self._taken[i]

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, int):
            return False
        with self._lock:
            i = bisect.bisect_left(self._taken, value)
            return i < len(self._taken) and self._taken[i] == value

    def between(self, lo: int, hi: int) -> list[int]:
        """Taken values in ``[lo, hi]``, ascending (a copy: others may add meanwhile)."""
        with self._lock:
            i = bisect.bisect_left(self._taken, lo)
            j = bisect.bisect_right(self._taken, hi)
            return self._taken[i:j]

    def __len__(self) -> int:
        return len(self._taken)


@dataclass(frozen=True)
class JournalRow:
    """One address of the journal and where it stands with the API."""

    allocation: Allocation
    family: int
    value: int
    state: str  # PENDING, BOUND, RELEASING or UNBACKED
    uid: str | None

    @property
    def name(self) -> str:
        """The IPAddress object's name: the address in canonical form."""
        return str(address_of(self.family, self.value))

    @property
    def owner(self) -> Owner:
        return self.allocation.owner

    @property
    def address(self) -> str:
        return self.allocation.address


class _Call(threading.local):
    views: dict[int, RangeView] | None = None
    inserted: list[JournalRow] | None = None


_CALL = _Call()


class ViewStart:
    """The journal's :class:`~.requests.RandomSource`: a search starts at the home of
    the range's view in a :func:`cluster_call`, at a random point otherwise (the
    node-scope pools that share the journal)."""

    def __init__(self) -> None:
        self._other = random.SystemRandom()

    def randrange(self, stop: int, /) -> int:
        # The store asks for an offset in a range of ``stop`` addresses; a call
        # has one range per family, told apart by their sizes.
        for view in (_CALL.views or {}).values():
            if view.range.size == stop:
                return view.home
        return self._other.randrange(stop)


@contextmanager
def cluster_call(views: dict[int, RangeView]) -> Iterator[list[JournalRow]]:
    """Journal writes on this thread see ``views`` and record intents; yields
    the rows inserted meanwhile (fresh intents)."""
    outer = (_CALL.views, _CALL.inserted)
    inserted: list[JournalRow] = []
    _CALL.views, _CALL.inserted = views, inserted
    try:
        yield inserted
    finally:
        _CALL.views, _CALL.inserted = outer


def _merged(
    local: Callable[[int, int], Iterator[int]], view: RangeView
) -> Callable[[int, int], Iterator[int]]:
    def scan(lo: int, hi: int) -> Iterator[int]:
        mine = local(lo, hi)
        last: int | None = None
        try:
            for value in heapq.merge(mine, view.between(lo, hi)):
                if value != last:
                    last = value
                    yield value
        finally:
            mine.close()  # type: ignore[attr-defined]

    return scan


class ClusterJournal(SqliteStore):
    """A :class:`SqliteStore` that also records each address's object state."""

    def _open(self) -> sqlite3.Connection:
        conn = super()._open()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(_OBJECTS_SCHEMA)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            conn.close()
            raise
        return conn

    # -- the node store's hooks, changed only inside cluster_call ------------------

    def _scan(  # type: ignore[override]
        self, conn: sqlite3.Connection, family: int
    ) -> Callable[[int, int], Iterator[int]]:
        local = SqliteStore._scan(conn, family)
        views = _CALL.views
        view = views.get(family) if views else None
        return local if view is None else _merged(local, view)

    def _insert(  # type: ignore[override]
        self, conn: sqlite3.Connection, alloc: Allocation, family: int, value: int
    ) -> None:
        SqliteStore._insert(conn, alloc, family, value)
        inserted = _CALL.inserted
        if inserted is not None:
            conn.execute(
                "INSERT OR REPLACE INTO ip_address_objects (family, addr_key, state, uid) "
                "VALUES (?, ?, ?, NULL)",
                (family, sqlite_rows.addr_key(family, value), PENDING),
            )
            inserted.append(JournalRow(alloc, family, value, PENDING, None))

    # -- reading ------------------------------------------------------------------------

    @staticmethod
    def _with_states(conn: sqlite3.Connection, rows: Sequence[sqlite_rows.Row]) -> list[JournalRow]:
        out: list[JournalRow] = []
        for row in rows:
            family, key = int(row[0]), str(row[1])
            found = conn.execute(
                "SELECT state, uid FROM ip_address_objects WHERE family = ? AND addr_key = ?",
                (family, key),
            ).fetchone()
            state, uid = (UNBACKED, None) if found is None else (str(found[0]), found[1])
            out.append(JournalRow(sqlite_rows.to_allocation(row), family, int(key, 16), state, uid))
        return out

    def row_at(self, family: int, value: int) -> JournalRow | None:
        """The row holding the address ``value`` of ``family``, if any (one per address)."""
        key = sqlite_rows.addr_key(family, value)
        with self._snapshot() as conn:
            rows = conn.execute(
                f"SELECT {_ROW_COLUMNS} FROM allocations a WHERE a.family = ? AND a.addr_key = ?",
                (family, key),
            ).fetchall()
            found = self._with_states(conn, rows)
        return found[0] if found else None

    def rows(self, owner: Owner) -> list[JournalRow]:
        """What ``owner`` holds (its NIC's linked identities included), with states."""
        with self._snapshot() as conn:
            _main, devices = sqlite_rows.identities(conn, owner, strict=False)
            return self._with_states(conn, sqlite_rows.rows_of(conn, owner, devices))

    def all_rows(self, state: str | None = None) -> list[JournalRow]:
        """Every row (or only those recorded in ``state``), with states."""
        with self._snapshot() as conn:
            if state is None:
                rows = conn.execute(
                    f"SELECT {_ROW_COLUMNS} FROM allocations a "
                    "ORDER BY a.pool, a.device, a.claim_uid, a.family, a.addr_key"
                ).fetchall()
            else:
                rows = conn.execute(
                    f"SELECT {_ROW_COLUMNS} FROM allocations a JOIN ip_address_objects o "
                    "ON o.family = a.family AND o.addr_key = a.addr_key WHERE o.state = ? "
                    "ORDER BY a.pool, a.device, a.claim_uid, a.family, a.addr_key",
                    (state,),
                ).fetchall()
            return self._with_states(conn, rows)

    # -- writing ------------------------------------------------------------------------

    def set_state(
        self,
        row: JournalRow,
        state: str,
        uid: str | None,
        *,
        expect: Sequence[str] | None = None,
        expect_uid: str | None = None,
    ) -> bool:
        """Record ``state`` (and the object's UID) for ``row``; False when the row is gone,
        or (with ``expect``) when its state is not one of ``expect`` or (with
        ``expect_uid``) its UID is another: a compare-and-set.

        A row released while its create was in flight is gone or ``releasing``:
        the caller then owns an object nobody records and must delete it.
        """
        key = sqlite_rows.addr_key(row.family, row.value)
        with self._transaction() as conn:
            held = conn.execute(
                "SELECT 1 FROM allocations WHERE family = ? AND addr_key = ? AND claim_uid = ? "
                "AND pool = ?",
                (row.family, key, row.owner.claim_uid, row.owner.pool),
            ).fetchone()
            if held is None:
                return False
            if expect is not None or expect_uid is not None:
                found = conn.execute(
                    "SELECT state, uid FROM ip_address_objects WHERE family = ? AND addr_key = ?",
                    (row.family, key),
                ).fetchone()
                now, now_uid = (UNBACKED, None) if found is None else (str(found[0]), found[1])
                if expect is not None and now not in expect:
                    return False
                if expect_uid is not None and now_uid != expect_uid:
                    return False
            conn.execute(
                "INSERT OR REPLACE INTO ip_address_objects (family, addr_key, state, uid) "
                "VALUES (?, ?, ?, ?)",
                (row.family, key, state, uid),
            )
            return True

    def forget(self, rows: Sequence[JournalRow]) -> None:
        """Drop ``rows`` (an intent that lost, or addresses whose objects are gone)."""
        if not rows:
            return
        with self._transaction() as conn:
            for row in rows:
                key = sqlite_rows.addr_key(row.family, row.value)
                deleted = conn.execute(
                    "DELETE FROM allocations WHERE family = ? AND addr_key = ? AND claim_uid = ? "
                    "AND pool = ?",
                    (row.family, key, row.owner.claim_uid, row.owner.pool),
                ).rowcount
                if deleted:  # the metrics' tally counts it once committed
                    self._staged.append((row.owner.pool, row.family, row.value, -1))
                conn.execute(
                    "DELETE FROM ip_address_objects WHERE family = ? AND addr_key = ? AND NOT "
                    "EXISTS (SELECT 1 FROM allocations WHERE family = ? AND addr_key = ?)",
                    (row.family, key, row.family, key),
                )
            sqlite_rows.forget_unused_keys(conn, (row.owner.device for row in rows))
