"""Where the ECS metadata service is and how to open a token session on it.

ECS "hardened mode" refuses metadata GETs without a session token, so every
client this plugin opens carries a :class:`TokenSpec`: the shared client PUTs
``/latest/api/token`` once, reuses the token for every GET, refreshes it
before it expires or once on a 401, and never logs it.
"""

from __future__ import annotations

from collections.abc import Mapping

from dranet_cloud.metadata import Endpoint, MetadataClient, TokenSpec, resolve_endpoint

from .constants import (
    DEFAULT_ENDPOINT,
    ENDPOINT_ENV,
    PLUGIN,
    TOKEN_HEADER,
    TOKEN_PATH,
    TOKEN_TTL_HEADER,
    TOKEN_TTL_SECONDS,
)

TOKEN_SPEC = TokenSpec(
    path=TOKEN_PATH,
    ttl_header=TOKEN_TTL_HEADER,
    token_header=TOKEN_HEADER,
    ttl_seconds=TOKEN_TTL_SECONDS,
)


def endpoint_from(env: Mapping[str, str]) -> Endpoint:
    """``DRANET_CLOUD_ALIYUN_METADATA_ENDPOINT`` (URL or ``unix:///path``), else the default."""
    return resolve_endpoint(env, DEFAULT_ENDPOINT, [ENDPOINT_ENV])


def open_client(
    env: Mapping[str, str], *, timeout: float = 2.0, token: TokenSpec = TOKEN_SPEC
) -> MetadataClient:
    """A metadata client with a token session for the endpoint ``env`` selects."""
    return MetadataClient(endpoint_from(env), plugin=PLUGIN, token=token, timeout=timeout)
