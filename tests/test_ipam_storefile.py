"""The store notices a lost, replaced, empty or schema-less database file (issue 26)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from dranet_cloud.ipam import Owner, SqliteStore, open_store
from dranet_cloud.ipam.node import storefile
from dranet_cloud.server.metrics import _store_health
from dranet_cloud.toolkit.errors import ConfigError
from dranet_cloud.toolkit.iprange import ip_range_from_cidr

V4 = ip_range_from_cidr("10.0.0.0/24")


def owner(n: int) -> Owner:
    return Owner("pool", "eth1", f"claim-{n}")


def test_first_start_creates_a_complete_store_and_its_marker(tmp_path: Path) -> None:
    db = tmp_path / "ipam.db"
    with SqliteStore(db) as store:
        assert store.allocate(owner(1), [V4])
        assert store.health().ok and store.health().warnings == ()
    assert (tmp_path / "ipam.db.marker").is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if ".new-" in p.name) == []
    assert oct(db.stat().st_mode & 0o777) == "0o600"


def test_an_empty_file_is_refused_without_create(tmp_path: Path) -> None:
    db = tmp_path / "ipam.db"
    db.write_bytes(b"")
    with pytest.raises(ConfigError) as info:
        SqliteStore(db)
    message = str(info.value)
    assert "is empty (0 bytes)" in message and "--ipam-db-create" in message and str(db) in message
    assert db.stat().st_size == 0  # refused, not touched
    with SqliteStore(db, create=True) as store:
        assert store.allocate(owner(1), [V4])
    assert [p.name for p in tmp_path.glob("ipam.db.stale-*")] != []


def test_a_database_without_the_schema_is_refused_without_create(tmp_path: Path) -> None:
    db = tmp_path / "ipam.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE unrelated (x)")
    conn.commit()
    conn.close()
    with pytest.raises(ConfigError, match=r"without the IPAM schema.*--ipam-db-create"):
        SqliteStore(db)
    with open_store(str(db), create=True) as store:
        assert store.allocate(owner(1), [V4])


@pytest.mark.parametrize("trace", ["ipam.db.marker", "ipam.db-wal"])
def test_a_missing_file_where_a_store_lived_needs_create(tmp_path: Path, trace: str) -> None:
    db = tmp_path / "ipam.db"
    with SqliteStore(db) as store:
        store.allocate(owner(1), [V4])
    db.unlink()
    for other in ("ipam.db.marker", "ipam.db-wal", "ipam.db-shm"):
        if other != trace:
            (tmp_path / other).unlink(missing_ok=True)
    (tmp_path / trace).write_bytes(b"x" * 32)  # a -wal of a lost store is never replayed
    with pytest.raises(ConfigError) as info:
        SqliteStore(db)
    assert "show that a store lived there" in str(info.value) and trace in str(info.value)
    assert not db.exists()
    with SqliteStore(db, create=True) as store:
        assert store.list() == []
        assert store.allocate(owner(2), [V4])


def test_deleting_the_files_under_an_open_store_stops_every_commit(tmp_path: Path) -> None:
    db = tmp_path / "ipam.db"
    store = SqliteStore(db)
    try:
        kept = store.allocate(owner(1), [V4])
        for name in ("ipam.db", "ipam.db-wal", "ipam.db-shm"):
            (tmp_path / name).unlink(missing_ok=True)
        health = store.health()
        assert not health.ok and health.reason is not None
        assert "was deleted" in health.reason and str(db) in health.reason
        assert store.health_problem() == health.reason
        with pytest.raises(ConfigError, match="was deleted"):
            store.allocate(owner(2), [V4])
        with pytest.raises(ConfigError, match="was deleted"):
            store.allocate(owner(1), [V4])  # not even a retry is acknowledged
        with pytest.raises(ConfigError, match="was deleted"):
            store.list()
    finally:
        store.close()
    assert kept
    with pytest.raises(ConfigError, match="show that a store lived there"):
        SqliteStore(db)  # the marker is still there


def test_a_file_replaced_under_an_open_store_is_noticed(tmp_path: Path) -> None:
    db = tmp_path / "ipam.db"
    other = tmp_path / "other" / "ipam.db"
    other.parent.mkdir()
    with SqliteStore(other) as second:
        second.allocate(owner(9), [V4])
    with SqliteStore(db) as store:
        store.allocate(owner(1), [V4])
        os.replace(other, db)
        health = store.health()
        assert not health.ok and health.reason is not None
        assert "was replaced by another file" in health.reason
        with pytest.raises(ConfigError, match="replaced"):
            store.allocate(owner(2), [V4])


def test_a_read_only_directory_is_a_warning_not_an_outage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "ipam.db"
    real_access = os.access

    def access(path: object, mode: int) -> bool:  # root may write anywhere: play non-root
        if mode == os.W_OK and os.fspath(path) == str(tmp_path):  # type: ignore[arg-type]
            return False
        return real_access(path, mode)  # type: ignore[arg-type]

    with SqliteStore(db) as store:
        monkeypatch.setattr(storefile.os, "access", access)
        health = store.health()
        assert health.ok and health.reason is None
        assert len(health.warnings) == 1 and "not writable" in health.warnings[0]
        assert str(tmp_path) in health.warnings[0]
        assert store.allocate(owner(1), [V4])  # claims are still served
        gauges = {m.name: m.samples[0].value for m in _store_health(store)}
        assert gauges == {
            "dranet_cloud_ipam_store_healthy": 1,
            "dranet_cloud_ipam_store_degraded": 1,
        }
