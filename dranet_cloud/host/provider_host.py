"""The provider host a node daemon embeds.

It mirrors DRANET's three knobs (``--cloud-provider-hint``,
``--profile-provider``, ``--webhook-url``), routes each call to exactly one
plugin, and applies DRANET's precedence chain.  Two rules from DRANET's review
history shape it:

* an explicitly requested provider that cannot start is fatal at start-up
  (``ProviderInitError``), so a misconfigured node never becomes ready and
  fails later at claim time; an auto-detected one that fails is only logged,
  so nodes that worked without a provider keep working;
* teardown does not fail a claim: ``release`` reports a plugin's failure as
  ``False`` and the provider owns reclaiming what it left behind (the one
  exception it lets through is :class:`WouldBlock`, so a server runs the
  release again where it may wait for the store).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from cachetools import LRUCache

from dranet_cloud.contract.context import InstanceSnapshot, ProviderContext, ProviderOptions
from dranet_cloud.host.attribute_budget import AttributeBudget, DeviceBudget
from dranet_cloud.host.attribute_limits import validate_attributes, value_count
from dranet_cloud.host.detection import NO_PROVIDER, DetectionResult, detect
from dranet_cloud.host.host_paths import warn_missing
from dranet_cloud.host.merge import merge_network_config
from dranet_cloud.host.plugin_manager import PluginRegistry
from dranet_cloud.host.validation import validate_network_config
from dranet_cloud.ipam.base import IpamStore
from dranet_cloud.node.hostroot import HostRoot
from dranet_cloud.node.nic import LocalNic, ResolvedDevice, resolve_device
from dranet_cloud.toolkit.errors import (
    ConfigError,
    ProfileDenied,
    ProviderInitError,
    ProviderUnavailable,
    WouldBlock,
)
from dranet_cloud.toolkit.hwaddr import is_ipoib
from dranet_cloud.toolkit.log_format import fields
from dranet_cloud.toolkit.logsafe import safe
from dranet_cloud.wire.claims import ClaimReference
from dranet_cloud.wire.models import (
    AttributeMap,
    Capabilities,
    DeviceIdentifiers,
    NetworkConfig,
    describe_validation_error,
)

log = logging.getLogger(__name__)
# How many NICs a claim named but the node does not show are remembered as warned.
_UNSEEN_WARNED = 1024
_CACHE_SIZE = 1024  # devices whose attributes and config are cached

PROFILE_FROM_CLOUD = "cloud"


def _claim_ref(claim_uid: str, claim: ClaimReference | None) -> ClaimReference:
    """The claim a profile call is for; its UID is what every provider keys by."""
    if claim is not None:
        if claim_uid and claim_uid != claim.uid:
            raise ProfileDenied(
                f"claim UID {claim_uid!r} differs from the claim reference's {claim.uid!r}",
                status=400,
            )
        if claim.uid:
            return claim
    if not claim_uid:
        raise ProfileDenied("a claim UID is required for a profile", status=400)
    return ClaimReference(uid=claim_uid)


class ProviderHost:
    """Routes DRANET's provider calls to plugins.

    Call :meth:`start` once; then the per-device and per-claim methods may be
    called from several threads.
    """

    # Seconds between metadata reloads, and before a MAC a reload lacked asks again.
    refresh_interval = 10.0
    unknown_mac_backoff = 60.0

    def __init__(
        self,
        *,
        cloud_provider_hint: str = "",
        profile_provider: str = PROFILE_FROM_CLOUD,
        webhook_url: str | None = None,
        host_root: str | HostRoot | None = None,
        probe_metadata: bool = False,
        options: ProviderOptions | None = None,
        env: Mapping[str, str] | None = None,
        ipam: IpamStore | None = None,
        ipam_factory: Callable[[], IpamStore] | None = None,
        registry: PluginRegistry | None = None,
        profile_routes: Mapping[str, str] | None = None,
    ) -> None:
        self.registry = registry or PluginRegistry()
        self.cloud_provider_hint = cloud_provider_hint or ""
        self.profile_provider = (profile_provider or PROFILE_FROM_CLOUD).strip().lower()
        self.probe_metadata = probe_metadata
        # profile name -> plugin name, consulted before the default profile
        # provider (the BYODP server routes "local-ipam" claims this way).
        self.profile_routes = dict(profile_routes or {})
        opts = options or ProviderOptions()
        if webhook_url:
            opts.webhook_url = webhook_url
        root = host_root if isinstance(host_root, HostRoot) else HostRoot.from_env(host_root)
        self.context = ProviderContext(
            host_root=root,
            options=opts,
            env=dict(env) if env is not None else dict(os.environ),
            ipam_factory=ipam_factory,
        )
        if ipam is not None:
            self.context._ipam = ipam
        self.budget = AttributeBudget.with_floor(opts.dranet_attribute_floor)
        self._rankings: dict[str, list[str] | None] = {}
        self._unknown_macs: dict[str, float] = {}  # MAC -> when a reload still lacked it
        self._refresh_lock = threading.Lock()
        # Claims for a NIC the node does not show (``/metrics``), warned once per NIC.
        self.unseen_nic_claims = 0
        self._unseen_warned: dict[str, None] = {}  # NIC identities warned about, oldest first
        self.cloud: str | None = None
        self.profile: str | None = None
        self.detection: DetectionResult | None = None
        self._instances: dict[str, InstanceSnapshot] = {}
        self._lock = threading.RLock()
        # Keyed by the NIC's resolved identity (MAC, else PCI, else name),
        # never by the name DRANET sent: names move between NICs.
        self._attr_cache: LRUCache[str, AttributeMap] = LRUCache(maxsize=_CACHE_SIZE)
        self._config_cache: LRUCache[str, NetworkConfig | None] = LRUCache(maxsize=_CACHE_SIZE)
        self._last_refresh: dict[str, float] = {}
        self._started = False

    # --- start-up ------------------------------------------------------------

    def start(self, detection: DetectionResult | None = None) -> DetectionResult:
        """Choose and initialize the cloud and profile plugins.

        ``detection`` is an auto-detection result the caller already has (the
        CLI's cheap path), so the metadata is not confirmed twice.

        Raises ``ConfigError`` for unknown names and ``ProviderInitError`` for
        an explicitly requested provider that cannot serve.
        """
        reg = self.registry
        hint = self.cloud_provider_hint.strip()
        explicit_cloud = hint != ""
        cloud = reg.resolve(hint, flag="--cloud-provider-hint") if explicit_cloud else None
        if cloud is not None and "cloud" not in reg.roles(cloud):
            raise ConfigError(
                f"--cloud-provider-hint {hint!r}: plugin {cloud} has no cloud role "
                f"(roles: {', '.join(reg.roles(cloud)) or 'none'})"
            )
        explicit_profile: str | None = None
        if self.profile_provider not in (PROFILE_FROM_CLOUD,):
            explicit_profile = reg.resolve(
                self.profile_provider, flag="--profile-provider", also=(PROFILE_FROM_CLOUD,)
            )
            if explicit_profile is not None and "profile" not in reg.roles(explicit_profile):
                raise ConfigError(
                    f"--profile-provider {self.profile_provider!r}: plugin {explicit_profile} "
                    "has no profile role; profile-capable plugins: "
                    f"{', '.join(reg.with_role('profile')) or 'none'}"
                )

        if explicit_cloud:
            self.detection = DetectionResult(
                cloud or NO_PROVIDER, True, f"requested by --cloud-provider-hint {hint}", 0.0
            )
        else:
            self.detection = detection or detect(
                reg, self.context, probe_metadata=self.probe_metadata
            )
            cloud = None if self.detection.provider == NO_PROVIDER else self.detection.provider

        if cloud is not None:
            roles = {"cloud"}
            if explicit_profile == cloud:
                roles.add("profile")
            ok = self._init_plugin(cloud, explicit=explicit_cloud, roles=roles)
            if ok:
                self.cloud = cloud
            else:
                self.detection.provider = NO_PROVIDER
                self.detection.evidence += "; start-up failed, running without a cloud provider"

        if explicit_profile is not None:
            if explicit_profile not in self._instances:
                self._init_plugin(explicit_profile, explicit=True, roles={"profile"})
            else:  # started as the (auto-detected) cloud plugin: still check it
                self._require_roles(explicit_profile, {"profile"})
            self.profile = explicit_profile
        elif (
            self.profile_provider == PROFILE_FROM_CLOUD
            and self.cloud is not None
            and "profile" in reg.roles(self.cloud)
            and self._serves(self.cloud, "profile")
        ):
            self.profile = self.cloud
        for profile_name, plugin in self.profile_routes.items():
            if "profile" not in reg.roles(plugin):
                raise ConfigError(
                    f"profile {profile_name!r} is routed to plugin {plugin}, "
                    "which has no profile role"
                )
            if plugin not in self._instances:
                self._init_plugin(plugin, explicit=True, roles={"profile"})
        # A directory a running plugin reads but the pod does not mount fails
        # its claims one by one later: say so once, now, in deployment terms.
        warn_missing(self.context.host_root, reg, [*self._instances, *reg.with_role("enricher")])
        self._started = True
        log.info(
            "provider host started: cloud=%s profile=%s (%s)",
            self.cloud,
            self.profile,
            self.detection.evidence,
        )
        return self.detection

    def _serves(self, name: str, role: str) -> bool:
        inst = self._instances.get(name)
        served = inst.serving_roles() if inst is not None else None
        return served is None or role in served

    def _init_plugin(self, name: str, *, explicit: bool, roles: set[str]) -> bool:
        ctx = self.context
        if explicit:
            ctx.explicit_roles[name] = ctx.explicit_roles.get(name, frozenset()) | frozenset(roles)
        deadline = ctx.options.metadata_deadline
        if not self.registry.implements(name, "instance_properties"):
            # A profile-only plugin keeps its state elsewhere (IPAM).
            self._instances[name] = InstanceSnapshot(provider=name)
            return True
        try:
            instance = self.registry.call(
                name, "instance_properties", context=ctx, deadline=deadline
            )
            if instance is None:
                raise ProviderUnavailable(f"plugin {name} returned no instance properties")
        except (ProviderUnavailable, ConfigError) as exc:
            if isinstance(exc, ConfigError):
                raise
            if explicit:
                raise ProviderInitError(
                    f"{name} was requested explicitly but could not start: {exc}. "
                    f"Fix the endpoint, or run without the explicit {name} setting."
                ) from exc
            log.warning(
                "auto-detected provider %s could not start, continuing without it: %s", name, exc
            )
            return False
        self._instances[name] = instance
        self._last_refresh[name] = 0.0
        if explicit:
            self._require_roles(name, roles)
        return True

    def _require_roles(self, name: str, roles: set[str]) -> None:
        """Refuse to start when an explicitly requested role is not served."""
        instance = self._instances[name]
        served = instance.serving_roles()
        missing = roles - set(served) if served is not None else set()
        if missing:
            raise ProviderInitError(
                f"{name} was requested explicitly for the {'/'.join(sorted(missing))} role "
                f"but it declares only: {', '.join(sorted(served or ())) or 'no role'}"
                f"{' (' + instance.endpoint + ')' if instance.endpoint else ''}"
            )

    # --- status --------------------------------------------------------------

    def _require_started(self) -> None:
        if not self._started:
            raise RuntimeError("ProviderHost.start() must be called first")

    def capabilities(self) -> Capabilities:
        self._require_started()
        return Capabilities.model_validate(
            {
                "cloudProvider": self.cloud is not None,
                "profileProvider": self.profile is not None or bool(self.profile_routes),
            }
        )

    def instance(self, name: str | None = None) -> InstanceSnapshot | None:
        key = name or self.cloud
        return self._instances.get(key) if key else None

    # --- devices -------------------------------------------------------------

    def resolve(self, device: DeviceIdentifiers) -> ResolvedDevice:
        """``device`` resolved to the local NIC it means (MAC, then PCI address, then name).

        Plugins get the interface name, MAC and PCI address of that NIC,
        whatever form DRANET used (interface name, DRA device name, MAC only,
        PCI only), so their answers do not depend on the form; the identifiers
        carry the NIC (``.nic``, its ``identity`` the cache key), so nothing
        after this resolves it again.  Resolving a resolved device reads nothing.
        """
        return resolve_device(self.context.host_root, device)

    def _refresh_if_unknown(self, device: DeviceIdentifiers) -> InstanceSnapshot | None:
        """Reload the cloud snapshot when ``device``'s MAC is new to it (hot-attach).

        Rate-limited twice: at most one reload per ``refresh_interval``, and a
        MAC that stayed unknown after a reload (a bridge, a veth) does not ask
        again for ``unknown_mac_backoff``.  A 20-byte IPoIB address never asks:
        no cloud's metadata lists a NIC by one.  The fetch runs outside the state
        lock, so cached devices are served while it is under way.
        """
        name = self.cloud
        if name is None:
            return None
        mac = device.mac
        with self._lock:
            inst = self._instances[name]
            known = inst.known_macs()
            if mac is None or known is None or mac in known or is_ipoib(mac):
                return inst
            now = time.monotonic()
            last = self._last_refresh.get(name, 0.0)
            if last and now - last < self.refresh_interval:
                return inst
            if now - self._unknown_macs.get(mac, -1e18) < self.unknown_mac_backoff:
                return inst
            self._last_refresh[name] = now  # claimed: other threads skip the reload
        with self._refresh_lock:
            log.info(
                "device %s: MAC unknown to the %s metadata, refreshing it",
                safe(device.label()),
                name,
            )
            try:
                fresh = self.registry.call(
                    name,
                    "instance_properties",
                    context=self.context,
                    deadline=min(self.context.options.metadata_deadline, 5.0),
                )
            except ProviderUnavailable as exc:
                log.warning("refresh of %s metadata failed: %s", name, exc)
                return inst
        if not isinstance(fresh, InstanceSnapshot):
            return inst
        with self._lock:
            self._instances[name] = fresh
            self._attr_cache.clear()
            self._config_cache.clear()
            fresh_known = fresh.known_macs()
            if fresh_known is not None and mac not in fresh_known:
                self._unknown_macs[mac] = time.monotonic()
        return fresh

    def _is_known(self, inst: InstanceSnapshot | None, device: DeviceIdentifiers) -> bool:
        if inst is None:
            return True
        known = inst.known_macs()
        mac = device.mac
        # An IPoIB address is never in a cloud's NIC listing: not a hot-attach.
        return known is None or mac is None or mac in known or is_ipoib(mac)

    def device_attributes(self, device: DeviceIdentifiers) -> AttributeMap:
        """Validated attributes from the cloud plugin plus every enricher."""
        self._require_started()
        device = self.resolve(device)
        key = device.nic.identity
        with self._lock:
            if key in self._attr_cache:
                return dict(self._attr_cache[key])
        inst = self._refresh_if_unknown(device)
        merged: AttributeMap = {}
        budget = self.budget.for_device(self.context.host_root, device)
        self.budget.clear_drops(budget)
        sources: list[str] = []
        if self.cloud is not None and self._serves(self.cloud, "cloud"):
            sources.append(self.cloud)
        sources += [n for n in self.registry.with_role("enricher") if n != self.cloud]
        for name in sources:
            try:
                attrs = self.registry.call(
                    name,
                    "device_attributes",
                    context=self.context,
                    instance=inst if name == self.cloud else None,
                    device=device,
                )
            except Exception as exc:
                log.warning(
                    "plugin %s, device %s: attributes failed: %s",
                    name,
                    safe(device.label()),
                    safe(exc),
                    extra=fields(plugin=name, device=safe(device.label())),
                )
                continue
            if not attrs:
                continue
            # The cloud plugin's attributes win; an enricher only adds names.
            new = {k: v for k, v in attrs.items() if k not in merged}
            valid = validate_attributes(new, plugin=name, device=device.label())
            room = budget.providers - len(merged)
            value_room = budget.provider_values - sum(value_count(a) for a in merged.values())
            merged.update(
                self.budget.fit(name, device, valid, self._ranking(name), room, budget, value_room)
            )
        with self._lock:
            if self._is_known(inst, device):
                self._attr_cache[key] = merged
        return dict(merged)

    def _ranking(self, name: str) -> list[str] | None:
        """The plugin's ``attribute_ranking`` answer, asked once."""
        if name not in self._rankings:
            ranking = None
            if self.registry.implements(name, "attribute_ranking"):
                try:
                    ranking = self.registry.call(name, "attribute_ranking")
                except Exception as exc:
                    log.warning("plugin %s: attribute_ranking failed: %s", name, exc)
            self._rankings[name] = list(ranking) if ranking else None
        return self._rankings[name]

    def attribute_budget(self, device: DeviceIdentifiers) -> dict[str, Any]:
        """DRANET's count, the providers' budget and what was dropped, for ``describe``."""
        device = self.resolve(device)  # drops are recorded under the resolved NIC
        budget: DeviceBudget = self.budget.for_device(self.context.host_root, device)
        return {**budget.to_json(), "dropped": list(self.budget.dropped(budget))}

    def device_config(self, device: DeviceIdentifiers) -> NetworkConfig | None:
        """The cloud plugin's static config for ``device`` (cached)."""
        self._require_started()
        if self.cloud is None or not self._serves(self.cloud, "cloud"):
            return None
        device = self.resolve(device)
        key = device.nic.identity
        with self._lock:
            if key in self._config_cache:
                cached = self._config_cache[key]
                return cached.model_copy(deep=True) if cached is not None else None
        inst = self._refresh_if_unknown(device)
        try:
            config = self.registry.call(
                self.cloud, "device_config", context=self.context, instance=inst, device=device
            )
        except ProviderUnavailable as exc:
            log.warning(
                "plugin %s, device %s: device config failed: %s",
                self.cloud,
                safe(device.label()),
                safe(exc),
                extra=fields(plugin=self.cloud, device=safe(device.label())),
            )
            return None
        with self._lock:
            if self._is_known(inst, device):
                self._config_cache[key] = config
        return config.model_copy(deep=True) if config is not None else None

    # --- claims --------------------------------------------------------------

    def profile_config(
        self,
        device: DeviceIdentifiers,
        claim_uid: str,
        config: NetworkConfig,
        *,
        claim: ClaimReference | None = None,
    ) -> NetworkConfig | None:
        """Ask the profile provider for this claim; ``config`` is the merged config.

        ``claim`` carries the claim's namespace, name and pods when the caller
        knew them (gen2 DRANET); otherwise a reference holding only the UID is
        passed to the plugin.
        """
        return self.profile_call(device, claim_uid, config, claim=claim)()

    def profile_call(
        self,
        device: DeviceIdentifiers,
        claim_uid: str,
        config: NetworkConfig,
        *,
        claim: ClaimReference | None = None,
    ) -> Callable[[], NetworkConfig | None]:
        """:meth:`profile_config` in two steps: the checks now, the plugin call later.

        The checks (DRANET's validation, the profile's route) touch nothing
        outside this process and raise :class:`ProfileDenied` at once; the
        returned call resolves the NIC and asks the plugin.  A server runs
        the first step while it parses a request, so a denial costs no
        thread and the second step, which may hold the IPAM store, is short.
        """
        self._require_started()
        ref = _claim_ref(claim_uid, claim)
        # DRANET's rules, before anything is allocated: a context that can
        # only end in an invalid final config is denied here (400).
        config = self._validated(config, device)
        if not config.profile:
            raise ProfileDenied(
                f"config.profile is empty for device {device.label()}: a profile is asked for "
                "only when the claim's merged config names one",
                status=400,
            )
        plugin = self.profile_plugin(config)
        if plugin is None:
            raise ProfileDenied(self._unknown_profile(config.profile, device), status=404)

        def call() -> NetworkConfig | None:
            inst = self._instances.get(plugin)
            resolved = self.resolve(device)
            if not resolved.nic.found:
                self._unseen_nic(resolved.nic, device, ref.uid)
            result = self.registry.call(
                plugin,
                "profile_config",
                context=self.context,
                instance=inst,
                device=resolved,
                claim_uid=ref.uid,
                config=config,
                claim=ref,
            )
            if result is not None and not isinstance(result, NetworkConfig):
                raise TypeError(
                    f"plugin {plugin} returned {type(result).__name__}, not a NetworkConfig"
                )
            return result

        return call

    def network_config(
        self,
        device: DeviceIdentifiers,
        claim_uid: str,
        user_config: NetworkConfig | None = None,
        *,
        claim: ClaimReference | None = None,
    ) -> NetworkConfig:
        """DRANET's precedence chain for one claim on one device.

        ``merged = merge(user, cloud)``; if ``merged.profile`` is set,
        ``merged = merge(merged, profile(merged))``.  The config is validated
        before the profile is asked (so an invalid claim allocates nothing) and
        again after; if only the profile's answer made it invalid, what the
        profile allocated is released before the claim is denied.
        The NIC is resolved once, here, for all three steps.
        """
        device = self.resolve(device)
        merged = self._validated(
            merge_network_config(user_config, self.device_config(device)), device
        )
        if not merged.profile:
            return merged
        result = self.profile_config(device, claim_uid, merged, claim=claim)
        try:
            return self._validated(merge_network_config(merged, result), device)
        except ProfileDenied:
            self.release(device, claim_uid, merged, claim=claim)
            raise

    @staticmethod
    def _validated(config: NetworkConfig, device: DeviceIdentifiers) -> NetworkConfig:
        try:
            return validate_network_config(config)
        except ValueError as exc:
            raise ProfileDenied(
                f"the final config for device {device.label()} is invalid: "
                f"{describe_validation_error(exc)}",
                status=400,
            ) from exc

    def _unseen_nic(self, nic: LocalNic, device: DeviceIdentifiers, claim_uid: str) -> None:
        """A claim for a NIC this node does not show: counted, warned once per NIC, answered.

        Answered because a Passthrough NIC leaves the host's view when DRANET
        moves it into the pod (a retry, a release, a second claim then names
        a NIC the host no longer has); said because a MAC no NIC of the node
        has is as often a claim written for another node or a typo.  A call
        the server runs again on a worker (the store was busy) counts again.
        """
        with self._lock:
            self.unseen_nic_claims += 1
            if nic.identity in self._unseen_warned:  # the usual repeat: no file is read
                return
            if len(self._unseen_warned) >= _UNSEEN_WARNED:
                self._unseen_warned.pop(next(iter(self._unseen_warned)))
            self._unseen_warned[nic.identity] = None
        root = self.context.host_root
        if not root.listdir("/sys/class/net"):
            why = (
                f"the host root {root.root} shows no NIC at all (is --host-root the node's root, "
                "with /sys mounted?)"
            )
        else:
            why = (
                f"no NIC under {root.root}/sys/class/net has it (a Passthrough NIC already in "
                "its pod, or a claim meant for another node?)"
            )
        log.warning(
            "claim %s names device %s, which this node does not show: %s; answering from the "
            "identifiers alone (warned once per device; dranet_cloud_claims_unseen_nic_total "
            "counts every such claim)",
            safe(claim_uid),
            safe(device.label()),
            why,
            extra=fields(device=safe(device.label()), claim=safe(claim_uid)),
        )

    def _unknown_profile(self, profile: str, device: DeviceIdentifiers) -> str:
        """Why no plugin serves ``profile``: the profiles that are served, or that none is.

        A typo (``local-ipm``) on a server that does route profiles must not
        read as a server with no profile provider at all.
        """
        served = sorted(self.profile_routes)
        if served:
            return (
                f"profile {profile!r} was requested for device {device.label()} but this "
                f"server serves only the profile(s) {', '.join(map(repr, served))} (and no "
                "--profile-provider answers other names); fix the profile name in the claim's "
                "config, or start the server with the provider that serves it"
            )
        return (
            f"profile {profile!r} was requested for device {device.label()} but no "
            "profile provider is configured (set --profile-provider, or use a cloud plugin "
            "with a profile role)"
        )

    def profile_plugin(self, config: NetworkConfig) -> str | None:
        """The plugin :meth:`profile_config` asks for ``config`` (by its profile)."""
        return self.profile_routes.get(config.profile or "", self.profile)

    def release_plugins(self, config: NetworkConfig | None) -> list[str]:
        """The plugins :meth:`release` asks: the config's profile's, or every one."""
        routed = self.profile_routes.get(config.profile or "") if config is not None else None
        if routed is not None:
            return [routed]
        if config is not None and config.profile:
            return [self.profile] if self.profile else []
        return list(dict.fromkeys([p for p in (self.profile, *self.profile_routes.values()) if p]))

    def release(
        self,
        device: DeviceIdentifiers,
        claim_uid: str,
        config: NetworkConfig | None = None,
        *,
        claim: ClaimReference | None = None,
    ) -> bool:
        """Best-effort release: a plugin's failure is logged and answered ``False``.

        Only :class:`WouldBlock` propagates (the server runs the release again
        where it may wait); teardown must not block.

        The plugin is chosen by the config's profile; without one every
        profile plugin is asked, since releasing by owner is idempotent.
        """
        if not self._started:
            return True
        plugins = self.release_plugins(config)
        ok = True
        try:
            device = self.resolve(device)
        except Exception as exc:  # the plugin gets the identifiers as sent
            log.warning("device %s: could not resolve it on this node: %s", device.label(), exc)
        for plugin in plugins:
            try:
                self.registry.call(
                    plugin,
                    "release_profile_config",
                    context=self.context,
                    instance=self._instances.get(plugin),
                    device=device,
                    claim_uid=claim_uid,
                    config=config,
                    claim=claim if claim is not None else ClaimReference(uid=claim_uid),
                )
            except WouldBlock:
                raise  # the server runs the release again where it may wait
            except Exception as exc:
                log.error(
                    "plugin %s, device %s, claim %s: release failed (the provider must "
                    "reclaim it): %s",
                    plugin,
                    safe(device.label()),
                    safe(claim_uid),
                    safe(exc),
                    extra=fields(plugin=plugin, device=safe(device.label()), claim=safe(claim_uid)),
                )
                ok = False
        return ok

    def close(self) -> None:
        store = self.context._ipam
        if store is not None:
            store.close()
