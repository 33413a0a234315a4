"""The conformance suite's checks as sentences: why a plugin breaks a promise.

:mod:`.conformance` asserts on these.  Each returns ``None`` or the problems
in words that name the device, the field, what was expected and what came, so
a failing suite says why (``AssertionError: ('eth0', 'x/is-primary')`` told a
vendor nothing).  They are plain functions, so a plugin's own tests can call
them too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dranet_cloud.contract.confirm import NOT_THIS_ENVIRONMENT
from dranet_cloud.host.attribute_limits import attribute_name_problem, attribute_value_problem
from dranet_cloud.host.detection import NO_PROVIDER, DetectionResult
from dranet_cloud.host.validation import ConfigInvalid, validate_network_config
from dranet_cloud.testing.dranet_wire import go_shape_problems
from dranet_cloud.testing.messages import LoggedRequest
from dranet_cloud.toolkit.hwaddr import normalize_mac
from dranet_cloud.toolkit.logsafe import safe
from dranet_cloud.wire.models import DeviceAttribute, NetworkConfig

# DRANET's floor is its own rule (``pkg/apis/validation.go``: ``MinMTU = 68``,
# checked by :mod:`dranet_cloud.host.validation`), but its ``ValidateConfig`` has
# no ceiling (kubernetes-sigs/dranet main f258477).  DRANET writes the MTU to
# the link with netlink (``IFLA_MTU``, ``pkg/driver/hostdevice.go``) and the
# kernel refuses a value above the device's ``max_mtu``, which no Ethernet
# device has above ``ETH_MAX_MTU`` = 65535 (``include/uapi/linux/if_ether.h``):
# the claim's NodePrepareResources fails on the node, every retry again.  (For
# an SR-IOV VF DRANET also refuses an MTU above its PF's:
# ``pkg/driver/dra_hooks.go``, ``validateVFMTU``.)
MAX_MTU = 65535
_REQUESTS_SHOWN = 6

_EXPECTED_NAME = (
    "expected <domain>/<name> with a DNS-subdomain domain (at most 63 characters) and a C "
    "identifier name ([A-Za-z][A-Za-z0-9_]*, at most 32 characters)"
)


def attribute_problem(device: str, name: str, attr: DeviceAttribute) -> str | None:
    """Why the API server would refuse attribute ``name`` of ``device`` (a label)."""
    problem = attribute_name_problem(name)
    if problem is not None:
        return f"device {device}: attribute {name!r}: {problem}; {_EXPECTED_NAME}"
    problem = attribute_value_problem(attr)
    if problem is not None:
        return (
            f"device {device}: attribute {name!r}: {problem}; expected one value within the "
            f"API server's limits, got {attr.to_wire()}"
        )
    return None


def mtu_problem(mtu: int | None) -> str | None:
    """Why DRANET could not apply ``mtu`` (``None``: no MTU, nothing to apply)."""
    if mtu is not None and mtu > MAX_MTU:
        return (
            f"interface.mtu: expected at most {MAX_MTU} (no Linux Ethernet device takes more; "
            f"DRANET's netlink call fails), got {mtu} [mtu-maximum]"
        )
    return None


def config_problems(config: NetworkConfig) -> list[str]:
    """Every reason DRANET would refuse ``config``: its validation rules (interface,
    routes, rules, neighbors; each tagged ``[rule]``), the MTU the kernel takes, and
    the gen2 wire shape this project emits."""
    problems: list[str] = []
    try:
        validate_network_config(config)
    except ConfigInvalid as exc:
        problems += exc.errors
    mtu = mtu_problem(config.interface.mtu)
    if mtu is not None:
        problems.append(mtu)
    return problems + go_shape_problems(config.to_wire(), "config")


def known_macs_problem(known: frozenset[str] | None, sample_macs: Iterable[str]) -> str | None:
    """Why a snapshot's ``known_macs()`` cannot serve the host on its own sample node.

    ``None`` is allowed (the metadata lists no NICs, as with a webhook).  An
    empty set is a legitimate answer for *some* document (one whose NIC list
    has no usable entry: the plugin still starts, publishes the instance's
    attributes and warns), but not for the plugin's own sample node and
    emulator, which describe a working machine: there an empty set means the
    plugin lost its NICs, and the host would take every NIC for a hot-plugged
    one.  A MAC not in Go's colon form never matches what DRANET sends; and
    the emulator's instance must list at least one NIC of the sample node it
    ships with.
    """
    if known is None:
        return None
    if not known:
        return (
            "known_macs() of its snapshot is empty on its own sample node and emulator: the host "
            "then takes every NIC for a hot-plugged one and reloads the metadata for it. An "
            "empty set is right only for a document whose NIC list has no usable entry; the "
            "plugin's own emulator must list the sample node's NICs, and known_macs() must "
            "return their MACs (None when the metadata lists no NICs at all, as a webhook's)"
        )
    for mac in sorted(known):
        try:
            canonical = normalize_mac(mac)
        except ValueError as exc:
            return f"known_macs() holds {mac!r}, which is no hardware address: {exc}"
        if canonical != mac:
            return (
                f"known_macs() holds {mac!r}; expected Go's form {canonical!r} (lower case, "
                "colons: dranet_cloud.toolkit.hwaddr.normalize_mac), or no NIC DRANET sends "
                "matches it"
            )
    local = sorted(set(sample_macs))
    if not known & set(local):
        return (
            f"known_macs() lists {', '.join(sorted(known))}, none of the sample node's NICs "
            f"({', '.join(local) or 'none'}): the emulator's instance and the sample node "
            "describe different machines"
        )
    return None


def detection_problem(
    plugin: str, result: DetectionResult, answered: Sequence[LoggedRequest] = ()
) -> str | None:
    """Why the host's detection on the plugin's own sample node did not choose it.

    ``answered``: what the plugin's emulator was asked meanwhile (the path a
    ``confirm`` with a typo asked, and the 404 it got).
    """
    if result.provider == plugin:
        return None
    if result.provider != NO_PROVIDER:
        return (
            f"detection on its own sample node chose {result.provider!r}, not {plugin!r}: "
            f"{result.evidence}"
        )
    head = f"detection on its own sample node answered `{NO_PROVIDER}`"
    if plugin not in result.candidates:
        return (
            f"{head}: its local_evidence found nothing on the sample node (expected a short "
            "description of the DMI/sysfs evidence its sample_host writes, got None)"
        )
    why = result.failures.get(plugin, result.evidence)
    if why == NOT_THIS_ENVIRONMENT:
        why += (
            " (confirm_environment returned None: its own emulator answered, but the plugin did "
            "not recognise the answer; check the path and the answer it expects against what "
            "the emulator serves)"
        )
    asked = ", ".join(
        f"{safe(r.method, 16)} {safe(r.path, 120)} -> {r.status or 'dropped'}"
        for r in answered[:_REQUESTS_SHOWN]
    )
    return (
        f"{head}: local evidence {result.candidates[plugin]!r} was not confirmed: {why}; its "
        f"emulator was asked: {asked or 'nothing'}"
    )
