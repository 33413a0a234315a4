"""Token sessions in the IMDSv2 style, for emulators of metadata servers that want them.

AWS IMDSv2 and Alibaba's hardened mode refuse metadata GETs without a session
token got by a ``PUT`` with a TTL header.  :class:`TokenIssuer` is that
server side, with the TTL honoured and the ``expire-tokens-every`` fault of a
shared :class:`~.faults.Faults`, so a client's token refresh is tested against
a real expiry.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dranet_cloud.testing.faults import Faults
from dranet_cloud.testing.messages import Request, Response

__all__ = ["TokenIssuer"]


@dataclass
class _IssuedToken:
    expires_at: float
    uses: int = 0


@dataclass(eq=False, kw_only=True)
class TokenIssuer:
    """Token sessions in the IMDSv2 style: ``PUT`` issues, ``check`` verifies.

    ``issue`` wants a TTL header between 1 and ``max_ttl`` (else 400) and
    answers the token with the granted TTL echoed.  ``check`` returns
    ``None`` when the request may proceed, else a 401 ``Response``.  With
    ``required=False`` a request without a token passes (IMDSv1 allowed),
    but a wrong or expired token is still refused.  ``faults`` (shared with
    the emulator) provides ``expire-tokens-every``.
    """

    ttl_header: str
    token_header: str
    max_ttl: int = 21600
    required: bool = True
    faults: Faults | None = None
    clock: Callable[[], float] = time.monotonic
    issued: int = field(default=0, init=False)
    rejected: int = field(default=0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _tokens: dict[str, _IssuedToken] = field(default_factory=dict, init=False, repr=False)

    def issue(self, request: Request) -> Response:
        if request.method != "PUT":
            return Response(405, "token requests must use PUT\n", {"Allow": "PUT"})
        raw = request.headers.get(self.ttl_header)
        if raw is None:
            return Response(400, f"missing {self.ttl_header}\n")
        try:
            ttl = int(raw.strip())
        except ValueError:
            return Response(400, f"{self.ttl_header} must be an integer\n")
        if not 1 <= ttl <= self.max_ttl:
            return Response(400, f"{self.ttl_header} must be 1-{self.max_ttl}\n")
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._tokens[token] = _IssuedToken(self.clock() + ttl)
            self.issued += 1
        return Response(200, token, {self.ttl_header: str(ttl)})

    def check(self, request: Request) -> Response | None:
        token = request.headers.get(self.token_header)
        with self._lock:
            if token is None:
                if not self.required:
                    return None
                self.rejected += 1
                return Response(401, f"missing {self.token_header}\n")
            entry = self._tokens.get(token)
            now = self.clock()
            every = self.faults.expire_tokens_every if self.faults is not None else 0
            if entry is not None and every and entry.uses >= every:
                del self._tokens[token]
                entry = None
            if entry is None or entry.expires_at <= now:
                self._tokens.pop(token, None)
                self.rejected += 1
                return Response(401, "token expired or unknown\n")
            entry.uses += 1
            return None

    def expire_all(self) -> None:
        """Invalidate every issued token (a metadata server restart)."""
        with self._lock:
            self._tokens.clear()

    @property
    def active(self) -> int:
        with self._lock:
            now = self.clock()
            return sum(1 for t in self._tokens.values() if t.expires_at > now)
