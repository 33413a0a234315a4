"""Talking to the EC2 instance metadata service (IMDS): endpoint, session, loading.

IMDSv2 is always used: one ``PUT /latest/api/token`` gives a session token
with a TTL that every GET carries; :class:`~dranet_cloud.toolkit.metadata.MetadataClient`
reuses it, refreshes it before it expires and once on a 401, and never logs
it.  IMDSv1 (plain GETs) is used only when the operator sets
``aws.allow_imdsv1=true`` *and* the server refuses to issue tokens (403, 404
or 405 to the PUT, as an IMDS with tokens disabled or an EC2-compatible
look-alike answers).

Endpoint, first match wins:

1. ``DRANET_CLOUD_AWS_METADATA_ENDPOINT`` (this project's override);
2. ``AWS_EC2_METADATA_SERVICE_ENDPOINT`` (the variable botocore and the AWS
   SDKs honour, so one setting points both at the same server);
3. ``http://[fd00:ec2::254]`` when ``AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE``
   is ``IPv6`` or the setting ``aws.endpoint_mode`` is ``ipv6`` (IPv6-only
   Nitro subnets), else ``http://169.254.169.254``.

IMDS has no recursive view, so a snapshot costs one request per key.  Keys
that do not depend on each other are fetched concurrently: the identity
document first (it settles the session token), then the placement keys with
the MAC listing, then every key of every ENI in one wave.  A key that answers
404 is simply absent.  A GET rejected with 401 (token expired
or the server restarted) is retried with a fresh token a bounded number of
times, which keeps a load of ~60 keys working even against a server that
expires tokens every couple of requests.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.toolkit.errors import ProviderUnavailable
from dranet_cloud.toolkit.logsafe import safe
from dranet_cloud.toolkit.metadata import (
    Endpoint,
    MetadataClient,
    MetadataError,
    MetadataNotADocument,
    MetadataNotFound,
    MetadataUnavailable,
    TokenSpec,
    require_shape,
    resolve_endpoint,
)

from .snapshot import ENI_KEYS, PLACEMENT_KEYS, PLUGIN, AwsInstance, listed_macs

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "http://169.254.169.254"
DEFAULT_ENDPOINT_IPV6 = "http://[fd00:ec2::254]"
ENDPOINT_ENV = "DRANET_CLOUD_AWS_METADATA_ENDPOINT"
SDK_ENDPOINT_ENV = "AWS_EC2_METADATA_SERVICE_ENDPOINT"
SDK_ENDPOINT_MODE_ENV = "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"
SETTING_ALLOW_IMDSV1 = "aws.allow_imdsv1"
SETTING_ENDPOINT_MODE = "aws.endpoint_mode"

TOKEN_PATH = "/latest/api/token"
TOKEN_TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"
TOKEN_TTL_SECONDS = 21600
IMDS_TOKEN = TokenSpec(
    path=TOKEN_PATH,
    ttl_header=TOKEN_TTL_HEADER,
    token_header=TOKEN_HEADER,
    ttl_seconds=TOKEN_TTL_SECONDS,
)

DOCUMENT_PATH = "/latest/dynamic/instance-identity/document"
META = "/latest/meta-data/"
MACS_PATH = META + "network/interfaces/macs/"

# Status codes with which a server refuses to issue IMDSv2 tokens.
_NO_TOKENS = frozenset({403, 404, 405})
# Extra attempts for one key whose fresh token was rejected again.
_MAX_401_RETRIES = 4
_MAX_WORKERS = 8

_TRUE = frozenset({"1", "true", "yes", "on"})


def _flag(value: str | None) -> bool:
    return value is not None and value.strip().lower() in _TRUE


def allow_imdsv1(context: ProviderContext) -> bool:
    return _flag(context.options.setting(SETTING_ALLOW_IMDSV1))


def endpoint_from(env: Mapping[str, str], *, endpoint_mode: str | None = None) -> Endpoint:
    """The IMDS endpoint ``env`` selects (module docstring), with the variable that set it.

    ``endpoint_mode`` is the ``aws.endpoint_mode`` setting: AWS is the one
    cloud whose default endpoint also depends on a ``--set`` key, which wins
    over ``AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE`` when given.
    """
    mode = endpoint_mode if endpoint_mode is not None else env.get(SDK_ENDPOINT_MODE_ENV)
    default = DEFAULT_ENDPOINT_IPV6 if (mode or "").strip().lower() == "ipv6" else DEFAULT_ENDPOINT
    return resolve_endpoint(env, default, (ENDPOINT_ENV, SDK_ENDPOINT_ENV))


def open_client(context: ProviderContext, *, timeout: float | None) -> ImdsSession:
    """An IMDS session for ``context`` whose requests all end within ``timeout`` seconds.

    AWS's client is a session (:class:`ImdsSession`), not a bare
    :class:`MetadataClient`: it may fall back to IMDSv1 and refetch keys whose
    tokens were rejected.  ``timeout`` ``None`` leaves only each request's own
    timeout (``--request-timeout``).
    """
    return ImdsSession(context, deadline=timeout)


def _metadata_client(endpoint: Endpoint, *, timeout: float, tokens: bool = True) -> MetadataClient:
    return MetadataClient(
        endpoint,
        plugin=PLUGIN,
        token=IMDS_TOKEN if tokens else None,
        timeout=timeout,
    )


def _is_token_refusal(exc: MetadataError) -> bool:
    return exc.status in _NO_TOKENS and exc.url.rstrip("/").endswith(TOKEN_PATH)


class ImdsSession:
    """One IMDS conversation: a client (IMDSv2 unless allowed and needed) and an overall deadline.

    ``version`` becomes 1 only after the server refused tokens and the
    operator allowed IMDSv1.
    """

    def __init__(self, context: ProviderContext, *, deadline: float | None) -> None:
        self.endpoint = endpoint_from(
            context.env, endpoint_mode=context.options.setting(SETTING_ENDPOINT_MODE)
        )
        self.allow_v1 = allow_imdsv1(context)
        self.timeout = context.options.request_timeout
        self.until = None if deadline is None else time.monotonic() + deadline
        self.version = 2
        self.client = _metadata_client(self.endpoint, timeout=self.timeout)
        self._lock = threading.Lock()
        self._earlier_requests = 0  # sent by the IMDSv2 client before a downgrade
        self._retired: list[MetadataClient] = []

    def close(self) -> None:
        for client in [*self._retired, self.client]:
            client.close()

    def __enter__(self) -> ImdsSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def request_count(self) -> int:
        return self._earlier_requests + self.client.request_count

    def remaining(self) -> float | None:
        if self.until is None:
            return None
        return max(0.001, self.until - time.monotonic())

    def _downgrade_or_raise(self, exc: MetadataError) -> None:
        """The server refused a token: switch to IMDSv1 if allowed, else explain."""
        if not self.allow_v1:
            # A MetadataError (a ProviderUnavailable): the server answered, so
            # detection reads it as "not this cloud" (dranet_cloud.host.detection).
            raise MetadataError(
                f"aws: the metadata server ({self.endpoint.describe()}) refused to issue an IMDSv2 "
                f"session token (HTTP {exc.status} to PUT {TOKEN_PATH}); enable IMDSv2 on the "
                "instance (aws ec2 modify-instance-metadata-options --http-endpoint enabled) "
                f"or, to accept IMDSv1, set {SETTING_ALLOW_IMDSV1}=true",
                plugin=PLUGIN,
                url=exc.url,
                status=exc.status,
            ) from exc
        with self._lock:
            if self.version == 1:
                return  # another thread switched already
            log.warning(
                "aws: %s does not issue IMDSv2 tokens (HTTP %s); falling back to IMDSv1 "
                "because %s=true",
                self.endpoint.url,
                exc.status,
                SETTING_ALLOW_IMDSV1,
            )
            old = self.client
            self._earlier_requests += old.request_count
            self.client = _metadata_client(self.endpoint, timeout=self.timeout, tokens=False)
            self.version = 1
            self._retired.append(old)  # closed with the session: a thread may still use it

    def _fetch(self, path: str, *, retries_401: int) -> str | None:
        """One key as text, ``None`` for 404; a 401 is retried ``retries_401`` times."""
        rejected = 0
        while True:
            try:
                return self.client.get_text(path, deadline=self.remaining())
            except MetadataNotFound:
                return None
            except MetadataError as exc:
                if isinstance(exc, MetadataUnavailable):
                    raise
                if _is_token_refusal(exc):
                    self._downgrade_or_raise(exc)
                    continue
                if exc.status == 401 and self.version == 2 and rejected < retries_401:
                    # The client already retried once with a fresh token; a server
                    # that expires tokens very often may reject that one too.
                    rejected += 1
                    continue
                raise

    def get(self, path: str) -> str | None:
        """One key as text; ``None`` when the key does not exist (404)."""
        return self._fetch(path, retries_401=_MAX_401_RETRIES)

    def _try(self, path: str) -> str | _Rejected | None:
        try:
            return self._fetch(path, retries_401=0)
        except MetadataError as exc:
            if exc.status == 401 and self.version == 2:
                return _REJECTED
            raise

    def get_many(self, paths: Iterable[str]) -> dict[str, str | None]:
        """Independent keys, fetched concurrently; ``None`` for each 404.

        Not :meth:`MetadataClient.get_many`: that one gives up on a key whose
        one refreshed token is rejected again, which happens when threads
        share a token the server expires after a few uses.  Keys rejected in
        the concurrent pass are fetched again one by one, where each fresh
        token is used at once, so the load completes as long as the server
        honours a token at least once.
        """
        unique = list(dict.fromkeys(paths))
        if len(unique) <= 1:
            return {p: self.get(p) for p in unique}
        workers = min(_MAX_WORKERS, len(unique))
        with ThreadPoolExecutor(workers, thread_name_prefix="aws-imds") as pool:
            first = list(pool.map(self._try, unique))
        out: dict[str, str | None] = {}
        rejected = 0
        for path, value in zip(unique, first, strict=True):
            if isinstance(value, _Rejected):
                rejected += 1
                value = self.get(path)
            out[path] = value
        if rejected:
            log.debug("aws: %d keys were refetched after token rejections", rejected)
        return out


class _Rejected:
    """Marker: a key whose request was refused with 401 in the concurrent pass."""


_REJECTED = _Rejected()


def _document(raw: str | None, url: str) -> dict[str, Any]:
    if raw is None:
        raise ProviderUnavailable(
            f"aws: {url} answered 404 for {DOCUMENT_PATH}; it is not an EC2 instance "
            f"metadata service (point {ENDPOINT_ENV} at one)"
        )
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise ProviderUnavailable(
            f"aws: {url}{DOCUMENT_PATH} is not JSON ({exc}); the metadata server is "
            "misbehaving or is not EC2's"
        ) from exc
    if not isinstance(doc, dict):
        raise ProviderUnavailable(
            f"aws: {url}{DOCUMENT_PATH} is not a JSON object; the metadata server is "
            "misbehaving or is not EC2's"
        )
    try:
        for key, (meaning, pattern) in _DOCUMENT_SHAPES.items():
            value = doc.get(key)
            require_shape(value if isinstance(value, str) else None, key, meaning, pattern)
        region, zone = doc.get("region"), doc.get("availabilityZone")
        if isinstance(region, str) and isinstance(zone, str) and not zone.startswith(region):
            raise ValueError(f"availabilityZone {zone!r} is not in region {region!r}")
    except ValueError as exc:
        raise MetadataNotADocument(
            f"aws: GET {url}{DOCUMENT_PATH} answered an identity document EC2 would not send "
            f"({safe(exc, 200)}); the metadata server is misbehaving or is not EC2's",
            plugin=PLUGIN,
            url=url + DOCUMENT_PATH,
        ) from None
    return doc


# What EC2 writes in the identity document: p5.48xlarge, us-east-2, us-east-2a.
_DOCUMENT_SHAPES: dict[str, tuple[str, re.Pattern[str]]] = {
    "instanceType": ("an EC2 instance type", re.compile(r"[a-z0-9][a-z0-9-]*\.[a-z0-9-]+")),
    "region": ("an AWS region", re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]+")),
    "availabilityZone": ("an availability zone", re.compile(r"[a-z]{2}(-[a-z0-9]+)+")),
}


def load_instance(context: ProviderContext, deadline: float) -> AwsInstance:
    """Read the identity document, placement and every ENI into a snapshot."""
    with open_client(context, timeout=deadline) as session:
        # The document alone first: it settles the token (or the IMDSv1
        # fallback) before the concurrent waves share it.
        document = _document(session.get(DOCUMENT_PATH), session.endpoint.url)
        first = session.get_many([MACS_PATH, *(META + k for k in PLACEMENT_KEYS)])
        listing = f"the MAC listing {session.endpoint.url}{MACS_PATH}"
        macs = listed_macs(first[MACS_PATH], listing)
        eni_paths = {
            mac: [f"{MACS_PATH}{entry}/{key}" for key in ENI_KEYS] for mac, entry in macs.items()
        }
        values = session.get_many(p for paths in eni_paths.values() for p in paths)
        enis: dict[str, Mapping[str, str | None]] = {
            mac: {key: values[path] for key, path in zip(ENI_KEYS, paths, strict=True)}
            for mac, paths in eni_paths.items()
        }
        placement = {k: first[META + k] for k in PLACEMENT_KEYS}
        snapshot = AwsInstance.from_raw(
            endpoint=session.endpoint.url,
            document=document,
            placement=placement,
            enis=enis,
            imds_version=session.version,
        )
        log.info(
            "aws: loaded %s (%s) with %d ENIs from %s in %d requests (IMDSv%d)",
            snapshot.identity.instance_id,
            snapshot.identity.instance_type,
            len(snapshot.enis),
            session.endpoint.describe(),
            session.request_count,
            session.version,
        )
        return snapshot
