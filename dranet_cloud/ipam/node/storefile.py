"""The IPAM database as a file: is it still the one we opened, and may we start a new one?

SQLite keeps writing to the file it opened: with the database deleted or
replaced (a restore, a ``mv``, a wiped hostPath) under a running server, every
commit goes to an unlinked inode and a restart hands the same addresses out
afresh; and a zero-byte, schema-less or missing file where a store lived,
opened as "a new store", forgets every allocation.  So:

* at open, the identity (device, inode) of the database and of its ``-wal``
  and ``-shm`` files is recorded; :func:`file_problem` compares it with
  what the path holds now (a couple of ``stat`` calls, done on every
  transaction and ``/health``), and the store refuses to commit once they
  differ;
* a marker file next to the database (:data:`MARKER_SUFFIX`) says a store
  lives here.  A missing database with the marker or a ``-wal`` still
  present, an empty file, or a file without the schema is refused unless the
  operator passes ``--ipam-db-create``;
* a new database is built under a temporary name and linked into place
  complete, so a crash while creating never leaves a zero-byte file that the
  next start would (rightly) refuse.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import time
from collections.abc import Iterable

from dranet_cloud.toolkit.errors import ConfigError

log = logging.getLogger(__name__)

MARKER_SUFFIX = ".marker"
_COMPANIONS = ("-wal", "-shm")
CREATE_FLAG = "--ipam-db-create"

FileIdentity = tuple[tuple[str, int, int], ...]


class StoreFileError(ConfigError):
    """The database file is not the store it should be (lost, replaced, empty, no schema)."""


def is_plain_path(path: str) -> bool:
    """False for ``:memory:`` and ``file:`` URIs, which have no file to guard."""
    return path != ":memory:" and not path.startswith("file:")


def marker_path(path: str) -> str:
    return path + MARKER_SUFFIX


def _evidence_of_a_store(path: str) -> list[str]:
    """Files next to a missing database that show a store lived at ``path``."""
    return [p for p in (marker_path(path), path + "-wal") if os.path.exists(p)]


def _move_aside(paths: Iterable[str]) -> None:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for p in paths:
        if os.path.exists(p):
            aside = f"{p}.stale-{stamp}"
            os.replace(p, aside)
            log.warning("ipam: moved the stale %s aside to %s (%s)", p, aside, CREATE_FLAG)


def prepare(path: str, *, create: bool, schema: Iterable[str], version: int) -> None:
    """Make sure opening ``path`` will not silently start a new, empty store.

    Creates the database (complete, with ``schema``) when nothing ever lived
    at ``path``, or when ``create`` says the operator wants a fresh store.
    Raises :class:`StoreFileError` for an empty file, or a missing one with a
    store's traces, without ``create``.
    """
    if not is_plain_path(path):
        return
    try:
        size: int | None = os.stat(path).st_size
    except FileNotFoundError:
        size = None
    except OSError as exc:
        raise StoreFileError(f"ipam: cannot look at the IPAM database {path} ({exc})") from exc
    if size is not None and size > 0:
        return  # an existing database: the opener checks its schema
    if size == 0:
        if not create:
            raise StoreFileError(
                f"ipam: the IPAM database {path} is empty (0 bytes): the store that lived there "
                "was truncated or lost, and starting afresh would hand out addresses that "
                "running pods may hold; restore the file from a backup, or pass "
                f"{CREATE_FLAG} to start an empty store knowingly"
            )
        stale = [path, *(path + c for c in _COMPANIONS)]
        _move_aside(stale)
    else:
        traces = _evidence_of_a_store(path)
        if traces and not create:
            raise StoreFileError(
                f"ipam: no IPAM database at {path}, but {' and '.join(traces)} show that a store "
                "lived there: the database was deleted or moved, and starting afresh would hand "
                "out addresses that running pods may hold; restore the file from a backup, or "
                f"pass {CREATE_FLAG} to start an empty store knowingly"
            )
        if traces:
            _move_aside(path + c for c in _COMPANIONS)
    _create_complete(path, schema, version)


def _create_complete(path: str, schema: Iterable[str], version: int) -> None:
    """Build an empty store under a temporary name, then link it to ``path`` (never partial).

    The file is 0600 (SQLite gives the ``-wal`` and ``-shm`` files the same
    mode: claim UIDs and addresses are nobody else's business).  Another
    process creating the same store at the same moment wins the link; ours is
    dropped.
    """
    tmp = f"{path}.new-{os.getpid()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.close(fd)
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("BEGIN")
            for statement in schema:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
        finally:
            conn.close()
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            log.info("ipam: another process created %s first; using its store", path)
        _fsync_directory(path)
    except (OSError, sqlite3.Error) as exc:
        raise StoreFileError(
            f"ipam: cannot create the IPAM database {path} ({exc}); pass --ipam-db PATH or "
            "set DRANET_CLOUD_IPAM_DB to a writable location"
        ) from exc
    finally:
        for leftover in (tmp, tmp + "-journal"):
            try:
                os.unlink(leftover)
            except FileNotFoundError:
                pass
            except OSError as exc:  # pragma: no cover - the directory was writable a moment ago
                log.warning("ipam: cannot remove %s: %s", leftover, exc)
    log.info("ipam: created a new, empty IPAM database at %s", path)


def _fsync_directory(path: str) -> None:
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_marker(path: str) -> None:
    """Leave the marker that says a store lives at ``path`` (best effort)."""
    if not is_plain_path(path):
        return
    marker = marker_path(path)
    if os.path.exists(marker):
        return
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(
                f"dranet-cloud: the IPAM store {os.path.basename(path)} lives here. If it is "
                f"missing or empty, the daemon refuses to start until it is restored or "
                f"{CREATE_FLAG} is passed.\n"
            )
    except FileExistsError:
        pass
    except OSError as exc:
        log.warning(
            "ipam: cannot write the marker %s (%s); a lost store is noticed only "
            "while its -wal file remains",
            marker,
            exc,
        )


def identity(path: str) -> FileIdentity:
    """(device, inode) of the database and of its ``-wal``/``-shm`` files that exist now."""
    if not is_plain_path(path):
        return ()
    found: list[tuple[str, int, int]] = []
    for name in (path, *(path + c for c in _COMPANIONS)):
        try:
            st = os.stat(name)
        except OSError:
            continue
        found.append((name, st.st_dev, st.st_ino))
    return tuple(found)


def file_problem(recorded: FileIdentity) -> str | None:
    """Why the files at the recorded paths are no longer the ones opened, or ``None``."""
    for name, dev, ino in recorded:
        try:
            st = os.stat(name)
        except FileNotFoundError:
            how = "was deleted"
        except OSError as exc:
            how = f"cannot be checked ({exc})"
        else:
            if (st.st_dev, st.st_ino) == (dev, ino):
                continue
            how = "was replaced by another file"
        return (
            f"ipam: {name} {how} while this process had the store open: commits would go to a "
            "file nobody will read again, so claims are refused; restore the file, or restart "
            f"(a missing or empty store then needs {CREATE_FLAG} to start afresh)"
        )
    return None


def unwritable(path: str) -> str | None:
    """Why this process cannot write the database at ``path`` (or ``None``): the real cause.

    SQLite says only "unable to open database file" or "attempt to write a
    readonly database" when the directory (where the ``-wal`` and ``-shm``
    files must be created) or a file is not writable, which reads like a
    damaged file.  A read-only filesystem (a hostPath mounted ``readOnly``, a
    filesystem remounted read-only after errors) and missing permissions are
    told apart, with the owner and mode of the part that refuses.
    """
    if not is_plain_path(path):
        return None
    directory = os.path.dirname(os.path.abspath(path))
    for target, what in (
        (directory, "directory"),
        (path, "file"),
        (path + "-wal", "file"),
        (path + "-shm", "file"),
    ):
        try:
            if not os.path.exists(target) or os.access(target, os.W_OK):
                continue
            read_only = bool(os.statvfs(target).f_flag & os.ST_RDONLY)
            st = os.stat(target)
        except OSError:
            continue
        if read_only:
            return (
                f"the {what} {target} is on a read-only filesystem (mount it read-write: the "
                "hostPath volume of the IPAM database must not be readOnly)"
            )
        return (
            f"the {what} {target} is not writable by this process (uid {os.geteuid()}; it is "
            f"owned by uid {st.st_uid} with mode {stat.filemode(st.st_mode)}): make it writable "
            "for this user"
        )
    return None


def directory_warnings(path: str, why: str | None = "") -> list[str]:
    """Degraded, not broken: the open store still commits, but a restart may not open it.

    ``why``: :func:`unwritable`'s answer when the caller has it already.
    """
    if why == "":
        why = unwritable(path)
    if why is None:
        return []
    return [
        f"ipam: {why}; the open store still commits, but a restart could not open it for writing"
    ]
