"""Where the IPAM database is, its tables, their version, and the migration from older files.

The schema is versioned with ``PRAGMA user_version`` so that a file written
by another release is recognised: an older one is migrated in the opener's
transaction (every row kept), a newer one is refused rather than misread.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Mapping

from dranet_cloud.node.nic import legacy_keys

__all__ = [
    "DEFAULT_IPAM_DB",
    "IPAM_DB_ENV",
    "SCHEMA",
    "SCHEMA_VERSION",
    "UNUSED_INDEXES",
    "migrate_from_1",
    "resolve_db_path",
]

log = logging.getLogger(__name__)

DEFAULT_IPAM_DB = "/var/lib/dranet-cloud/ipam.db"
IPAM_DB_ENV = "DRANET_CLOUD_IPAM_DB"

# 1: the first release (owners keyed by DeviceIdentifiers.name or MAC or PCI).
# 2: owners keyed by the NIC's stable identity, every key it was seen under in
#    device_keys, and the claim's namespace/name/pods on each allocation.
SCHEMA_VERSION = 2

_SCHEMA_1 = """
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
UNUSED_INDEXES = ("allocations_by_owner", "allocations_by_age")

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

_CLAIM_COLUMNS = ("claim_namespace", "claim_name", "claim_pods")


def _statements(script: str) -> list[str]:
    return [s for s in script.split(";") if s.strip()]


SCHEMA: tuple[str, ...] = (*_statements(_SCHEMA_1), *_statements(_SCHEMA_2))
"""Every statement of the current schema, each idempotent (``IF NOT EXISTS``)."""


def migrate_from_1(conn: sqlite3.Connection) -> None:
    """Schema 1 -> 2 inside the opener's transaction; every row is kept as it is.

    Schema-1 owners hold a raw name, MAC or PCI address in ``device``; the
    keys it stands for are recorded (``eth1`` -> ``name:eth1``,
    ``pci-0000-00-05-0`` -> ``pci:0000:00:05.0`` too), so the NIC's new
    identity finds them and a release in any form frees them.
    """
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


def resolve_db_path(
    path: str | os.PathLike[str] | None, env: Mapping[str, str] | None = None
) -> str:
    """``path`` if given, else ``$DRANET_CLOUD_IPAM_DB``, else the default file."""
    if path is not None and str(path) != "":
        return str(path)
    environ = os.environ if env is None else env
    return environ.get(IPAM_DB_ENV) or DEFAULT_IPAM_DB
