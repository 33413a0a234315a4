"""Hyper-V KVP pool files (``/var/lib/hyperv/.kvp_pool_<N>``), read and written.

The Hyper-V KVP daemon (``hv_kvp_daemon``) keeps the key/value pairs the
host pushes into a guest in these files: a plain sequence of records, each a
512-byte key and a 2048-byte value, NUL-padded, no header.  The daemon
rewrites records in place, so neither the file's size nor its mtime says
whether a value changed: a reader re-reads the whole file when it needs a
fresh view.

The ``azure-ipoib`` profile (:mod:`.profile`) reads the pool through
:func:`read_pool` (byte-limited) and :func:`decode_pool` (refuses a file
that is not whole records: a truncated file is an error, never a shorter
answer); the sample host and the tests write one with :func:`encode_pool`.
Azure is the only cloud whose facts arrive this way, so the format lives in
this plugin, not in the core.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

# The pool the host's own keys (IPoIB_Data among them) arrive in.
DEFAULT_POOL_PATH = "/var/lib/hyperv/.kvp_pool_0"
KEY_SIZE = 512
VALUE_SIZE = 2048
RECORD_SIZE = KEY_SIZE + VALUE_SIZE
# The daemon's pools hold tens of records; 400 is far more than any holds.
MAX_POOL_BYTES = 400 * RECORD_SIZE


class KvpPoolError(ValueError):
    """A pool that cannot be read or is not a sequence of whole KVP records."""


def encode_pool(records: Iterable[tuple[str, str]]) -> bytes:
    """The pool file holding ``records`` (key, value) in order, NUL-padded."""
    out = bytearray()
    for key, value in records:
        raw_key, raw_value = key.encode(), value.encode()
        if len(raw_key) > KEY_SIZE or len(raw_value) > VALUE_SIZE:
            raise ValueError(
                f"KVP record {key[:40]!r}: key or value over {KEY_SIZE}/{VALUE_SIZE} bytes"
            )
        out += raw_key.ljust(KEY_SIZE, b"\0") + raw_value.ljust(VALUE_SIZE, b"\0")
    return bytes(out)


def read_pool(path: Path, limit: int = MAX_POOL_BYTES) -> bytes:
    """The pool's bytes, at most ``limit`` of them (:class:`KvpPoolError` otherwise)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise KvpPoolError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise KvpPoolError(f"{path} is over {limit} bytes: not a KVP pool")
    return data


def _field(raw: bytes, where: str) -> str:
    text = raw.split(b"\0", 1)[0]
    try:
        return text.decode()
    except UnicodeDecodeError:
        raise KvpPoolError(f"{where} is not UTF-8 text") from None


def decode_pool(data: bytes, name: str) -> list[tuple[str, str]]:
    """The (key, value) records of a pool file; ``name`` is used in errors."""
    if len(data) % RECORD_SIZE:
        raise KvpPoolError(
            f"{name} is {len(data)} bytes, not a whole number of {RECORD_SIZE}-byte records "
            "(truncated, or not a KVP pool)"
        )
    out: list[tuple[str, str]] = []
    for start in range(0, len(data), RECORD_SIZE):
        where = f"record {start // RECORD_SIZE} of {name}"
        key = _field(data[start : start + KEY_SIZE], f"the key of {where}")
        value = _field(data[start + KEY_SIZE : start + RECORD_SIZE], f"the value of {where}")
        out.append((key, value))
    return out
