"""IPAM types and the store protocol every backend implements."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from ..iprange import IPRange

if TYPE_CHECKING:
    from ..claims import ClaimReference


@dataclass(frozen=True, order=True)
class Owner:
    """Who holds an allocation: a pool (plugin or profile name), a device, a claim.

    Keying by claim UID is what makes a kubelet retry get the same addresses.
    """

    pool: str
    device: str
    claim_uid: str

    def __str__(self) -> str:
        return f"{self.pool}/{self.device}/{self.claim_uid}"


@dataclass(frozen=True)
class Allocation:
    owner: Owner
    address: str  # host CIDR: 10.0.0.5/32, 2001:db8::5/128
    static: bool  # reserved from user intent rather than allocated from a range
    created_at: datetime
    # The claim's namespace/name and pods when the caller knew them (gen2
    # DRANET sends the whole ResourceClaim); leak reclaiming checks these
    # against the Kubernetes API.  ``None`` for allocations known only by UID.
    claim: ClaimReference | None = None


class IpamStore(Protocol):
    def allocate(
        self, owner: Owner, ranges: Sequence[IPRange], *, claim: ClaimReference | None = None
    ) -> list[str]: ...

    def reserve(
        self, owner: Owner, addresses: Sequence[str], *, claim: ClaimReference | None = None
    ) -> list[str]: ...

    def release(self, owner: Owner) -> list[str]: ...

    def held(self, owner: Owner) -> list[Allocation]: ...

    def collect(
        self,
        live_claims: Iterable[str] | None = None,
        older_than: timedelta | None = None,
    ) -> list[Allocation]: ...

    def list(self) -> list[Allocation]: ...

    def close(self) -> None: ...
