"""Fault injection for the emulators, driven by a spec string.

One spec string asks for the same faults from tests, from ``dranet-cloud
emulate --faults`` and from the conformance suite::

    status=503,503,200;delay=0.2;drop=2;unavailable-for=3;
    strip-headers=Metadata-Flavor;oversize=2000000;malformed;html;chunked;
    expire-tokens-every=2;path=/latest/

:class:`Faults` decides what happens to each request before the handler runs
(:meth:`Faults.decide`) and reshapes the answer after it (:meth:`Faults.shape`);
:func:`spec_items` is the reader of ``;``-joined items that the Kubernetes
emulator's own spec (:mod:`.kube_faults`) shares.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dranet_cloud.testing.messages import Request, Response

__all__ = ["CAPTIVE_PORTAL_PAGE", "Faults", "spec_items"]


@dataclass
class _Decision:
    delay: float = 0.0
    drop: bool = False
    status: int | None = None
    label: str | None = None


# What a captive portal (hotel Wi-Fi, a corporate proxy's login) answers to any GET.
CAPTIVE_PORTAL_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>Sign in to the network</title></head>"
    b'<body><form action="/login">Accept the terms to continue</form></body></html>\n'
)


class Faults:
    """Fault injection state, parsed from a spec string and safe across threads.

    Keys (separated by ``;``):

    * ``status=503,503,200``: the next requests get these statuses in order
      (a 2xx lets the real handler answer); afterwards, normal service;
    * ``unavailable-for=S``: 503 for every request during the first ``S``
      seconds after the emulator started (a booting metadata server);
    * ``delay=S``: sleep ``S`` seconds before answering each request;
    * ``drop=N``: close the next ``N`` connections without answering;
    * ``strip-headers=A,B``: remove these headers from every answer;
    * ``oversize=N``: replace every successful body with ``N`` bytes;
    * ``malformed``: truncate and corrupt every successful body;
    * ``html``: answer every successful request with a captive portal's
      login page (``Content-Type: text/html``), as a hotel or corporate
      network in front of a misconfigured node does;
    * ``chunked``: send bodies chunked, without ``Content-Length``;
    * ``expire-tokens-every=N``: a session token stops working after ``N``
      uses (see :class:`~.tokens.TokenIssuer`);
    * ``path=/prefix``: apply the request faults above only to paths that
      start with the prefix (token requests included if they match).

    An unknown key or a bad value raises ``ValueError`` naming it.
    """

    KEYS = (
        "status",
        "unavailable-for",
        "delay",
        "drop",
        "strip-headers",
        "oversize",
        "malformed",
        "html",
        "chunked",
        "expire-tokens-every",
        "path",
    )

    statuses: list[int]
    unavailable_for: float
    delay: float
    drop: int
    strip_headers: list[str]
    oversize: int | None
    malformed: bool
    html: bool
    chunked: bool
    expire_tokens_every: int
    path: str

    def __init__(self, spec: str | None = None) -> None:
        """The faults of ``spec`` (``None`` or ``""``: none), as :meth:`parse`."""
        self._lock = threading.Lock()
        self.started_at = time.monotonic()
        self.load(spec)

    # --- parsing -----------------------------------------------------------------------

    @classmethod
    def parse(cls, spec: str | None) -> Faults:
        """Build from a spec string (``None`` or ``""``: no faults)."""
        return cls(spec)

    def load(self, spec: str | None) -> None:
        """Replace every setting in place (emulators and token issuers sharing
        this object see the change at once); the clock is not reset."""
        fresh = _parse_spec(spec or "")
        with self._lock:
            self.statuses = fresh["statuses"]
            self.unavailable_for = fresh["unavailable_for"]
            self.delay = fresh["delay"]
            self.drop = fresh["drop"]
            self.strip_headers = fresh["strip_headers"]
            self.oversize = fresh["oversize"]
            self.malformed = fresh["malformed"]
            self.html = fresh["html"]
            self.chunked = fresh["chunked"]
            self.expire_tokens_every = fresh["expire_tokens_every"]
            self.path = fresh["path"]

    def clear(self) -> None:
        """No faults from now on."""
        self.load(None)

    def reset_clock(self) -> None:
        """Restart the ``unavailable-for`` window (the emulator calls it on start)."""
        self.started_at = time.monotonic()

    def spec(self) -> str:
        """The current settings as a spec string (``parse(spec())`` round-trips)."""
        parts: list[str] = []
        if self.statuses:
            parts.append("status=" + ",".join(str(s) for s in self.statuses))
        if self.unavailable_for:
            parts.append(f"unavailable-for={self.unavailable_for:g}")
        if self.delay:
            parts.append(f"delay={self.delay:g}")
        if self.drop:
            parts.append(f"drop={self.drop}")
        if self.strip_headers:
            parts.append("strip-headers=" + ",".join(self.strip_headers))
        if self.oversize is not None:
            parts.append(f"oversize={self.oversize}")
        if self.malformed:
            parts.append("malformed")
        if self.html:
            parts.append("html")
        if self.chunked:
            parts.append("chunked")
        if self.expire_tokens_every:
            parts.append(f"expire-tokens-every={self.expire_tokens_every}")
        if self.path:
            parts.append(f"path={self.path}")
        return ";".join(parts)

    def __repr__(self) -> str:
        return f"Faults.parse({self.spec()!r})"

    def __bool__(self) -> bool:
        return bool(self.spec())

    # --- decisions ---------------------------------------------------------------------

    def applies_to(self, path: str) -> bool:
        return not self.path or path.startswith(self.path)

    def decide(self, request: Request) -> _Decision:
        """What to do with one incoming request (consumes sequence items)."""
        if not self.applies_to(request.path):
            return _Decision()
        with self._lock:
            decision = _Decision(delay=self.delay)
            if self.drop > 0:
                self.drop -= 1
                decision.drop = True
                decision.label = "drop"
                return decision
            if self.unavailable_for and time.monotonic() - self.started_at < self.unavailable_for:
                decision.status = 503
                decision.label = "unavailable"
                return decision
            if self.statuses:
                status = self.statuses.pop(0)
                if not 200 <= status < 300:
                    decision.status = status
                    decision.label = f"status={status}"
            return decision

    def shape(self, path: str, response: Response) -> tuple[Response, str | None]:
        """Apply body and header faults to an answer; returns it and a label."""
        if not self.applies_to(path):
            return response, None
        labels: list[str] = []
        headers = dict(response.headers)
        body = response.body_bytes
        content_type = response.content_type
        if self.strip_headers:
            drop = {h.lower() for h in self.strip_headers}
            headers = {k: v for k, v in headers.items() if k.lower() not in drop}
            labels.append("strip-headers")
        if 200 <= response.status < 300:
            if self.oversize is not None:
                body = (b"x" * 64 + b"\n") * (self.oversize // 65) + b"x" * (self.oversize % 65)
                labels.append("oversize")
            if self.malformed:
                body = body[: len(body) // 2] + b'\xff\x00{"truncated'
                labels.append("malformed")
            if self.html:
                body, content_type = CAPTIVE_PORTAL_PAGE, "text/html; charset=utf-8"
                labels.append("html")
        shaped = Response(response.status, body, headers, content_type)
        return shaped, ",".join(labels) or None


def spec_items(spec: str) -> Iterator[tuple[str, str, str, bool]]:
    """The items of a fault spec (``key=value`` joined by ``;``; empty ones skipped):
    ``(item, key lower-cased, value, whether it had "=")``, stripped of blanks.
    """
    for raw in spec.split(";"):
        item = raw.strip()
        if item:
            key, sep, value = item.partition("=")
            yield item, key.strip().lower(), value.strip(), bool(sep)


def _parse_spec(spec: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "statuses": [],
        "unavailable_for": 0.0,
        "delay": 0.0,
        "drop": 0,
        "strip_headers": [],
        "oversize": None,
        "malformed": False,
        "html": False,
        "chunked": False,
        "expire_tokens_every": 0,
        "path": "",
    }
    for item, key, value, sep in spec_items(spec):
        try:
            if key == "status":
                out["statuses"] = [int(v) for v in value.split(",") if v.strip()]
                if any(not 100 <= s <= 599 for s in out["statuses"]):
                    raise ValueError("statuses must be 100-599")
            elif key == "unavailable-for":
                out["unavailable_for"] = _non_negative(float(value))
            elif key == "delay":
                out["delay"] = _non_negative(float(value))
            elif key == "drop":
                out["drop"] = int(_non_negative(int(value)))
            elif key == "strip-headers":
                out["strip_headers"] = [h.strip() for h in value.split(",") if h.strip()]
                if not out["strip_headers"]:
                    raise ValueError("name the headers, e.g. strip-headers=Metadata-Flavor")
            elif key == "oversize":
                out["oversize"] = int(_non_negative(int(value)))
            elif key in ("malformed", "html", "chunked"):
                if sep and value.lower() not in ("1", "true", "yes", "0", "false", "no"):
                    raise ValueError("expected no value or true/false")
                out[key] = not sep or value.lower() in ("1", "true", "yes")
            elif key == "expire-tokens-every":
                out["expire_tokens_every"] = int(_non_negative(int(value)))
            elif key == "path":
                out["path"] = value
            else:
                raise ValueError(f"unknown fault; known: {', '.join(Faults.KEYS)}")
        except ValueError as exc:
            raise ValueError(f"fault spec {spec!r}: bad item {item!r}: {exc}") from exc
    return out


def _non_negative(value: float) -> float:
    # nan would crash every answer in time.sleep, inf would hang it.
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    if value < 0:
        raise ValueError("must not be negative")
    return value
