"""The webhook's profile hooks: ``POST /GetProfileConfig`` and
``POST /ReleaseProfileConfig`` with ``{"device", "claim_uid", "config"}``
(and the claim, for a gen2 peer), for a webhook whose ``/health`` declared
the profile role.

Denials (400/404/409/422) and outages propagate to the host, which refuses
or retries the claim; a profile call to a webhook that did not declare the
role is refused without reaching the network.
"""

from __future__ import annotations

from typing import NoReturn

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.wire.claims import ClaimReference, resource_claim_document
from dranet_cloud.wire.models import DeviceIdentifiers, NetworkConfig, ProfileRequest

from .calls import json_or_none, parse_network_config, post, serves
from .client import WebhookUnavailable
from .endpoint import PLUGIN
from .snapshot import PROFILE_ROLE, WebhookInstance

GET_PROFILE_CONFIG = "/GetProfileConfig"
RELEASE_PROFILE_CONFIG = "/ReleaseProfileConfig"


def _profile_body(
    device: DeviceIdentifiers,
    claim_uid: str,
    config: NetworkConfig | None,
    claim: ClaimReference | None = None,
) -> bytes:
    """A profile request both generations of peer understand.

    ``claim`` (a minimal ResourceClaim) is what a gen2 peer reads, ``claim_uid``
    what a gen1 peer reads; each ignores the other.  A release carries only
    ``claim_uid``, as DRANET's own release does.  Always send a config object
    (``{"interface": {}}`` at least): servers written against DRANET index into
    it without checking for null.
    """
    doc = ProfileRequest.model_construct(
        device=device,
        claim_uid=claim_uid,
        claim=resource_claim_document(claim) if claim is not None else None,
        config=config or NetworkConfig(),
    )
    return doc.to_json().encode()


def _refuse_undeclared(instance: WebhookInstance, call: str) -> NoReturn:
    raise WebhookUnavailable(
        f"{PLUGIN}: webhook at {instance.url} declares profileProvider=false, so {call} is "
        f"not sent to it; enable the profile capability in the webhook or choose another "
        f"--profile-provider"
    )


def profile_config(
    context: ProviderContext,
    instance: WebhookInstance,
    device: DeviceIdentifiers,
    claim_uid: str,
    config: NetworkConfig,
    claim: ClaimReference | None = None,
) -> NetworkConfig | None:
    """``POST /GetProfileConfig``; denials and outages propagate to the host."""
    if not serves(instance, PROFILE_ROLE):
        _refuse_undeclared(instance, GET_PROFILE_CONFIG)
    ref = claim if claim is not None else ClaimReference(uid=claim_uid)
    endpoint, answer = post(
        context, instance, GET_PROFILE_CONFIG, _profile_body(device, claim_uid, config, ref)
    )
    return parse_network_config(
        json_or_none(answer, endpoint, GET_PROFILE_CONFIG), endpoint, GET_PROFILE_CONFIG
    )


def release_profile_config(
    context: ProviderContext,
    instance: WebhookInstance,
    device: DeviceIdentifiers,
    claim_uid: str,
    config: NetworkConfig | None,
) -> bool | None:
    """``POST /ReleaseProfileConfig``: any 2xx is success; failures raise (the host logs)."""
    if not serves(instance, PROFILE_ROLE):
        # Nothing was ever allocated through this webhook, so nothing to free.
        return None
    post(context, instance, RELEASE_PROFILE_CONFIG, _profile_body(device, claim_uid, config))
    return True
