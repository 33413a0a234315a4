"""Wire models shared by the host, every plugin and the BYODP protocol.

DRANET's Go daemon reads and writes these documents unchanged, so they follow
its Go structs (``pkg/apis/types.go``), in the shape DRANET ships today
(*gen2*, since DRANET PR #241 merged) while still reading what it shipped before
(*gen1*: ``type: ipvlan``, ``unnumbered: true``, ipvlan ``l2``/``bridge``).
A cluster in a rolling upgrade runs both generations against one provider,
so every gen1 spelling is normalized on input and only gen2 is ever written.

Field names are the Go JSON tags, exposed through pydantic aliases so Python
code can use snake_case while the wire keeps camelCase.  ``None`` means "not
set".  On output every field Go would omit is omitted: ``None`` everywhere,
and the zero value (``""``, ``0``, ``[]``, ``{}``) of fields that are not
pointers in Go (see ``_GO_VALUE_FIELDS``).  A pointer field set to ``false``
or ``0`` is kept, as Go keeps it.

Numbers and booleans decode as strictly as Go's ``encoding/json``: ``1.0``,
``true`` or ``"5"`` is not an integer, and an ``int32`` field rejects values
out of its range instead of wrapping.  Unknown fields: DRANET decodes a
user's claim config strictly, so :func:`parse_user_config` rejects them
naming the field; documents from peers (DRANET's merged context, a webhook's
answer) may come from a newer version, so :func:`parse_peer_config` (and
plain ``model_validate``) ignores them with a debug log.

DRANET's defaulting, validation and merge rules live in
:mod:`dranet_cloud.host.validation` and :mod:`dranet_cloud.host.merge`.
"""

from __future__ import annotations

import copy
import logging
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticUndefined

from dranet_cloud.toolkit.hwaddr import normalize_mac
from dranet_cloud.wire.claims import ClaimReference, resolve_claim

log = logging.getLogger(__name__)

MAX_INTERFACE_NAME = 15

# Go integer types: decoding a number that does not fit is an error in Go.
Int32 = Annotated[int, Field(strict=True, ge=-(2**31), le=2**31 - 1)]
Int64 = Annotated[int, Field(strict=True, ge=-(2**63), le=2**63 - 1)]
Uint8 = Annotated[int, Field(strict=True, ge=0, le=255)]

InterfaceType = Literal["Passthrough", "IPVLAN"]
Addressing = Literal["Static", "DHCP", "Unnumbered"]
TYPE_PASSTHROUGH: InterfaceType = "Passthrough"
TYPE_IPVLAN: InterfaceType = "IPVLAN"
ADDRESSING_STATIC: Addressing = "Static"
ADDRESSING_DHCP: Addressing = "DHCP"
ADDRESSING_UNNUMBERED: Addressing = "Unnumbered"

# gen1 spelling (PR #241 before it merged) -> gen2.
_GEN1_TYPES = {"passthrough": TYPE_PASSTHROUGH, "ipvlan": TYPE_IPVLAN}
_GEN1_IPVLAN = {"mode": {"l2": "L2"}, "flag": {"bridge": "Bridge"}}

# Context key that switches unknown-field handling to DRANET's strict decoding.
STRICT_FIELDS = "strict_fields"


def _is_go_zero(value: Any) -> bool:
    """Go's ``omitempty`` test for the value types used by non-pointer fields."""
    if isinstance(value, bool):
        return value is False
    return value == "" or value == [] or value == {} or (type(value) is int and value == 0)


_ATOMS = frozenset({str, int, float, bool, type(None), bytes})


def _tree_copy(value: Any) -> Any:
    """Deep copy of a wire value: atoms as they are, containers and models rebuilt."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is list:
        return [_tree_copy(v) for v in value]
    if kind is dict:
        return {k: _tree_copy(v) for k, v in value.items()}
    if isinstance(value, WireModel):
        return value.__deepcopy__()
    return copy.deepcopy(value)


_FIELD_NAMES: dict[type, tuple[frozenset[str], frozenset[str]]] = {}


def _field_names(cls: type[WireModel]) -> tuple[frozenset[str], frozenset[str]]:
    """``(wire keys, keys read leniently)`` of a model class, computed once per class.

    Strict decoding (a user's claim config) knows only the wire spellings and
    the legacy ones; lenient decoding also accepts the Python field names.
    """
    names = _FIELD_NAMES.get(cls)
    if names is None:
        fields = cls.model_fields
        wire = frozenset(f.alias or name for name, f in fields.items()) | cls._LEGACY_FIELDS
        names = _FIELD_NAMES[cls] = (wire, wire | frozenset(fields))
    return names


class WireModel(BaseModel):
    """Base for wire documents: aliases on the wire, unset fields omitted.

    ``_GO_VALUE_FIELDS`` names the wire keys that are *values* (not pointers)
    in Go: their zero value is omitted like ``None``.
    """

    model_config = ConfigDict(populate_by_name=True, extra="ignore", serialize_by_alias=True)
    _GO_VALUE_FIELDS: ClassVar[frozenset[str]] = frozenset()
    # Older spellings a subclass reads and normalizes (never unknown).
    _LEGACY_FIELDS: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _unknown_fields(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict):
            return data
        wire, lenient = _field_names(cls)
        strict = bool(info.context and info.context.get(STRICT_FIELDS))
        known = wire if strict else lenient
        if known.issuperset(data):  # every request: a set test, nothing built
            return data
        unknown = [k for k in data if k not in known]
        if strict:
            raise ValueError(
                f"unknown field {unknown[0]!r} (DRANET decodes claim configs strictly; "
                f"known fields: {', '.join(sorted(wire - cls._LEGACY_FIELDS))})"
            )
        log.debug("%s: ignoring unknown fields %s", cls.__name__, ", ".join(map(repr, unknown)))
        return data

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Any:
        """A deep copy without :func:`copy.deepcopy`'s generic walk.

        Wire models are trees of strings, numbers, lists, dicts and other wire
        models; the claim path copies configs several times per request
        (cache hand-outs, merge, defaulting), where the generic walk cost more
        than the validation itself.
        """
        cls = type(self)
        out = cls.__new__(cls)
        object.__setattr__(out, "__dict__", {k: _tree_copy(v) for k, v in self.__dict__.items()})
        object.__setattr__(out, "__pydantic_extra__", _tree_copy(self.__pydantic_extra__))
        object.__setattr__(out, "__pydantic_fields_set__", set(self.__pydantic_fields_set__))
        private = getattr(self, "__pydantic_private__", None)
        object.__setattr__(
            out,
            "__pydantic_private__",
            None
            if private is None
            else {k: _tree_copy(v) for k, v in private.items() if v is not PydanticUndefined},
        )
        return out

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return self._go_omit(handler(self))

    def _go_omit(self, data: dict[str, Any]) -> dict[str, Any]:
        drop = self._GO_VALUE_FIELDS
        return {
            k: v for k, v in data.items() if v is not None and not (k in drop and _is_go_zero(v))
        }

    def to_wire(self) -> dict[str, Any]:
        """The Go-compatible JSON object for this model."""
        return self.model_dump(mode="json", by_alias=True)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True)


class DeviceIdentifiers(WireModel):
    """What the node daemon knows about a local NIC.

    ``name`` is always emitted; MAC and PCI address are omitted when empty, as
    Go's ``omitempty`` does.
    """

    mac_address: str | None = None
    pci_address: str | None = None
    name: str = ""

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        out: dict[str, Any] = {}
        for key in ("mac_address", "pci_address"):
            if data.get(key):
                out[key] = data[key]
        out["name"] = data.get("name", "")
        return out

    @field_validator("mac_address", mode="after")
    @classmethod
    def _go_mac(cls, value: str | None) -> str | None:
        """What Go's ``net.ParseMAC`` accepts (6, 8 or 20 bytes), in the colon form.

        A string that is not one is refused naming it, never repaired: DRANET
        sends Go's ``HardwareAddr.String()``, so anything else is not DRANET.
        """
        return normalize_mac(value) if value else None

    @property
    def mac(self) -> str | None:
        """The hardware address (normalized when the model was built), or ``None``."""
        return self.mac_address or None

    def label(self) -> str:
        """A short human name for logs and errors."""
        parts = [self.name or "(unnamed)"]
        if self.mac_address:
            parts.append(self.mac_address)
        if self.pci_address:
            parts.append(self.pci_address)
        return "/".join(parts)


class DeviceAttribute(WireModel):
    """A Kubernetes ``resource.k8s.io/v1`` DeviceAttribute: exactly one value."""

    int_: int | None = Field(default=None, alias="int")
    bool_: bool | None = Field(default=None, alias="bool")
    string: str | None = None
    version: str | None = None
    ints: list[int] | None = None
    bools: list[bool] | None = None
    strings: list[str] | None = None
    versions: list[str] | None = None

    model_config = ConfigDict(populate_by_name=True, extra="forbid", serialize_by_alias=True)

    @model_validator(mode="after")
    def _exactly_one(self) -> DeviceAttribute:
        set_fields = [k for k, v in self.__dict__.items() if v is not None]
        if len(set_fields) != 1:
            raise ValueError(
                "a DeviceAttribute holds exactly one of int, bool, string, version "
                f"(or their list forms); got {len(set_fields)}"
            )
        return self

    @classmethod
    def of(cls, value: int | bool | str) -> DeviceAttribute:
        """Build from a Python scalar: bool, int or str."""
        if isinstance(value, bool):
            return cls.model_validate({"bool": value})
        if isinstance(value, int):
            return cls.model_validate({"int": value})
        return cls(string=str(value))

    @property
    def value(self) -> Any:
        for v in self.__dict__.values():
            if v is not None:
                return v
        return None  # pragma: no cover - the validator forbids it


AttributeMap = dict[str, DeviceAttribute]


class GoModel(WireModel):
    """A NetworkConfig part: Go's strict scalar decoding (no ``1.0`` for an int)."""

    model_config = ConfigDict(
        populate_by_name=True, extra="ignore", serialize_by_alias=True, strict=True
    )


class VRFConfig(GoModel):
    _GO_VALUE_FIELDS = frozenset({"name"})

    name: str | None = None
    table: Int64 | None = None  # Go *int


class IPVlanConfig(GoModel):
    """IPVLAN settings; DRANET accepts (and defaults to) only L2 + Bridge."""

    _GO_VALUE_FIELDS = frozenset({"mode", "flag"})

    mode: str | None = None
    flag: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _gen1_spelling(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for key, spellings in _GEN1_IPVLAN.items():
                value = data.get(key)
                if isinstance(value, str) and value in spellings:
                    data[key] = spellings[value]
        return data


class InterfaceConfig(GoModel):
    """DRANET's ``InterfaceConfig``.

    ``type`` empty means Passthrough and ``addressing`` empty means Static
    (or DHCP with the deprecated ``dhcp: true``); use :attr:`is_subinterface`
    and :attr:`effective_addressing` rather than comparing the raw fields.
    """

    _GO_VALUE_FIELDS = frozenset({"name", "type", "addressing", "addresses"})
    _LEGACY_FIELDS = frozenset({"unnumbered"})

    name: str | None = None
    type: InterfaceType | None = None
    addressing: Addressing | None = None
    addresses: list[str] | None = None
    dhcp: bool | None = None  # deprecated: addressing "DHCP"
    mtu: Int32 | None = None
    hardware_addr: str | None = Field(default=None, alias="hardwareAddr")
    gso_max_size: Int32 | None = Field(default=None, alias="gsoMaxSize")
    gro_max_size: Int32 | None = Field(default=None, alias="groMaxSize")
    gso_ipv4_max_size: Int32 | None = Field(default=None, alias="gsoIPv4MaxSize")
    gro_ipv4_max_size: Int32 | None = Field(default=None, alias="groIPv4MaxSize")
    disable_ebpf_programs: bool | None = Field(default=None, alias="disableEbpfPrograms")
    forwarding: bool | None = None
    arp_ignore: Int32 | None = Field(default=None, alias="arpIgnore")
    arp_announce: Int32 | None = Field(default=None, alias="arpAnnounce")
    vrf: VRFConfig | None = None
    ipvlan: IPVlanConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _gen1_spelling(cls, data: Any) -> Any:
        """Normalize gen1 ``type`` values and the ``unnumbered`` bool."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        kind = data.get("type")
        if isinstance(kind, str) and kind in _GEN1_TYPES:
            data["type"] = _GEN1_TYPES[kind]
        if "unnumbered" in data:
            unnumbered = data.pop("unnumbered")
            if unnumbered is not None and not isinstance(unnumbered, bool):
                raise ValueError(f"unnumbered: must be a boolean, got {unnumbered!r}")
            if unnumbered:
                addressing = data.get("addressing")
                if addressing not in (None, "", ADDRESSING_UNNUMBERED):
                    raise ValueError(
                        f"unnumbered: true (gen1) contradicts addressing {addressing!r}; "
                        'write only addressing: "Unnumbered"'
                    )
                data["addressing"] = ADDRESSING_UNNUMBERED
        for key in ("type", "addressing"):
            if data.get(key) == "":
                data[key] = None  # Go's zero value: the default
        return data

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Go's shape, and the deprecated ``dhcp`` written as gen2 ``addressing``.

        ``dhcp: true`` without ``addressing`` is ``addressing: DHCP``; ``dhcp:
        false`` is the default (Static).  Both set is invalid and never emitted
        by the host (validation rejects it first), so ``addressing`` wins.
        """
        data = self._go_omit(handler(self))
        dhcp = data.pop("dhcp", None)
        if dhcp and "addressing" not in data:
            data["addressing"] = ADDRESSING_DHCP
            order = [f.alias or n for n, f in type(self).model_fields.items()]
            data = {k: data[k] for k in order if k in data}
        return data

    @property
    def is_subinterface(self) -> bool:
        """DRANET creates a child interface in the pod (IPVLAN) instead of moving the NIC."""
        return self.type == TYPE_IPVLAN

    @property
    def effective_addressing(self) -> Addressing:
        """``addressing`` with DRANET's default, honouring the deprecated ``dhcp``."""
        if self.addressing:
            return self.addressing
        return ADDRESSING_DHCP if self.dhcp else ADDRESSING_STATIC


class RouteConfig(GoModel):
    _GO_VALUE_FIELDS = frozenset({"destination", "gateway", "source", "scope", "table"})

    destination: str | None = None
    gateway: str | None = None
    source: str | None = None
    scope: Uint8 | None = None
    table: Int64 | None = None

    def dedup_key(self) -> tuple[str, int]:
        """DRANET de-duplicates routes by (destination, table)."""
        return (self.destination or "", self.table or 0)


class RuleConfig(GoModel):
    _GO_VALUE_FIELDS = frozenset({"priority", "source", "destination", "table"})

    priority: Int64 | None = None
    source: str | None = None
    destination: str | None = None
    table: Int64 | None = None

    def dedup_key(self) -> tuple[int, str, str, int]:
        """Open DRANET PR #316 de-duplicates identical rules (every field equal)."""
        return (self.priority or 0, self.source or "", self.destination or "", self.table or 0)


class NeighborConfig(GoModel):
    _GO_VALUE_FIELDS = frozenset({"destination", "hardwareAddr"})

    destination: str | None = None
    hardware_addr: str | None = Field(default=None, alias="hardwareAddr")

    def dedup_key(self) -> str:
        """DRANET de-duplicates neighbors by destination."""
        return self.destination or ""


class EthtoolConfig(GoModel):
    _GO_VALUE_FIELDS = frozenset({"features", "privateFlags"})

    features: dict[str, bool] | None = None
    private_flags: dict[str, bool] | None = Field(default=None, alias="privateFlags")


class NetworkConfig(GoModel):
    """DRANET's NetworkConfig: user intent, cloud intent and profile results.

    ``interface`` is always present on the wire (Go emits ``{}``); everything
    else is omitted when unset.
    """

    _GO_VALUE_FIELDS = frozenset({"profile", "routes", "rules", "neighbors"})

    profile: str | None = None
    interface: InterfaceConfig = Field(default_factory=InterfaceConfig)
    routes: list[RouteConfig] | None = None
    rules: list[RuleConfig] | None = None
    neighbors: list[NeighborConfig] | None = None
    ethtool: EthtoolConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _null_interface(cls, data: Any) -> Any:
        # Go decodes "interface": null into the zero struct.
        if isinstance(data, dict) and "interface" in data and data["interface"] is None:
            data = {k: v for k, v in data.items() if k != "interface"}
        return data


def parse_user_config(doc: Any) -> NetworkConfig:
    """A user's claim config, decoded as strictly as DRANET does.

    Unknown fields are an error naming the field (DRANET's
    ``json.UnmarshalStrict``); gen1 spellings are accepted and normalized.
    Raises ``pydantic.ValidationError``.
    """
    return NetworkConfig.model_validate(doc, context={STRICT_FIELDS: True})


def parse_peer_config(doc: Any) -> NetworkConfig:
    """A NetworkConfig from a peer (DRANET's context, a webhook answer).

    Unknown fields are ignored with a debug log: the peer may be newer.
    """
    return NetworkConfig.model_validate(doc)


class Capabilities(WireModel):
    """The ``GET /health`` answer of a BYODP webhook."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", strict=True)

    cloud_provider: bool = Field(alias="cloudProvider")
    profile_provider: bool = Field(alias="profileProvider")


class ProfileRequest(WireModel):
    """Body of ``POST /GetProfileConfig`` in both generations.

    gen2 DRANET (PR #282) sends the whole ResourceClaim in ``claim`` and no
    ``claim_uid``; gen1 sends only ``claim_uid``.  Either is enough; both
    must agree.  :attr:`claim_ref` is what the host passes on.  This client
    sends both, so a peer of either generation understands it.
    """

    device: DeviceIdentifiers
    claim_uid: str | None = None
    claim: dict[str, Any] | None = None
    config: NetworkConfig | None = None

    _claim_ref: ClaimReference | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _one_claim(self) -> ProfileRequest:
        self._claim_ref = resolve_claim(self.claim_uid, self.claim)
        return self

    @property
    def claim_ref(self) -> ClaimReference:
        """The claim this request is for (validated when the request was parsed)."""
        if self._claim_ref is None:  # pragma: no cover - set by the validator
            self._claim_ref = resolve_claim(self.claim_uid, self.claim)
        return self._claim_ref


def parse_profile_request(doc: Any) -> ProfileRequest:
    """Parse a ``/GetProfileConfig`` body of either generation (dict or JSON bytes).

    Raises ``pydantic.ValidationError`` naming the field: neither ``claim``
    nor ``claim_uid``, a claim without ``metadata.uid``, or a ``claim_uid``
    that differs from the claim's UID.
    """
    if isinstance(doc, (bytes, str)):
        return ProfileRequest.model_validate_json(doc)
    return ProfileRequest.model_validate(doc)


def describe_validation_error(exc: Exception, root: str = "(document)") -> str:
    """``field.path: message`` per problem, ``;``-joined, without pydantic's URLs."""
    if not isinstance(exc, ValidationError):
        return str(exc)
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ())) or root
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{where}: {msg}")
    return "; ".join(parts)
