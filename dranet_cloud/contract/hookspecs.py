"""The contract between the host and plugins.

Plugins are plain modules registered in the ``dranet_cloud`` entry-point
group; they implement any subset of these hooks with ``@hookimpl`` (pluggy's
marker).  A marked function whose name (or ``specname``) is not one of these
hooks stops the plugin from loading (pluggy's ``check_pending``, in
:meth:`dranet_cloud.host.plugin_manager.PluginRegistry.register`).  The host
calls one plugin at a time (it routes, it does not broadcast), so every hook
is ``firstresult``.  Which hooks a plugin implements decides its roles:

* **cloud**: ``instance_properties`` (plus detection, attributes, device config);
* **profile**: ``profile_config`` and ``release_profile_config``;
* **enricher**: ``device_attributes`` without ``instance_properties``: its
  attributes are added on top of whichever cloud plugin is active.

Devices: the host resolves the ``DeviceIdentifiers`` DRANET sent (an
interface name, a DRA device name such as ``pci-0000-00-05-0``, a MAC or a
PCI address alone) to the local NIC once and passes the hooks that NIC's
interface name (``""`` for a PCI function with no netdev), MAC and PCI
address, carrying the NIC itself (:class:`dranet_cloud.node.nic.ResolvedDevice`).
A plugin that reads the node goes through :func:`dranet_cloud.node.nic.resolve_nic`
(which answers with the carried NIC), never through ``device.name``, and keys
nothing by the name alone (:func:`dranet_cloud.providers.subinterface.subinterface_owner`
for IPAM).

Errors: raise :mod:`dranet_cloud.toolkit.errors` types.  ``ProviderUnavailable`` for
an endpoint that did not answer, ``ProfileDenied`` to refuse a claim.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import pluggy

from dranet_cloud.contract.context import InstanceSnapshot, ProviderContext, SampleHost
from dranet_cloud.contract.settings import Setting
from dranet_cloud.wire.claims import ClaimReference
from dranet_cloud.wire.models import AttributeMap, DeviceIdentifiers, NetworkConfig

__all__ = ["CONFIGURED_EVIDENCE", "PROJECT", "Emulator", "hookimpl", "hookspec"]

PROJECT = "dranet_cloud"
hookimpl = pluggy.HookimplMarker(PROJECT)
# pluggy's own spec marker, for code that marks specs the pluggy way.
hookspec = pluggy.HookspecMarker(PROJECT)
_firstresult_spec = hookspec(firstresult=True)


class Emulator(Protocol):
    """What the host and the CLI use of the ``emulator`` hook's answer.

    :class:`dranet_cloud.testing.emulator.Emulator` is one; the contract
    names only what ``emulate`` and ``demo`` call, so it does not depend on
    the test kit.
    """

    faults: Any  # the kit's fault injector; ``emulate --latency`` sets ``faults.delay``
    log: list[Any]  # the requests served so far

    @property
    def url(self) -> str: ...

    @property
    def env(self) -> dict[str, str]: ...

    def start(self) -> object: ...

    def stop(self) -> None: ...

    def serve_forever(self) -> None: ...


# Prefix of local evidence that comes from configuration (a URL in the
# environment) rather than from the node itself; it ranks after hardware
# evidence when several plugins are confirmed.
CONFIGURED_EVIDENCE = "configured: "


@_firstresult_spec
def local_evidence(context: ProviderContext) -> str | None:
    """Say whether the node's own files point at this plugin's environment.

    Called by the host during auto-detection, for every installed plugin,
    before any network I/O.  Read DMI/sysfs through ``context.host_root`` only;
    never touch the network here (it must cost microseconds).  Return a short
    human description of the evidence (``"DMI product_name=Google Compute
    Engine"``) or ``None`` when there is none.  Evidence that is only
    configuration (the webhook plugin's URL) starts with
    :data:`CONFIGURED_EVIDENCE` so that hardware evidence outranks it.
    """


@_firstresult_spec
def provider_aliases() -> list[str] | None:
    """Other names operators may use for this plugin in ``--cloud-provider-hint``.

    Called once by the host when it resolves a name.  DRANET spells some
    providers differently from their plugin names (``ALIBABA`` for
    ``aliyun``); matching is case-insensitive.  ``None``: no aliases.
    """


@_firstresult_spec
def plugin_settings() -> list[Setting] | None:
    """The ``--set`` keys this plugin reads, with their types.

    Called by the CLI before the host starts, for every ``--set NAME.KEY=V``
    whose ``NAME`` is this plugin.  Return :class:`dranet_cloud.contract.settings.Setting`
    entries (``Setting("allow_imdsv1", "bool", "accept IMDSv1")``) without the
    ``NAME.`` prefix; ``[]`` means "no settings", so any key is refused.  An
    unknown key or a value that does not parse as its ``kind`` exits 2 and
    names the valid keys.  Not implementing the hook lets every key through
    unchecked (with a warning), which only suits plugins older than the hook.
    The plugin still reads values as strings from ``context.options.setting``.
    """


@_firstresult_spec
def host_paths() -> list[str] | None:
    """The node directories this plugin reads under the host root.

    The sidecar sees only what its pod mounts under ``--host-root``, so this
    list is the one place a deployment learns which host directories the
    plugin's hooks read (``["/sys", "/proc/net", "/var/lib/hyperv"]`` for
    Azure, whose ``azure-ipoib`` profile reads the Hyper-V KVP pool).  Name
    each directory as the node does (``/proc/net``, absolute, normalized),
    every one that any hook reads, ``/sys`` included when the plugin reads
    DMI or sysfs itself; the core's own reads (``/sys``) are added by the
    host (:data:`dranet_cloud.host.host_paths.CORE_HOST_PATHS`).  Called without a
    node: the answer must be a constant.  A path a setting can move (Azure's
    ``kvp_pool``) is declared at its default.  ``serve`` warns at start-up
    for each declared directory the host root lacks; the overlays' test
    requires every overlay to mount the paths of the plugins documented for
    it, and the conformance suite requires the plugin's answers on its
    sample node cut down to these paths to be the whole node's.  ``None``:
    only what the core reads (plugins older than the hook).
    """


@_firstresult_spec
def confirm_environment(context: ProviderContext, timeout: float) -> str | None:
    """Confirm the environment with one cheap metadata request.

    Called during auto-detection only for plugins that had local evidence
    (or for all, when the operator opted in with ``--probe-metadata`` and DMI
    is unreadable), concurrently, each bounded by ``timeout`` seconds.
    Return a description of what answered (it names the endpoint), or
    ``None`` when something answered but it is not this environment.  Raise
    ``ProviderUnavailable`` (naming the endpoint and the override variable)
    when nothing answered, or a subclass such as ``MetadataSpoofed`` when the
    answer proves a wrong server: the host records the message as the reason
    the plugin was not chosen.
    """


@_firstresult_spec
def instance_properties(context: ProviderContext, deadline: float) -> InstanceSnapshot:
    """Load the plugin's instance snapshot from its metadata server.

    Called once at host start for the chosen cloud/profile plugin, and again
    (rate-limited) when a device's MAC is unknown to the snapshot.  Retry
    while the server comes up, until ``deadline`` seconds have passed, then
    raise ``ProviderUnavailable``.  The host turns that into
    ``ProviderInitError`` when the plugin was requested explicitly.  A plugin
    whose facts are on the node's Kubernetes Node object (CKS) reads it here
    with ``context.node.get(deadline, fresh=True)``, so it is read once at
    start and again on each refresh; no other plugin makes the core read it.
    """


@_firstresult_spec
def device_attributes(
    context: ProviderContext, instance: InstanceSnapshot | None, device: DeviceIdentifiers
) -> AttributeMap | None:
    """Kubernetes attributes for one NIC (``{"gce.dra.net/block": {"string": ...}}``).

    Called by the host when it publishes devices; the result is cached per
    device.  ``instance`` is ``None`` for enrichers called without a cloud
    plugin.  The host validates every attribute against the API-server
    limits and drops invalid ones with a warning, then keeps as many as the
    device's attribute budget allows, best-ranked first (see
    ``attribute_ranking``).  ``None`` or ``{}``: nothing to add.
    """


@_firstresult_spec
def attribute_ranking() -> list[str] | None:
    """This plugin's attribute names, most useful first.

    A device carries at most 32 attributes, DRANET's own included (18-24 on a
    NIC), so the host caps what the providers add per device (see
    :mod:`dranet_cloud.host.attribute_budget`) and keeps each plugin's best-ranked ones:
    the names listed here come first, in this order; an entry ending in ``/``
    ranks a whole domain (``"resource.aws.com/"``); names not listed follow
    in the order ``device_attributes`` returned them.  Without this hook that
    order alone is the ranking, so a plugin may instead return its mapping
    most useful first.  Called once per plugin; the answer must not depend on
    the node.  ``None``: rank by returned order.
    """


@_firstresult_spec
def device_config(
    context: ProviderContext, instance: InstanceSnapshot, device: DeviceIdentifiers
) -> NetworkConfig | None:
    """The cloud's static baseline config for one NIC (MTU, routes, neighbors).

    Called by the host when a claim is prepared; cached per device, so it must
    depend only on the device and the snapshot, never on a claim.  ``None``:
    the plugin has nothing to say about this NIC (unknown to the metadata).
    """


@_firstresult_spec
def profile_config(
    context: ProviderContext,
    instance: InstanceSnapshot,
    device: DeviceIdentifiers,
    claim_uid: str,
    config: NetworkConfig,
    claim: ClaimReference | None,
) -> NetworkConfig | None:
    """Per-claim dynamic config (addresses from IPAM...).

    Called by the host for a claim whose merged config names a profile,
    with that merged config as context (to validate, deny or allocate).  It
    must be idempotent per ``(device, claim_uid)``: a kubelet retry gets the
    same answer and allocates nothing new.  Raise ``ProfileDenied`` to refuse.
    ``None``: nothing to add for this claim.

    ``claim`` (added for gen2 DRANET, which sends the whole ResourceClaim):
    the claim's UID (always equal to ``claim_uid``) and, when the caller knew
    them, its namespace, name and consuming pods.  Pass it to the IPAM
    (``allocate(..., claim=claim)`` / ``reserve(..., claim=claim)``) so a
    leaked allocation can be checked against the Kubernetes API later.  The
    host always passes a reference (UID only for gen1 callers); plugins
    written before it existed may leave the argument out of their signature,
    pluggy then simply does not pass it.  The answer must not depend on it:
    a gen1 and a gen2 request for the same claim get the same addresses.
    """


@_firstresult_spec
def release_profile_config(
    context: ProviderContext,
    instance: InstanceSnapshot,
    device: DeviceIdentifiers,
    claim_uid: str,
    config: NetworkConfig | None,
    claim: ClaimReference | None,
) -> bool | None:
    """Free what ``profile_config`` allocated for this claim.

    ``claim``: as for ``profile_config`` (release requests carry only the UID,
    so usually a reference without namespace or name); optional for plugins.

    Called by the host at claim teardown, best effort and never retried.
    Free by owner (device, claim), not by what ``config`` still lists.
    Releasing an unknown or already released claim is success.  Return
    ``True`` when handled; raise on failure (the host logs it).
    """


@_firstresult_spec
def emulator(fixture: Path | None, listen: str, faults: str | None) -> Emulator | None:
    """Build (not start) this plugin's metadata emulator.

    Called by ``dranet-cloud emulate <plugin>``, the demo and the conformance
    suite.  ``fixture`` replaces the built-in sample instance; ``listen`` is
    ``HOST:PORT`` or ``unix:///path``; ``faults`` is a fault spec string for
    the emulator kit.  The emulator's ``env`` must hold the variables that
    point this plugin at it.
    """


@_firstresult_spec
def sample_host(dest: Path, variant: str | None) -> SampleHost | None:
    """Write a fake host root matching the emulator's default fixture.

    Called by the demo, the conformance suite and tests.  ``variant`` selects
    among the plugin's samples (``None`` = default).  Return ``None`` for an
    unknown variant.
    """


@_firstresult_spec
def sample_variants() -> list[str] | None:
    """The ``variant`` names ``sample_host`` accepts besides ``None`` (the default).

    ``dranet-cloud demo --help`` lists them; a plugin with one sample node
    need not implement this hook.
    """
