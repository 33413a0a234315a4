"""Wire models shared by the host, every plugin and the BYODP protocol.

The JSON produced here must be byte-for-byte what DRANET's Go structs produce
(``omitempty`` everywhere except ``interface``), because the same documents
travel between the Go daemon, webhooks and this project.  Field names are the
Go JSON tags, exposed through pydantic aliases so Python code can use
snake_case while the wire keeps camelCase.

``None`` always means "not set".  The serializer drops ``None`` fields, so a
document parsed and dumped again comes back unchanged, including explicit
``false``/``0``/``""`` values that Go would have emitted for pointer fields.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

MAX_INTERFACE_NAME = 15
_HEX = re.compile(r"[0-9a-fA-F]")


def normalize_mac(mac: str) -> str:
    """Return ``mac`` lower-case and colon-separated.

    Clouds publish MACs upper-case, dash-separated or without separators
    (Azure: ``0011AAFFBB22``); Linux reports ``00:11:aa:ff:bb:22``.  Every MAC
    comparison in this project goes through this function.
    """
    digits = "".join(_HEX.findall(mac))
    if len(digits) != 12:
        raise ValueError(f"not a 48-bit MAC address: {mac!r}")
    digits = digits.lower()
    return ":".join(digits[i : i + 2] for i in range(0, 12, 2))


class WireModel(BaseModel):
    """Base for wire documents: aliases on the wire, unset fields omitted."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", serialize_by_alias=True)

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        return {k: v for k, v in data.items() if v is not None}

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

    @property
    def mac(self) -> str | None:
        """The MAC normalized, or ``None`` when absent or unparsable."""
        if not self.mac_address:
            return None
        try:
            return normalize_mac(self.mac_address)
        except ValueError:
            return None

    def label(self) -> str:
        """A short human name for logs and errors."""
        parts = [self.name or "(unnamed)"]
        if self.mac_address:
            parts.append(self.mac_address)
        if self.pci_address:
            parts.append(self.pci_address)
        return "/".join(parts)

    def key(self) -> str:
        """The identity these identifiers alone give: ``mac:``, else ``pci:``, else ``name:``.

        Caches and IPAM owners use :func:`dranet_cloud.nic.resolve_nic`, which
        also looks at the node (a name-only call gets the NIC's MAC identity);
        this is the same key for a NIC the node cannot see.
        """
        from .nic import described_nic

        return described_nic(self).identity


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


class VRFConfig(WireModel):
    name: str | None = None
    table: int | None = None


class IPVlanConfig(WireModel):
    mode: Literal["l2", "l3", "l3s"] | None = None
    flag: Literal["bridge", "private", "vepa"] | None = None


class InterfaceConfig(WireModel):
    name: str | None = None
    type: Literal["passthrough", "ipvlan"] | None = None
    unnumbered: bool | None = None
    addresses: list[str] | None = None
    dhcp: bool | None = None
    mtu: int | None = Field(default=None, ge=0)
    hardware_addr: str | None = Field(default=None, alias="hardwareAddr")
    gso_max_size: int | None = Field(default=None, alias="gsoMaxSize", ge=0)
    gro_max_size: int | None = Field(default=None, alias="groMaxSize", ge=0)
    gso_ipv4_max_size: int | None = Field(default=None, alias="gsoIPv4MaxSize", ge=0)
    gro_ipv4_max_size: int | None = Field(default=None, alias="groIPv4MaxSize", ge=0)
    disable_ebpf_programs: bool | None = Field(default=None, alias="disableEbpfPrograms")
    forwarding: bool | None = None
    arp_ignore: int | None = Field(default=None, alias="arpIgnore")
    arp_announce: int | None = Field(default=None, alias="arpAnnounce")
    vrf: VRFConfig | None = None
    ipvlan: IPVlanConfig | None = None

    @field_validator("name")
    @classmethod
    def _name_fits_linux(cls, v: str | None) -> str | None:
        if v and len(v) > MAX_INTERFACE_NAME:
            raise ValueError(
                f"Linux interface names are at most {MAX_INTERFACE_NAME} characters, "
                f"{v!r} has {len(v)}"
            )
        if v and ("/" in v or any(c.isspace() for c in v)):
            raise ValueError(f"interface name {v!r} contains '/' or white space")
        return v

    @field_validator("addresses")
    @classmethod
    def _addresses_are_cidrs(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        for i, addr in enumerate(v):
            if "/" not in addr:
                raise ValueError(f"addresses[{i}] {addr!r} is not a CIDR (add a prefix length)")
            try:
                ipaddress.ip_interface(addr)
            except ValueError as exc:
                raise ValueError(f"addresses[{i}] {addr!r} is not a CIDR: {exc}") from None
        return v

    @field_validator("hardware_addr")
    @classmethod
    def _hw_addr(cls, v: str | None) -> str | None:
        if v:
            normalize_mac(v)
        return v

    @field_validator("arp_ignore")
    @classmethod
    def _arp_ignore(cls, v: int | None) -> int | None:
        if v is not None and v not in (0, 1, 2, 3, 8):
            raise ValueError(f"arpIgnore must be 0-3 or 8, got {v}")
        return v

    @field_validator("arp_announce")
    @classmethod
    def _arp_announce(cls, v: int | None) -> int | None:
        if v is not None and v not in (0, 1, 2):
            raise ValueError(f"arpAnnounce must be 0-2, got {v}")
        return v

    @model_validator(mode="after")
    def _cross_field_rules(self) -> InterfaceConfig:
        if self.ipvlan is not None and self.type != "ipvlan":
            raise ValueError("ipvlan settings are only valid with type: ipvlan")
        if self.unnumbered:
            if self.type != "ipvlan":
                raise ValueError("unnumbered is only valid for a subinterface (type: ipvlan)")
            if self.addresses:
                raise ValueError("unnumbered cannot be combined with addresses")
            if self.dhcp:
                raise ValueError("unnumbered cannot be combined with dhcp")
        if self.dhcp and self.addresses:
            raise ValueError("dhcp and addresses are mutually exclusive")
        return self


class RouteConfig(WireModel):
    destination: str | None = None
    gateway: str | None = None
    source: str | None = None
    scope: int | None = Field(default=None, ge=0, le=255)
    table: int | None = Field(default=None, ge=0)

    def dedup_key(self) -> tuple[str, int]:
        return (self.destination or "", self.table or 0)


class RuleConfig(WireModel):
    priority: int | None = Field(default=None, ge=0)
    source: str | None = None
    destination: str | None = None
    table: int | None = Field(default=None, ge=0)

    def dedup_key(self) -> tuple[int, str, str, int]:
        return (self.priority or 0, self.source or "", self.destination or "", self.table or 0)


class NeighborConfig(WireModel):
    destination: str | None = None
    hardware_addr: str | None = Field(default=None, alias="hardwareAddr")

    def dedup_key(self) -> str:
        return self.destination or ""


class EthtoolConfig(WireModel):
    features: dict[str, bool] | None = None
    private_flags: dict[str, bool] | None = Field(default=None, alias="privateFlags")


class NetworkConfig(WireModel):
    """DRANET's NetworkConfig: user intent, cloud intent and profile results.

    ``interface`` is always present on the wire (Go emits ``{}``); everything
    else is omitted when unset.
    """

    profile: str | None = None
    interface: InterfaceConfig = Field(default_factory=InterfaceConfig)
    routes: list[RouteConfig] | None = None
    rules: list[RuleConfig] | None = None
    neighbors: list[NeighborConfig] | None = None
    ethtool: EthtoolConfig | None = None

    @property
    def wants_ipvlan(self) -> bool:
        return self.interface.type == "ipvlan"


class Capabilities(WireModel):
    """The ``GET /health`` answer of a BYODP webhook."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", strict=True)

    cloud_provider: bool = Field(alias="cloudProvider")
    profile_provider: bool = Field(alias="profileProvider")


class ProfileRequest(WireModel):
    """Body of ``POST /GetProfileConfig`` and ``POST /ReleaseProfileConfig``."""

    device: DeviceIdentifiers
    claim_uid: str
    config: NetworkConfig | None = None


# --- merge -----------------------------------------------------------------


def _merge_scalar(user: Any, base: Any) -> Any:
    if user is None or user == "":
        return base
    return user


def _merge_list(user: list[Any] | None, base: list[Any] | None, key: Any) -> list[Any] | None:
    if user is None and base is None:
        return None
    out: list[Any] = []
    seen: set[Any] = set()
    for item in (user or []) + (base or []):
        k = key(item)
        if k in seen:
            continue
        seen.add(k)
        out.append(item)
    return out


def _merge_model(user: BaseModel | None, base: BaseModel | None) -> Any:
    if user is None:
        return base.model_copy(deep=True) if base is not None else None
    if base is None:
        return user.model_copy(deep=True)
    values: dict[str, Any] = {}
    for name in type(user).model_fields:
        u, b = getattr(user, name), getattr(base, name)
        if isinstance(u, BaseModel) or isinstance(b, BaseModel):
            values[name] = _merge_model(u, b)
        elif isinstance(u, dict) or isinstance(b, dict):
            values[name] = None if u is None and b is None else {**(b or {}), **(u or {})}
        elif name == "addresses":
            values[name] = _merge_list(u, b, lambda a: a)
        else:
            values[name] = _merge_scalar(u, b)
    return type(user).model_construct(**values)


def merge_network_config(user: NetworkConfig | None, base: NetworkConfig | None) -> NetworkConfig:
    """DRANET's ``merge(user, base)``: the user wins.

    Scalars set in ``user`` override ``base``; lists are concatenated and
    de-duplicated keeping the ``user`` entry (addresses by value, routes by
    (destination, table), neighbors by destination, rules by all fields).
    """
    user = user or NetworkConfig()
    base = base or NetworkConfig()
    return NetworkConfig.model_construct(
        profile=_merge_scalar(user.profile, base.profile),
        interface=_merge_model(user.interface, base.interface),
        routes=_merge_list(user.routes, base.routes, RouteConfig.dedup_key),
        rules=_merge_list(user.rules, base.rules, RuleConfig.dedup_key),
        neighbors=_merge_list(user.neighbors, base.neighbors, NeighborConfig.dedup_key),
        ethtool=_merge_model(user.ethtool, base.ethtool),
    )


def describe_validation_error(exc: Exception, root: str = "(document)") -> str:
    """``field.path: message`` per problem, ``;``-joined, without pydantic's URLs."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return str(exc)
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ())) or root
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{where}: {msg}")
    return "; ".join(parts)


def validate_network_config(config: NetworkConfig) -> NetworkConfig:
    """Re-run every validation rule on a (possibly merged) config.

    Merging can combine fields that were each valid alone (user ``dhcp`` with
    profile ``addresses``), so the final config is validated again.
    """
    return NetworkConfig.model_validate(config.to_wire())
