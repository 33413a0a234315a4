"""IPAM types and the store protocol every backend implements."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from dranet_cloud.node.nic import LocalNic
from dranet_cloud.toolkit.errors import AddressConflict
from dranet_cloud.toolkit.iprange import IPRange
from dranet_cloud.wire.claims import ClaimReference

log = logging.getLogger(__name__)


@dataclass(frozen=True, order=True)
class Owner:
    """Who holds an allocation: a pool (plugin or profile name), a device, a claim.

    Keying by claim UID is what makes a kubelet retry get the same addresses.
    ``device`` is the NIC's stable identity (``mac:...``, else ``pci:...``,
    else ``name:...``, see :mod:`dranet_cloud.node.nic`); ``keys`` is every form
    the NIC may have been recorded under (its MAC, PCI address, interface
    and DRA device names).  Equality and hashing use ``device`` only; the
    stores use ``keys`` to find what the same NIC holds under another form
    (:func:`linked`), and record them so ``ipam list`` can show every name.
    """

    pool: str
    device: str
    claim_uid: str
    keys: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @classmethod
    def for_nic(cls, pool: str, nic: LocalNic, claim_uid: str) -> Owner:
        """The owner of a claim's addresses on ``nic``, in ``pool``, with every key of the NIC."""
        return cls(pool, nic.identity, claim_uid, nic.keys)

    @property
    def all_keys(self) -> frozenset[str]:
        return self.keys | {self.device}

    def __str__(self) -> str:
        return f"{self.pool}/{self.device}/{self.claim_uid}"


def _kind(key: str) -> int:
    """3 for a MAC key, 2 for a PCI key, 1 for a name (or a schema-1 raw string)."""
    if key.startswith("mac:"):
        return 3
    if key.startswith("pci:"):
        return 2
    return 1


def linked(owner: Owner, device: str, recorded: frozenset[str]) -> bool:
    """Whether rows held under identity ``device`` (recorded with ``recorded``
    keys) belong to the same NIC as ``owner``.

    Two different MACs, or two different PCI addresses, are two NICs, whatever
    names they share: a name moves between NICs, so two strong identities are
    linked only through a shared MAC or PCI key.  A weak (name-only) identity
    on either side links through any shared key, which is how a release that
    carries only a name finds what was allocated under the MAC, and how rows
    written by schema 1 (keyed by name) are found under the new identity.
    """
    if device == owner.device:
        return True
    mine = owner.all_keys
    theirs = recorded | {device}
    for prefix in ("mac:", "pci:"):
        a = {k for k in mine if k.startswith(prefix)}
        b = {k for k in theirs if k.startswith(prefix)}
        if a and b and not a & b:
            return False
    shared = mine & theirs
    if _kind(owner.device) > 1 and _kind(device) > 1:
        return any(_kind(k) > 1 for k in shared)
    return bool(shared)


def pick_identities(
    owner: Owner, held: dict[str, frozenset[str]], *, strict: bool = True
) -> tuple[str, list[str]]:
    """``(identity to write new rows under, identities whose rows are this owner's)``.

    ``held`` maps each identity holding rows for the owner's pool and claim to
    its recorded keys.  New rows go under the strongest linked identity (the
    owner's own on a tie), so a name-only call adds to the MAC's rows rather
    than starting a second owner.  A name-only owner linked to two NICs that
    are not linked to each other is ambiguous: with ``strict`` (allocating)
    :class:`AddressConflict` rather than a guess; otherwise (releasing,
    reading) only the owner's own rows, so nothing another NIC holds is freed.
    """
    found = sorted(d for d, rec in held.items() if linked(owner, d, rec))
    strong = [d for d in found if _kind(d) > 1 and d != owner.device]
    if _kind(owner.device) == 1 and _unrelated(owner, strong, held):
        if strict:
            raise AddressConflict(
                f"ipam: {owner} matches allocations of several NICs ({', '.join(strong)}) "
                "for the same claim; send the device's MAC or PCI address so the right one "
                "is used"
            )
        log.warning(
            "ipam: %s matches allocations of several NICs (%s) for the same claim; "
            "using only its own",
            owner,
            ", ".join(strong),
        )
        return owner.device, [owner.device]
    target = owner.device
    for d in found:
        if _kind(d) > _kind(target):
            target = d
    if owner.device not in found:
        found.append(owner.device)
    return target, found


def _unrelated(owner: Owner, strong: list[str], held: dict[str, frozenset[str]]) -> bool:
    """Whether two of ``strong`` are different NICs (not linked to each other)."""
    for i, a in enumerate(strong):
        as_owner = Owner(owner.pool, a, owner.claim_uid, held.get(a, frozenset()))
        for b in strong[i + 1 :]:
            if not linked(as_owner, b, held.get(b, frozenset())):
                return True
    return False


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
