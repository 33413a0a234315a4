"""Talking to the ECS metadata service: where it is, a token session on it, loading.

The endpoint is ``http://100.100.100.200`` (what DRANET's
pkg/cloudprovider/alibaba/alibaba.go asks), moved by
``DRANET_CLOUD_ALIYUN_METADATA_ENDPOINT`` (a URL or ``unix:///path``).

ECS "hardened mode" refuses metadata GETs without a session token, so every
client this plugin opens carries a :class:`TokenSpec`: the shared client PUTs
``/latest/api/token`` once, reuses the token for every GET, refreshes it
before it expires or once on a 401, and never logs it.

Loading takes two rounds of concurrent GETs: the instance keys together with
the NIC listing, then every key of every NIC at once.  A GPU instance has a
handful of ENIs and a dozen keys each, so this is a few dozen small requests
sharing one token and one deadline instead of a long serial walk.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.toolkit.errors import ProviderUnavailable
from dranet_cloud.toolkit.hwaddr import entry_mac, warn_no_usable_nic
from dranet_cloud.toolkit.logsafe import safe
from dranet_cloud.toolkit.metadata import (
    Endpoint,
    MetadataClient,
    MetadataError,
    MetadataNotADocument,
    TokenSpec,
    require_shape,
    resolve_endpoint,
)

from .constants import (
    DEFAULT_ENDPOINT,
    ENDPOINT_ENV,
    INSTANCE_ID,
    METADATA_ROOT,
    PLUGIN,
    TOKEN_HEADER,
    TOKEN_PATH,
    TOKEN_TTL_HEADER,
    TOKEN_TTL_SECONDS,
)
from .snapshot import NIC_KEYS, AliyunInstance, AliyunNic

log = logging.getLogger(__name__)

TOKEN_SPEC = TokenSpec(
    path=TOKEN_PATH,
    ttl_header=TOKEN_TTL_HEADER,
    token_header=TOKEN_HEADER,
    ttl_seconds=TOKEN_TTL_SECONDS,
)

INSTANCE_KEYS: dict[str, str] = {
    "instance_id": "instance-id",
    "instance_type": "instance/instance-type",
    "region_id": "region-id",
    "zone_id": "zone-id",
}
MACS_PATH = f"{METADATA_ROOT}/network/interfaces/macs/"
MAX_WORKERS = 16


def endpoint_from(env: Mapping[str, str]) -> Endpoint:
    """``DRANET_CLOUD_ALIYUN_METADATA_ENDPOINT`` (URL or ``unix:///path``), else the default."""
    return resolve_endpoint(env, DEFAULT_ENDPOINT, [ENDPOINT_ENV])


def open_client(context: ProviderContext, *, timeout: float) -> MetadataClient:
    """A metadata client with a token session for the endpoint ``context.env`` selects.

    ``timeout`` bounds each request.
    """
    return MetadataClient(
        endpoint_from(context.env), plugin=PLUGIN, token=TOKEN_SPEC, timeout=timeout
    )


def load_instance(context: ProviderContext, deadline: float) -> AliyunInstance:
    """The snapshot, over a fresh client, retrying until ``deadline`` seconds have passed."""
    with open_client(context, timeout=context.options.request_timeout) as client:
        return load_from(client, deadline)


def _path(key: str) -> str:
    return f"{METADATA_ROOT}/{key}"


def parse_mac_listing(listing: str | None, document: str = "the NIC listing") -> list[str]:
    """MAC directory names from a listing (``00:16:3e:12:34:56/`` a line).

    Entries that are not MACs (as Go parses them) are skipped with one
    warning each, naming the entry and ``document``: the listing is the one
    place a misbehaving server could smuggle in odd path segments.
    """
    out: list[str] = []
    for line in (listing or "").splitlines():
        name = line.strip().rstrip("/")
        if name and entry_mac(name, plugin=PLUGIN, entry="an entry", document=document):
            out.append(name)
    return out


def _round(client: MetadataClient, paths: list[str], until: float) -> dict[str, str | None]:
    """One concurrent round of GETs; run again one at a time if tokens keep dying.

    The client refreshes its token once per request on a 401.  When many
    requests run at once and the server expires tokens early (a restart, a
    short TTL, a use limit), a request can meet a second 401 with the token
    another thread has just worn out.  Run one request at a time, each
    refresh serves the requests that follow it, so the round is repeated
    that way (within the same deadline) rather than failing the snapshot.
    """
    try:
        return client.get_many(paths, deadline=_left(until), max_workers=MAX_WORKERS)
    except MetadataError as exc:
        if exc.status != 401 or time.monotonic() >= until:
            raise
    log.debug("%s: a token was rejected twice; repeating the round one request at a time", PLUGIN)
    return client.get_many(paths, deadline=_left(until), max_workers=1)


def _lines(text: str | None) -> int:
    return sum(1 for line in (text or "").splitlines() if line.strip())


def _left(until: float) -> float:
    return max(until - time.monotonic(), 0.0)


# What ECS answers for each identifying key: cn-hangzhou, cn-hangzhou-h, ecs.g8i.xlarge.
_SHAPES: dict[str, tuple[str, re.Pattern[str]]] = {
    "instance_id": ("an ECS instance id", INSTANCE_ID),
    "region_id": ("an ECS region", re.compile(r"[a-z]{2}(-[a-z0-9]+)+")),
    "zone_id": ("an ECS zone", re.compile(r"[a-z]{2}(-[a-z0-9]+)+")),
    "instance_type": ("an ECS instance type", re.compile(r"ecs\.[a-z0-9][a-z0-9.-]{0,62}", re.I)),
}


def check_identity(client: MetadataClient, values: dict[str, str | None]) -> None:
    """Refuse an instance whose identifying keys cannot be what ECS answers (a portal's
    page served as text, say): published as attributes, they would mislead every claim."""
    for field, (meaning, pattern) in _SHAPES.items():
        key = INSTANCE_KEYS[field]
        try:
            require_shape(values[field], key, meaning, pattern)
        except ValueError as exc:
            raise MetadataNotADocument(
                f"{PLUGIN}: GET {client.url_for(_path(key))} answered a value that is not ECS "
                f"metadata ({safe(exc, 200)}); {client.endpoint.describe()} is not the ECS "
                "metadata service, or something answers in its place",
                plugin=PLUGIN,
                url=client.url_for(_path(key)),
            ) from None
    region, zone = values["region_id"], values["zone_id"]
    if region is not None and zone is not None and not zone.startswith(region + "-"):
        raise MetadataNotADocument(
            f"{PLUGIN}: GET {client.url_for(_path(INSTANCE_KEYS['zone_id']))} answered zone "
            f"{safe(zone, 60)!r}, which is not in region {safe(region, 60)!r}; "
            f"{client.endpoint.describe()} is not answering as ECS does",
            plugin=PLUGIN,
            url=client.url_for(_path(INSTANCE_KEYS["zone_id"])),
        )


def load_from(client: MetadataClient, deadline: float) -> AliyunInstance:
    """Fetch and parse the snapshot over ``client`` (its token session is reused),
    retrying until ``deadline`` seconds have passed."""
    until = time.monotonic() + deadline
    first = _round(client, [_path(k) for k in INSTANCE_KEYS.values()] + [MACS_PATH], until)
    values = {
        field: (raw.strip() or None) if (raw := first[_path(key)]) is not None else None
        for field, key in INSTANCE_KEYS.items()
    }
    # The instance's own keys decide whether this is ECS; its NIC listing does not.
    if values["instance_id"] is None:
        raise ProviderUnavailable(
            f"{PLUGIN}: {client.endpoint.describe()} has no instance id at "
            f"{_path(INSTANCE_KEYS['instance_id'])} (404 or empty): not the ECS metadata "
            f"service; point {ENDPOINT_ENV} at it or its emulator"
        )
    check_identity(client, values)
    listing = f"the NIC listing {client.endpoint.url}{MACS_PATH}"
    macs = parse_mac_listing(first[MACS_PATH], listing)
    if not macs:
        warn_no_usable_nic(PLUGIN, listing, _lines(first[MACS_PATH]))
    nic_paths = {mac: {key: f"{MACS_PATH}{mac}/{key}" for key in NIC_KEYS} for mac in macs}
    answers = _round(client, [p for keys in nic_paths.values() for p in keys.values()], until)
    nics: dict[str, AliyunNic] = {}
    for mac, keys in nic_paths.items():
        nic = AliyunNic.from_values(mac, {key: answers[path] for key, path in keys.items()})
        nics[nic.mac] = nic
    instance = AliyunInstance(endpoint=client.endpoint.url, nics=nics, **values)
    log.info(
        "%s: instance %s (%s) in %s with %d NICs from %s",
        PLUGIN,
        instance.instance_id,
        instance.instance_type,
        instance.zone_id,
        len(nics),
        client.endpoint.describe(),
    )
    return instance
