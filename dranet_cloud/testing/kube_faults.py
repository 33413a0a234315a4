"""The Kubernetes emulator's own faults as a spec string (``--api-faults``).

The kit's faults (:class:`~dranet_cloud.testing.faults.Faults`) act on HTTP
(statuses, drops, delays) whatever the path; these speak the API's language:
a latency for every request, planned ``Status`` failures per verb, and writes
that are committed but whose reply is lost.  :class:`KubernetesEmulator
<dranet_cloud.testing.kubernetes.KubernetesEmulator>` applies them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from http import HTTPStatus

from dranet_cloud.testing.faults import spec_items

__all__ = [
    "KNOWN_STATUSES",
    "VERBS",
    "ApiFaults",
    "check_verb",
    "finite_seconds",
    "parse_api_faults",
]

VERBS = ("get", "list", "watch", "create", "update", "delete")
KNOWN_STATUSES = frozenset(s.value for s in HTTPStatus)


@dataclass(frozen=True)
class ApiFaults:
    """The Kubernetes emulator's own faults, from a spec string (:func:`parse_api_faults`)."""

    latency: float = 0.0
    failures: tuple[tuple[str, int, int | None], ...] = ()  # (verb or "", status, times)
    lost_replies: tuple[tuple[str, int], ...] = ()  # (verb, times)
    cut_watches: float = 0.0  # seconds between cuts of every open watch; 0: none


def check_verb(verb: str, *, allow_any: bool = True) -> str:
    if verb in VERBS or (allow_any and verb == ""):
        return verb
    raise ValueError(f"unknown verb {verb!r}; known: {', '.join(VERBS)}")


def finite_seconds(value: float, what: str) -> float:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite number of seconds >= 0, got {value!r}")
    return value


def parse_api_faults(spec: str | None) -> ApiFaults:
    """Parse ``latency=S;fail=VERB:STATUS[xN];lose-reply=VERB[:N];cut-watches=S`` (``;``-joined).

    * ``latency=0.002``: every request takes this long more (the benchmark's
      2 ms API round trip);
    * ``fail=create:503x3``: the next 3 creates get a 503 Status (``x*``: every
      create until the faults are cleared, an API that is down); ``VERB`` is
      ``get``, ``list``, ``watch``, ``create``, ``update``, ``delete`` or
      ``*`` (every request); ``fail`` may repeat;
    * ``lose-reply=create:2``: the next 2 creates that succeed are committed,
      then the connection is closed without an answer (``create`` or
      ``delete`` of an IPAddress, ``update`` of a Lease);
    * ``cut-watches=3``: every 3 seconds, every open watch is aborted mid-stream
      (an API server restart, a load balancer dropping long connections).

    A bad item raises ``ValueError`` naming it.
    """
    latency = 0.0
    failures: list[tuple[str, int, int | None]] = []
    lost: list[tuple[str, int]] = []
    cut = 0.0
    for item, key, value, _ in spec_items(spec or ""):
        try:
            if key == "latency":
                latency = finite_seconds(float(value), "latency")
            elif key == "fail":
                verb, _, rest = value.partition(":")
                status_s, _, times_s = rest.lower().partition("x")
                status = int(status_s)
                if not 400 <= status <= 599 or status not in KNOWN_STATUSES:
                    raise ValueError("the status must be a known HTTP error status, 400-599")
                times = None if times_s == "*" else int(times_s) if times_s else 1
                if times is not None and times < 1:
                    raise ValueError("the count must be at least 1 (or * for every call)")
                verb = verb.strip().lower()
                failures.append((check_verb("" if verb == "*" else verb), status, times))
            elif key == "lose-reply":
                verb, _, times_s = value.partition(":")
                verb = verb.strip().lower()
                if verb not in ("create", "update", "delete"):
                    raise ValueError("only a create's, an update's or a delete's reply can be lost")
                times = int(times_s) if times_s else 1
                if times < 1:
                    raise ValueError("the count must be at least 1")
                lost.append((verb, times))
            elif key == "cut-watches":
                cut = finite_seconds(float(value), "cut-watches")
                if cut <= 0:
                    raise ValueError("the interval must be > 0 seconds")
            else:
                raise ValueError("unknown item; known: latency, fail, lose-reply, cut-watches")
        except ValueError as exc:
            raise ValueError(f"api fault spec {spec!r}: bad item {item!r}: {exc}") from exc
    return ApiFaults(latency, tuple(failures), tuple(lost), cut)
