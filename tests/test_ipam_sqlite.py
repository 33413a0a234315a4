"""The SQLite store: persistence, configuration, threads, processes and SIGKILL."""

from __future__ import annotations

import ipaddress
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from dranet_cloud.ipam import (
    DEFAULT_IPAM_DB,
    IPAM_DB_ENV,
    MemoryStore,
    Owner,
    SqliteStore,
    open_store,
)
from dranet_cloud.ipam.node.sqlite import resolve_db_path
from dranet_cloud.toolkit.errors import (
    AddressConflict,
    ConfigError,
    ProviderUnavailable,
    WouldBlock,
)
from dranet_cloud.toolkit.iprange import ip_range_from_cidr

V4 = ip_range_from_cidr("10.0.0.0/22")
V6 = ip_range_from_cidr("2001:db8::/64")
REPO = Path(__file__).resolve().parents[1]


def owner(n: int | str, device: str = "eth1") -> Owner:
    return Owner("pool", device, f"claim-{n}")


def run_python(code: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=env,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )


# -- persistence and configuration -----------------------------------------


def test_allocations_survive_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "ipam.db"
    with SqliteStore(path) as store:
        first = store.allocate(owner(1), [V4, V6])
        store.reserve(owner(2), ["10.0.0.9/22"])
        before = store.list()
    with SqliteStore(path) as store:
        assert store.list() == before  # owners, addresses, static flag, creation times
        assert store.allocate(owner(1), [V4, V6]) == first
        assert len(store.list()) == 3
        store.release(owner(1))
    with SqliteStore(path) as store:
        assert [a.owner for a in store.list()] == [owner(2)]


def test_database_uses_wal_and_full_sync_by_default(tmp_path: Path) -> None:
    path = tmp_path / "ipam.db"
    with SqliteStore(path) as store:
        assert store._connection().execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert store._connection().execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    with SqliteStore(path, synchronous="NORMAL", busy_timeout=1.5) as store:
        assert store._connection().execute("PRAGMA synchronous").fetchone()[0] == 1
        assert store._connection().execute("PRAGMA busy_timeout").fetchone()[0] == 1500
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_creates_missing_parent_directories(tmp_path: Path) -> None:
    path = tmp_path / "var" / "lib" / "dranet-cloud" / "ipam.db"
    with SqliteStore(path) as store:
        store.allocate(owner(1), [V4])
    assert path.is_file()


def test_unusable_locations_are_config_errors(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigError, match=f"{IPAM_DB_ENV}"):
        SqliteStore(blocker / "ipam.db")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not an sqlite database at all" * 100)
    with pytest.raises(ConfigError, match=r"garbage\.db"):
        SqliteStore(garbage)


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ipam.db"
    SqliteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(ConfigError, match="schema version 99"):
        SqliteStore(path)


def test_indexes_an_older_release_made_are_dropped_and_nothing_else_changes(
    tmp_path: Path,
) -> None:
    """Two indexes of earlier releases cost every commit a page and served no query;
    opening drops them, keeps the rows and the schema version (an older release that
    opens the file again just recreates them)."""
    path = tmp_path / "ipam.db"
    with SqliteStore(path) as store:
        held = store.allocate(owner(1), [V4])
    older = sqlite3.connect(path)
    older.execute("CREATE INDEX allocations_by_owner ON allocations (pool, device, claim_uid)")
    older.execute("CREATE INDEX allocations_by_age ON allocations (created_at)")
    older.commit()
    older.close()

    with SqliteStore(path) as store:
        assert store.allocate(owner(1), [V4]) == held
        assert [a.address for a in store.held(owner(1))] == held
    check = sqlite3.connect(path)
    try:
        names = {str(n) for (n,) in check.execute("SELECT name FROM sqlite_master")}
        assert "allocations_by_owner" not in names and "allocations_by_age" not in names
        assert "allocations_by_claim" in names
        assert check.execute("PRAGMA user_version").fetchone()[0] == 2
    finally:
        check.close()


def _steps(store: SqliteStore, action: Callable[[], object]) -> int:
    """SQLite virtual-machine instructions ``action`` ran on the store's connection."""
    count = [0]

    def tick() -> int:
        count[0] += 1
        return 0

    conn = store._connection()
    conn.set_progress_handler(tick, 1)
    try:
        action()
    finally:
        conn.set_progress_handler(None, 1)
    return count[0]


def test_claim_work_does_not_grow_with_what_the_nic_holds(tmp_path: Path) -> None:
    """Every claim on a node is on a few NICs: a retry, a lookup or a release of one
    claim must find its rows by claim, never walk the NIC's (the planner prefers the
    device index for ``device IN (?)`` unless told)."""
    ranges = [V4, ip_range_from_cidr("fd00:9::/64")]
    steps: list[dict[str, int]] = []
    for held_on_nic in (20, 600):
        with SqliteStore(tmp_path / f"ipam-{held_on_nic}.db") as store:
            for i in range(held_on_nic):
                store.allocate(owner(i), ranges)
            steps.append(
                {
                    "retry": _steps(store, lambda: store.allocate(owner(7), ranges)),
                    "held": _steps(store, lambda: store.held(owner(7))),
                    "release": _steps(store, lambda: store.release(owner(7))),
                }
            )
    small, large = steps
    for action, count in small.items():
        # 30x the rows on the NIC: at most a few more B-tree levels, not 30x the steps.
        assert large[action] < 2 * count + 200, (action, small, large)


def test_closed_store_refuses_work(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "ipam.db")
    store.close()
    store.close()
    with pytest.raises(ConfigError, match="closed"):
        store.allocate(owner(1), [V4])


def test_a_writer_holding_the_lock_makes_the_store_temporarily_unavailable(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ipam.db"
    store = SqliteStore(path, busy_timeout=0.05)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(ProviderUnavailable, match="locked"):
        store.allocate(owner(1), [V4])
    other.execute("COMMIT")
    other.close()
    assert len(store.allocate(owner(1), [V4])) == 1
    store.close()


def test_open_store_resolution(tmp_path: Path) -> None:
    assert resolve_db_path(None, {}) == DEFAULT_IPAM_DB == "/var/lib/dranet-cloud/ipam.db"
    assert resolve_db_path(None, {IPAM_DB_ENV: "/x/y.db"}) == "/x/y.db"
    assert resolve_db_path("/a.db", {IPAM_DB_ENV: "/x/y.db"}) == "/a.db"
    env_path = tmp_path / "from-env.db"
    store = open_store(None, env={IPAM_DB_ENV: str(env_path)})
    assert isinstance(store, SqliteStore)
    assert store.path == str(env_path)
    store.close()
    assert isinstance(open_store(None, memory=True), MemoryStore)
    with pytest.raises(ConfigError, match="choose one"):
        open_store(str(env_path), memory=True)


# -- concurrency -------------------------------------------------------------


def test_threads_sharing_one_store_and_threads_with_their_own(tmp_path: Path) -> None:
    path = tmp_path / "ipam.db"
    shared = SqliteStore(path)
    results: dict[Owner, list[str]] = {}
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work(store: SqliteStore, device: str) -> None:
        try:
            for i in range(40):
                got = store.allocate(owner(i, device), [V4, V6])
                with lock:
                    results[owner(i, device)] = got
        except BaseException as exc:  # reported below
            errors.append(exc)

    own = [SqliteStore(path) for _ in range(3)]
    threads = [threading.Thread(target=work, args=(shared, f"s{t}")) for t in range(6)]
    threads += [threading.Thread(target=work, args=(s, f"o{t}")) for t, s in enumerate(own)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(results) == 9 * 40
    v4 = [r[0] for r in results.values()]
    v6 = [r[1] for r in results.values()]
    assert len(set(v4)) == len(v4) == 360
    assert len(set(v6)) == len(v6) == 360
    for o, got in results.items():
        assert shared.allocate(o, [V4, V6]) == got
    assert len(shared.list()) == 720
    for s in [shared, *own]:
        s.close()


def test_store_carried_across_fork_opens_its_own_connection(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "ipam.db")
    store.allocate(owner("parent-0"), [V4])
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 0
        try:
            got = [store.allocate(owner(f"child-{i}"), [V4])[0] for i in range(30)]
            os.write(write_end, json.dumps(got).encode())
        except BaseException:
            code = 1
        os._exit(code)
    os.close(write_end)
    parent = [store.allocate(owner(f"parent-{i}"), [V4])[0] for i in range(1, 31)]
    with os.fdopen(read_end) as pipe:
        child = json.loads(pipe.read())
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(set(parent + child)) == 60
    assert len(store.list()) == 61
    store.close()


ALLOCATOR = """
import json, sys
from dranet_cloud.ipam import Owner, SqliteStore
from dranet_cloud.toolkit.iprange import ip_range_from_cidr
path, worker, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
v4, v6 = ip_range_from_cidr("10.0.0.0/19"), ip_range_from_cidr("2001:db8::/64")
# NORMAL: the same locks and transactions as FULL without an fsync per commit,
# so the test measures contention, not the disk (benchmarks/ipam.py runs FULL).
# A long busy timeout: this test is about distinct addresses under contention;
# the bounded lock wait has its own tests, and a loaded CI machine must not
# turn a slow turn at the lock into a failure here.
store = SqliteStore(path, synchronous="NORMAL", busy_timeout=60.0)
print("ready", flush=True)
sys.stdin.readline()
got = {}
for i in range(count):
    got[f"claim-{i}"] = store.allocate(Owner("pool", worker, f"claim-{i}"), [v4, v6])
print(json.dumps(got), flush=True)
"""


def test_eight_processes_allocating_from_one_file(tmp_path: Path) -> None:
    """Done-when line: 8 processes x 500 allocations, all distinct, all stable.

    The workers start together and allocate from a /19 (8190 addresses) so that
    half of it fills up while they contend for the write lock.
    """
    path = tmp_path / "ipam.db"
    SqliteStore(path).close()
    procs = [run_python(ALLOCATOR, str(path), f"w{n}", "500") for n in range(8)]
    for p in procs:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
    for p in procs:  # release them together so they really contend
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    results: dict[Owner, list[str]] = {}
    for n, p in enumerate(procs):
        assert p.stdin is not None and p.stdout is not None
        p.stdin.close()
        out = p.stdout.read()
        p.stdout.close()
        assert p.wait(timeout=120) == 0
        for claim, got in json.loads(out).items():
            results[Owner("pool", f"w{n}", claim)] = got
    assert len(results) == 4000
    assert len({got[0] for got in results.values()}) == 4000
    assert len({got[1] for got in results.values()}) == 4000
    with SqliteStore(path) as store:
        assert len(store.list()) == 8000
        for o in random.Random(1).sample(sorted(results), 400):
            assert store.allocate(o, [V4, V6]) == results[o]
        assert len(store.list()) == 8000


# -- SIGKILL while allocating ------------------------------------------------

CHURNER = """
import random, sys
from dranet_cloud.toolkit.errors import AddressConflict, RangeExhausted
from dranet_cloud.ipam import Owner, SqliteStore
from dranet_cloud.toolkit.iprange import ip_range_from_cidr
path, seed = sys.argv[1], int(sys.argv[2])
v4, v6 = ip_range_from_cidr("10.0.0.0/26"), ip_range_from_cidr("2001:db8::/120")
store = SqliteStore(path)
r = random.Random(seed)
print("ready", flush=True)
while True:
    n = r.randrange(40)
    who = Owner("pool", "eth1", f"c{n}")
    x = r.random()
    if x < 0.6:
        print(f"B {n}", flush=True)
        try:
            got = store.allocate(who, [v4, v6])
            print(f"A {n} {got[0]} {got[1]}", flush=True)
        except RangeExhausted:
            print(f"X {n}", flush=True)
    elif x < 0.9:
        print(f"B {n}", flush=True)
        store.release(who)
        print(f"R {n}", flush=True)
    elif x < 0.97:
        static = Owner("static", "eth1", f"s{n % 8}")
        try:
            store.reserve(static, [f"10.0.0.{r.randrange(1, 63)}"])
        except AddressConflict:
            pass
    else:
        store.release(Owner("static", "eth1", f"s{n % 8}"))
"""


CHURN_V4 = ip_range_from_cidr("10.0.0.0/26")
CHURN_V6 = ip_range_from_cidr("2001:db8::/120")
Model = dict[int, "tuple[str, ...] | None"]


def check_consistent(path: Path, model: Model) -> None:
    """What must hold after any kill: a sound file, no address twice, nothing partial,
    and every acknowledged operation durable."""
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        dupes = conn.execute(
            "SELECT family, addr_key, COUNT(*) FROM allocations GROUP BY family, addr_key "
            "HAVING COUNT(*) > 1"
        ).fetchall()
        assert dupes == []
        per_family = conn.execute(
            "SELECT pool, device, claim_uid, family, COUNT(*) FROM allocations "
            "WHERE static = 0 GROUP BY pool, device, claim_uid, family HAVING COUNT(*) > 1"
        ).fetchall()
        assert per_family == []
    finally:
        conn.close()
    with SqliteStore(path) as store:
        allocs = store.list()
    assert len({a.address for a in allocs}) == len(allocs)
    held: dict[int, list[str]] = {}
    for a in allocs:
        if a.static:
            assert a.owner.pool == "static"
            continue
        assert a.address in CHURN_V4 or a.address in CHURN_V6
        held.setdefault(int(a.owner.claim_uid[1:]), []).append(a.address)
    for addresses in held.values():  # never a partial allocation
        assert [ipaddress.ip_interface(x).version for x in addresses] == [4, 6], addresses
    for claim, expected in model.items():
        if expected is not None:
            assert tuple(held.get(claim, ())) == expected, claim


def test_sigkill_while_allocating_leaves_a_consistent_store(tmp_path: Path) -> None:
    path = tmp_path / "ipam.db"
    # model: claim number -> addresses it certainly holds, None when uncertain
    # (the operation in flight at the kill may or may not have committed)
    model: Model = {}
    picker = random.Random(42)
    for run in range(12):
        proc = run_python(CHURNER, str(path), str(run))
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        lines: list[str] = []
        for _ in range(picker.randrange(5, 120)):
            lines.append(proc.stdout.readline())
        proc.send_signal(signal.SIGKILL)
        # read what is left through the same buffered stream (communicate() would
        # bypass the lines already buffered by readline)
        lines += proc.stdout.read().splitlines(keepends=True)
        assert proc.wait(timeout=10) == -signal.SIGKILL
        assert proc.stdin is not None
        proc.stdin.close()
        proc.stdout.close()
        in_flight: int | None = None
        for line in lines:
            if not line.endswith("\n"):
                break  # torn last line
            kind, n, *addresses = line.split()
            claim = int(n)
            if kind == "B":
                in_flight = claim
                continue
            in_flight = None
            if kind == "A":
                known = model.get(claim, ())
                if known:  # idempotency across kills and restarts
                    assert tuple(addresses) == known, (run, claim)
                model[claim] = tuple(addresses)
            elif kind == "X":
                assert not model.get(claim), "a holder must get its addresses back"
                model[claim] = ()
            else:
                model[claim] = ()
        if in_flight is not None:
            model[in_flight] = None
        check_consistent(path, model)
    assert sum(1 for v in model.values() if v) > 0  # the churn really allocated


# -- deferred writes (the server's event loop) ----------------------------------------


def _committed_rows(path: Path) -> set[str]:
    """What another connection (another process would see the same) finds on disk."""
    with sqlite3.connect(path) as other:
        return {str(row[0]) for row in other.execute("SELECT claim_uid FROM allocations")}


def test_deferred_writes_are_not_visible_until_committed(tmp_path: Path) -> None:
    path = tmp_path / "ipam.db"
    with SqliteStore(path) as store:
        with store.deferred_writes() as scope:
            first = store.allocate(owner(1), [V4, V6])
            second = store.allocate(owner(2), [V4])
        assert len(scope.batches) == 1  # both writes share one open group
        assert _committed_rows(path) == set()  # nothing durable, nothing to tell anyone
        assert store.commit_if_clean(scope.batches) is False  # it holds changes: needs an fsync
        store.commit_deferred(scope.batches)
        assert _committed_rows(path) == {"claim-1", "claim-2"}
        assert store.allocate(owner(1), [V4, V6]) == first
        assert store.allocate(owner(2), [V4]) == second


def test_a_deferred_retry_commits_on_the_spot_without_writing(tmp_path: Path) -> None:
    path = tmp_path / "ipam.db"
    with SqliteStore(path) as store:
        held = store.allocate(owner(1), [V4])
        with store.deferred_writes() as scope:
            assert store.allocate(owner(1), [V4]) == held
        assert scope.batches and store.commit_if_clean(scope.batches) is True
        assert all(b.done.is_set() for b in scope.batches)
        # The next write starts a new transaction: the old one really ended.
        assert len(store.allocate(owner(2), [V4])) == 1
        assert _committed_rows(path) == {"claim-1", "claim-2"}


def test_deferred_writes_never_wait_for_another_process(tmp_path: Path) -> None:
    path = tmp_path / "ipam.db"
    with SqliteStore(path, busy_timeout=5.0) as store:
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        try:
            with store.deferred_writes() as scope, pytest.raises(WouldBlock, match="locked"):
                store.allocate(owner(1), [V4])
            assert scope.batches == []
            # An ordinary caller waits for the other process again: the lock is
            # let go 0.3 s later, and the write goes through instead of failing.
            later = threading.Timer(0.3, lambda: other.execute("COMMIT"))
            later.start()
            assert len(store.allocate(owner(1), [V4])) == 1
            later.join()
        finally:
            if other.in_transaction:
                other.execute("COMMIT")
            other.close()
        assert store._connection().execute("PRAGMA busy_timeout").fetchone()[0] == 5000
        assert _committed_rows(path) == {"claim-1"}


def test_deferred_writes_never_wait_for_another_thread(tmp_path: Path) -> None:
    path = tmp_path / "ipam.db"
    with SqliteStore(path) as store:
        entered, leave = threading.Event(), threading.Event()

        def slow_writer() -> None:
            with store._transaction():  # holds the store lock, as a worker thread would
                entered.set()
                leave.wait(10)

        writer = threading.Thread(target=slow_writer)
        writer.start()
        try:
            assert entered.wait(10)
            with store.deferred_writes(), pytest.raises(WouldBlock, match="another thread"):
                store.allocate(owner(1), [V4])
            with store.deferred_writes(), pytest.raises(WouldBlock):
                store.held(owner(1))
        finally:
            leave.set()
            writer.join(10)
        assert store.allocate(owner(1), [V4])


def test_a_failed_deferred_write_keeps_the_rest_of_its_group(tmp_path: Path) -> None:
    path = tmp_path / "ipam.db"
    with SqliteStore(path) as store:
        store.reserve(owner("holder"), ["10.0.0.9/32"])
        with store.deferred_writes() as scope:
            kept = store.allocate(owner(1), [V4])
            with pytest.raises(AddressConflict, match="already held"):
                store.reserve(owner(2), ["10.0.0.9/32"])
            # A read that needs a commit first refuses rather than fsync here.
            with pytest.raises(WouldBlock, match="waiting for their commit"):
                store.list()
        store.commit_deferred(scope.batches)
        assert _committed_rows(path) == {"claim-holder", "claim-1"}
        assert store.allocate(owner(1), [V4]) == kept


def test_a_failed_commit_is_raised_to_whoever_waits_for_the_group(tmp_path: Path) -> None:
    path = tmp_path / "ipam.db"
    with SqliteStore(path) as store:
        with store.deferred_writes() as scope:
            store.allocate(owner(1), [V4])
        # What _commit_batch does when COMMIT fails (disk full, I/O error).
        (batch,) = scope.batches
        store._batch = None
        store._connection().execute("ROLLBACK")
        batch.error = ConfigError("ipam: injected COMMIT failure")
        batch.done.set()
        with pytest.raises(ConfigError, match="injected"):
            store.commit_deferred(scope.batches)
        with pytest.raises(ConfigError, match="injected"):
            store.commit_if_clean(scope.batches)
        assert _committed_rows(path) == set()
