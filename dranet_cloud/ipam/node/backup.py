"""``dranet-cloud ipam backup``: a consistent copy of the live IPAM database.

Copying ``ipam.db`` with ``cp`` while ``serve`` runs is not a backup: the
newest allocations sit in ``ipam.db-wal`` until a checkpoint, and a copy
taken between the two files' writes can be torn.  SQLite's online backup API
copies every page inside one read transaction, so the copy is the database as
of one instant: every allocation committed (and so acknowledged to DRANET,
which answers only after the commit) before the backup started is in it, and
nothing half-written is.  In WAL mode that reader never blocks the server's
writers, so claims keep being served while the copy is made.

The copy is written next to its destination under a temporary name, made a
self-contained single file (rollback journal, no ``-wal``), checked with
``PRAGMA integrity_check``, flushed to disk and only then renamed into place:
an interrupted backup never leaves a file that looks like a good one.  The
source is never migrated or written: its schema version is copied as it is.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dranet_cloud.ipam.node.transactions import DEFAULT_BUSY_TIMEOUT
from dranet_cloud.toolkit.errors import ConfigError


@dataclass(frozen=True)
class BackupResult:
    """What was copied: the files, the schema version and the allocations it holds."""

    source: str
    target: str
    schema: int
    allocations: int
    bytes: int

    def to_json(self) -> dict[str, object]:
        return {
            "from": self.source,
            "to": self.target,
            "schema": self.schema,
            "allocations": self.allocations,
            "bytes": self.bytes,
            "integrity": "ok",
        }


def _open_source(path: str, busy_timeout: float) -> sqlite3.Connection:
    """The live database, opened without creating, migrating or writing anything."""
    if not Path(path).is_file():
        raise ConfigError(
            f"ipam backup: no IPAM database at {path}; pass --ipam-db PATH (the file `serve` uses)"
        )
    uri = "file:" + Path(path).resolve().as_posix().replace("?", "%3f").replace("#", "%23")
    try:
        conn = sqlite3.connect(uri + "?mode=rw", uri=True, timeout=busy_timeout)
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    except sqlite3.Error as exc:
        raise ConfigError(f"ipam backup: cannot open {path} ({exc})") from exc
    return conn


def _check(conn: sqlite3.Connection, source: str) -> tuple[int, int]:
    """(schema version, allocations) of the copy, after ``PRAGMA integrity_check``."""
    rows = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(5)").fetchall()]
    if rows != ["ok"]:
        raise ConfigError(
            f"ipam backup: the copy of {source} fails its integrity check "
            f"({'; '.join(rows)[:300]}); the source itself may be damaged: run "
            f"`sqlite3 {source} 'PRAGMA integrity_check'`"
        )
    schema = int(conn.execute("PRAGMA user_version").fetchone()[0])
    try:
        count = int(conn.execute("SELECT COUNT(*) FROM allocations").fetchone()[0])
    except sqlite3.Error as exc:
        raise ConfigError(
            f"ipam backup: {source} holds no allocations table ({exc}); is it an IPAM database?"
        ) from exc
    return schema, count


def backup(source: str, target: str, *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> BackupResult:
    """Copy the IPAM database ``source`` to ``target`` (which must not exist yet)."""
    src_path, dst_path = Path(source), Path(target)
    if dst_path.exists() or dst_path.is_symlink():
        raise ConfigError(
            f"ipam backup --to {target}: the file exists; choose a new name (a backup never "
            "replaces a file, least of all the live database)"
        )
    if not dst_path.parent.is_dir():
        raise ConfigError(f"ipam backup --to {target}: no directory {dst_path.parent}")
    src = _open_source(str(src_path), busy_timeout)
    fd, tmp = tempfile.mkstemp(prefix=f".{dst_path.name}.", suffix=".tmp", dir=dst_path.parent)
    os.close(fd)  # mkstemp made it 0600: claim UIDs and addresses stay private
    try:
        dst = sqlite3.connect(tmp)
        try:
            # pages=-1: the whole database in one step, i.e. one read transaction.
            src.backup(dst, pages=-1)
            dst.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
            schema, count = _check(dst, source)
        finally:
            dst.close()
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        try:
            os.link(tmp, dst_path)  # unlike rename, never replaces a file made meanwhile
        except FileExistsError:
            raise ConfigError(
                f"ipam backup --to {target}: the file appeared while copying; choose a new name"
            ) from None
        dir_fd = os.open(dst_path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except sqlite3.Error as exc:
        raise ConfigError(f"ipam backup: copying {source} to {target} failed: {exc}") from exc
    finally:
        src.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        for suffix in ("-journal", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp + suffix)
    return BackupResult(str(src_path), str(dst_path), schema, count, dst_path.stat().st_size)
