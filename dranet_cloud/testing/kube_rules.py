"""The API server's rules the Kubernetes emulator applies: IPAddress validation, label selectors.

Facts, not code, from kube-apiserver: ``ValidateIPAddress``
(``pkg/apis/networking/validation``) checks the name with the strict IP rule
(``IsValidIP`` in ``k8s.io/apimachinery/pkg/util/validation``: parses, no
leading zeros, canonical form, not IPv4-mapped, no zone), forbids
``generateName`` in effect (a generated name is never an IP), checks labels
and annotations as ``ValidateObjectMeta`` does (qualified-name keys, label
values of at most 63 characters from ``[A-Za-z0-9-_.]``, 256 KiB of
annotations), and requires
``spec.parentRef`` with ``resource`` and ``name`` (path-segment names) and an
optional DNS-1123 ``group``.  Each finding is a ``Status`` cause
``{"reason", "message", "field"}`` as the API server reports them in a 422.

Label selectors follow ``k8s.io/apimachinery/pkg/labels`` syntax:
``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``,
``!k``, ``k>N``, ``k<N``, joined by commas.  ``!=`` and ``notin`` also match
objects without the label, as in Kubernetes.

Field selectors follow ``k8s.io/apimachinery/pkg/fields``: ``f=v``, ``f==v``,
``f!=v`` joined by commas, over the fields a resource supports
(``metadata.name`` and ``metadata.namespace`` everywhere, ``spec.nodeName``
and ``status.phase`` on Pods); another field is a 400, as the API server's
"field label not supported".  Field selectors expose their equalities
(``equalities``), label selectors their ``k=v`` and ``k in (...)``
requirements as value sets (``sets``): the watch fan-out files a watcher
under one of them, so that an event reaches only the watchers whose values
it carries.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "SelectorError",
    "canonical_ip_problem",
    "field_value",
    "ip_address_causes",
]

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def canonical_ip_problem(name: str) -> str | None:
    """Why ``name`` is not an IP in canonical form, or ``None`` when it is one."""
    if "%" in name:
        return "must not include an IPv6 zone"
    try:
        addr = ipaddress.ip_address(name)
    except ValueError:
        octets = name.split(".")
        if (
            len(octets) == 4
            and all(o.isdigit() and len(o) <= 3 and int(o) <= 255 for o in octets)
            and any(len(o) > 1 and o.startswith("0") for o in octets)
        ):
            return "must not have leading 0s"
        return "must be a valid IP address (e.g. 10.9.8.7 or 2001:db8::ffff)"
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return "must not be an IPv4-mapped IPv6 address"
    if str(addr) != name:
        return f'must be in canonical form ("{addr}")'
    return None


def _invalid(field: str, value: str, detail: str) -> dict[str, str]:
    return {
        "reason": "FieldValueInvalid",
        "message": f'Invalid value: "{value}": {detail}',
        "field": field,
    }


def _required(field: str, detail: str = "") -> dict[str, str]:
    return {
        "reason": "FieldValueRequired",
        "message": "Required value" + (f": {detail}" if detail else ""),
        "field": field,
    }


_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_NAME_CHARS = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character"
)
MAX_ANNOTATION_BYTES = 256 * 1024


@functools.lru_cache(maxsize=4096)  # every create repeats the same few keys
def _key_problem(key: str) -> str | None:
    """Why ``key`` is not a qualified name (``[prefix/]name``), else ``None``."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _NAME_PART.fullmatch(name):
        return f"name part {_NAME_CHARS}"
    return None


def _meta_map_causes(meta: Mapping[str, Any]) -> list[dict[str, str]]:
    causes: list[dict[str, str]] = []
    for field in ("labels", "annotations"):
        raw = meta.get(field)
        if raw is None:
            continue
        where = f"metadata.{field}"
        if not isinstance(raw, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
        ):
            causes.append(_invalid(where, str(raw)[:80], "must be a map of strings"))
            continue
        for key, value in raw.items():
            if problem := _key_problem(key):
                causes.append(_invalid(where, key, problem))
            if field == "labels" and value and (len(value) > 63 or not _NAME_PART.fullmatch(value)):
                detail = (
                    "must be no more than 63 characters"
                    if len(value) > 63
                    else f"a valid label must be an empty string or {_NAME_CHARS}"
                )
                causes.append(_invalid(where, value, detail))
        if field == "annotations":
            size = sum(len(k.encode()) + len(v.encode()) for k, v in raw.items())
            if size > MAX_ANNOTATION_BYTES:
                causes.append(
                    {
                        "reason": "FieldValueTooLong",
                        "message": f"Too long: may not be more than {MAX_ANNOTATION_BYTES} bytes",
                        "field": where,
                    }
                )
    return causes


def _path_segment_problem(value: str) -> str | None:
    if value in (".", ".."):
        return f"may not be '{value}'"
    for bad in ("/", "%"):
        if bad in value:
            return f"may not contain '{bad}'"
    return None


def ip_address_causes(doc: Mapping[str, Any]) -> list[dict[str, str]]:
    """The validation failures of an IPAddress create, in the API server's order."""
    causes: list[dict[str, str]] = []
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = str(meta.get("name") or "")
    generate = str(meta.get("generateName") or "")
    if generate:
        problem = canonical_ip_problem(generate)
        if problem:
            causes.append(_invalid("metadata.generateName", generate, problem))
    if not name and not generate:
        causes.append(_required("metadata.name", "name or generateName is required"))
    elif name:
        problem = canonical_ip_problem(name)
        if problem:
            causes.append(_invalid("metadata.name", name, problem))
    causes.extend(_meta_map_causes(meta))
    spec = doc.get("spec")
    parent = spec.get("parentRef") if isinstance(spec, Mapping) else None
    if not isinstance(parent, Mapping):
        causes.append(_required("spec.parentRef"))
        return causes
    group = str(parent.get("group") or "")
    if group and (len(group) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(group)):
        causes.append(
            _invalid(
                "spec.parentRef.group",
                group,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
            )
        )
    for key in ("resource", "name"):
        value = str(parent.get(key) or "")
        if not value:
            causes.append(_required(f"spec.parentRef.{key}"))
        elif problem := _path_segment_problem(value):
            causes.append(_invalid(f"spec.parentRef.{key}", value, problem))
    namespace = str(parent.get("namespace") or "")
    if namespace and (problem := _path_segment_problem(namespace)):
        causes.append(_invalid("spec.parentRef.namespace", namespace, problem))
    return causes


# --- label selectors ------------------------------------------------------------------

_KEY = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"({_KEY})\s+(in|notin)\s*\(([^()]*)\)")
_BINARY = re.compile(rf"({_KEY})\s*(==|=|!=|>|<)\s*({_VALUE})")
_EXISTS = re.compile(rf"(!?)\s*({_KEY})")

Matcher = Callable[[Mapping[str, str]], bool]


class SelectorError(ValueError):
    """A label selector the API server would refuse (400 BadRequest)."""


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _requirement(text: str) -> Matcher:
    return _parse_requirement(text)[0]


def _parse_requirement(text: str) -> tuple[Matcher, tuple[str, frozenset[str]] | None]:
    """The matcher of one requirement and, when only objects whose label ``key``
    holds one of ``values`` match it (``k=v``, ``k==v``, ``k in (...)``), that
    ``(key, values)``: what the watch fan-out indexes."""
    if (m := _BINARY.fullmatch(text)) and m.group(2) in ("=", "=="):
        key, value = m.group(1), m.group(3)
        return (lambda labels: labels.get(key) == value), (key, frozenset((value,)))
    if m := _SET.fullmatch(text):
        key, op = m.group(1), m.group(2)
        values = frozenset(v.strip() for v in m.group(3).split(","))
        if any(not re.fullmatch(_VALUE, v) for v in values):
            raise SelectorError(f"unable to parse requirement: invalid value in {text!r}")
        if op == "in":
            return (lambda labels: key in labels and labels[key] in values), (key, values)
        return (lambda labels: labels.get(key) not in values), None
    return _other_requirement(text), None


def _other_requirement(text: str) -> Matcher:
    if m := _BINARY.fullmatch(text):
        key, op, value = m.group(1), m.group(2), m.group(3)
        if op in ("=", "=="):
            return lambda labels: labels.get(key) == value
        if op == "!=":
            return lambda labels: labels.get(key) != value
        try:
            bound = int(value)
        except ValueError:
            raise SelectorError(
                f"unable to parse requirement: for 'gt', 'lt' operators, the value must be "
                f"an integer: {text!r}"
            ) from None

        def compare(labels: Mapping[str, str]) -> bool:
            try:
                have = int(labels[key])
            except (KeyError, ValueError):
                return False
            return have > bound if op == ">" else have < bound

        return compare
    if m := _EXISTS.fullmatch(text):
        negate, key = bool(m.group(1)), m.group(2)
        return (lambda labels: key not in labels) if negate else (lambda labels: key in labels)
    raise SelectorError(f"unable to parse requirement: {text!r}")


class LabelSelector:
    """A parsed ``labelSelector`` query parameter; an empty one matches everything."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._requirements: list[Matcher] = []
        # the k=v and k in (...) requirements, as (key, the values that match)
        self.sets: list[tuple[str, frozenset[str]]] = []
        if not text.strip():
            return
        for part in _split_top_level(text):
            item = part.strip()
            if not item:
                raise SelectorError(f"unable to parse requirement: empty requirement in {text!r}")
            matcher, values = _parse_requirement(item)
            self._requirements.append(matcher)
            if values is not None:
                self.sets.append(values)

    def narrowest(self) -> tuple[str, frozenset[str]] | None:
        """The ``k=v`` or ``k in (...)`` requirement with the fewest values (``None``: none):
        what an index of objects or watchers by label is best looked up by."""
        return min(self.sets, key=lambda kv: len(kv[1]), default=None)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(req(labels) for req in self._requirements)

    def __bool__(self) -> bool:
        return bool(self._requirements)


# --- field selectors ------------------------------------------------------------------

COMMON_FIELDS = ("metadata.name", "metadata.namespace")
_FIELD_TERM = re.compile(r"\s*([A-Za-z0-9_.]+)\s*(==|!=|=)\s*([^,]*?)\s*")


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string at a dotted ``path`` of ``obj`` (``""`` when absent), as fields are compared."""
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return ""
        value = value.get(part)
    return "" if value is None else str(value)


class FieldSelector:
    """A parsed ``fieldSelector`` for a resource that supports ``fields``; empty: everything."""

    def __init__(self, text: str, fields: tuple[str, ...] = COMMON_FIELDS) -> None:
        self.text = text
        self._terms: list[tuple[str, bool, str]] = []  # (field, equal?, value)
        self.equalities: list[tuple[str, str]] = []
        if not text.strip():
            return
        for part in text.split(","):
            m = _FIELD_TERM.fullmatch(part)
            if m is None:
                raise SelectorError(f"invalid field selector term {part!r}: expected f=v or f!=v")
            field, op, value = m.group(1), m.group(2), m.group(3)
            if field not in fields:
                raise SelectorError(
                    f'field label not supported: "{field}" (supported: {", ".join(fields)})'
                )
            self._terms.append((field, op != "!=", value))
            if op != "!=":
                self.equalities.append((field, value))

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all((field_value(obj, f) == v) == eq for f, eq, v in self._terms)

    def __bool__(self) -> bool:
        return bool(self._terms)
