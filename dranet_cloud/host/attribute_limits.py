"""The API server's limits on device attributes.

A ResourceSlice with one bad attribute is rejected whole and the node then
publishes nothing (DRANET's e2e test hit this with ``dra.net/webhook-attr``),
so the host checks every attribute a plugin returns and drops the bad ones
with a warning instead of letting one plugin blank the node.
"""

from __future__ import annotations

import logging
import re

from dranet_cloud.toolkit.logsafe import safe
from dranet_cloud.wire.models import AttributeMap, DeviceAttribute

log = logging.getLogger(__name__)

MAX_ATTRIBUTES = 32
# Kubernetes 1.36 also caps a device at 48 attribute *values*: a scalar is
# one, a list attribute (``ints``/``bools``/``strings``/``versions``) counts
# each of its values.
MAX_ATTRIBUTE_VALUES = 48
MAX_NAME = 32
MAX_DOMAIN = 63
MAX_STRING_BYTES = 64

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

# Every pattern is used with ``fullmatch``: ``$`` would also match before a
# trailing newline, and ``dra.net/x\n`` or ``1.2.3\n`` gets a whole
# ResourceSlice rejected by the API server.
_C_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SEMVER = re.compile(
    r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)


def attribute_name_problem(qualified: str) -> str | None:
    """Why ``qualified`` is not a valid QualifiedName, or ``None`` when valid."""
    domain, _, name = qualified.rpartition("/")
    if not _C_IDENTIFIER.fullmatch(name):
        return (
            f"name {name!r} is not a C identifier ([A-Za-z][A-Za-z0-9_]*; "
            "hyphens and dots are rejected by the API server)"
        )
    if len(name) > MAX_NAME:
        return f"name {name!r} is longer than {MAX_NAME} characters"
    if "/" in qualified:
        if len(domain) > MAX_DOMAIN:
            return f"domain {domain!r} is longer than {MAX_DOMAIN} characters"
        if not domain or not all(_DNS_LABEL.fullmatch(label) for label in domain.split(".")):
            return f"domain {domain!r} is not a DNS subdomain"
    return None


def value_count(attr: DeviceAttribute) -> int:
    """How many values the API server counts for ``attr`` against the 48 per device.

    A scalar is one; a list attribute is each of its values.
    """
    for values in (attr.ints, attr.bools, attr.strings, attr.versions):
        if values is not None:
            return len(values)
    return 1


def attribute_value_problem(attr: DeviceAttribute) -> str | None:
    """Why the value breaks the API-server limits, or ``None`` when valid."""
    if any(v == [] for v in (attr.ints, attr.bools, attr.strings, attr.versions)):
        # Go drops an empty list when it writes the slice (omitempty): the
        # attribute then holds no value, and the API server rejects it.
        return "the list is empty; an attribute holds exactly one value or a non-empty list"
    strings: list[str] = []
    if attr.string is not None:
        strings.append(attr.string)
    strings += attr.strings or []
    versions = ([attr.version] if attr.version is not None else []) + (attr.versions or [])
    for s in strings + versions:
        size = len(s.encode())
        if size > MAX_STRING_BYTES:
            return f"value is {size} bytes, more than the {MAX_STRING_BYTES}-byte limit"
    ints = ([attr.int_] if attr.int_ is not None else []) + (attr.ints or [])
    for i in ints:
        if not INT64_MIN <= i <= INT64_MAX:
            return f"int {i} is outside the signed 64-bit range the API server stores"
    for v in versions:
        if not _SEMVER.fullmatch(v):
            return f"version {v!r} is not semantic versioning 2.0.0"
    return None


def validate_attributes(
    attributes: AttributeMap, *, plugin: str, device: str, limit: int = MAX_ATTRIBUTES
) -> AttributeMap:
    """Keep the valid attributes, at most ``limit``; warn once per dropped one."""
    kept: AttributeMap = {}
    for qualified, attr in attributes.items():
        problem = attribute_name_problem(qualified) or attribute_value_problem(attr)
        if problem:
            log.warning(
                "plugin %s, device %s: dropping attribute %s: %s",
                plugin,
                safe(device),
                safe(qualified, 80),
                safe(problem, 300),
            )
            continue
        if len(kept) >= limit:
            log.warning(
                "plugin %s, device %s: dropping attribute %s: a device carries at most %d "
                "attributes",
                plugin,
                safe(device),
                safe(qualified, 80),
                MAX_ATTRIBUTES,
            )
            continue
        kept[qualified] = attr
    return kept
