"""Where the webhook lives and how to reach it: URL forms, TLS material, timeouts.

BYODP accepts three URL forms (``http://``, ``https://``, ``unix:///path``).
Everything else is rejected up front with a :class:`ConfigError` naming the
accepted forms, because a typo here otherwise surfaces much later as a claim
that cannot be prepared.
"""

from __future__ import annotations

import logging
import math
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.toolkit.errors import ConfigError

# The plugin name lives in the leaf .constants (local evidence must not import
# ssl); re-exported here for the HTTP side.
from .constants import PLUGIN as PLUGIN

log = logging.getLogger(__name__)

# Where the TLS material may come from, in order of precedence: the setting
# first (flags), then the environment the host was given.
TLS_SOURCES = {
    "ca_bundle": ("webhook.ca_bundle", "DRANET_CLOUD_WEBHOOK_CA_BUNDLE"),
    "client_cert": ("webhook.client_cert", "DRANET_CLOUD_WEBHOOK_CLIENT_CERT"),
    "client_key": ("webhook.client_key", "DRANET_CLOUD_WEBHOOK_CLIENT_KEY"),
}
TIMEOUT_SETTING = "webhook.timeout"
HEALTH_WAIT_SETTING = "webhook.health_wait"
DEFAULT_HEALTH_WAIT = 3.0
DEFAULT_TIMEOUT = 5.0
ACCEPTED_FORMS = "http://HOST[:PORT][/PREFIX], https://HOST[:PORT][/PREFIX] or unix:///path/to.sock"
# The host name sent on a unix socket; the server never sees a real one.
UNIX_BASE_URL = "http://localhost"


@dataclass(frozen=True)
class WebhookEndpoint:
    """A parsed webhook URL.

    ``base_url`` is what HTTP requests are built on (``http://localhost`` for a
    unix socket); ``uds`` is the socket path when the transport is a unix
    socket.  ``url`` is the operator's spelling, used in every message.
    """

    url: str
    base_url: str
    uds: str | None = None

    @property
    def is_tls(self) -> bool:
        return self.base_url.startswith("https://")

    def describe(self, path: str) -> str:
        """The URL of ``path`` on this webhook, as an operator would type it."""
        if self.uds is not None:
            return f"{self.url}:{path}"
        return self.url.rstrip("/") + path


def parse_webhook_url(url: str) -> WebhookEndpoint:
    """Parse and check a webhook URL; raise :class:`ConfigError` when unusable."""
    raw = url.strip()
    if not raw:
        raise ConfigError(f"{PLUGIN}: the webhook URL is empty; use {ACCEPTED_FORMS}")
    parts = urlsplit(raw)
    scheme = parts.scheme.lower()
    if scheme == "unix":
        # unix:///run/x.sock -> netloc "" and path "/run/x.sock".
        if parts.netloc or not parts.path.startswith("/") or parts.query or parts.fragment:
            raise ConfigError(
                f"{PLUGIN}: webhook URL {raw!r} is not a valid unix socket URL; "
                f"write an absolute socket path as unix:///path/to.sock "
                f"(accepted forms: {ACCEPTED_FORMS})"
            )
        return WebhookEndpoint(url=raw, base_url=UNIX_BASE_URL, uds=parts.path)
    if scheme in ("http", "https"):
        if not parts.hostname:
            raise ConfigError(f"{PLUGIN}: webhook URL {raw!r} has no host; use {ACCEPTED_FORMS}")
        if parts.query or parts.fragment:
            raise ConfigError(
                f"{PLUGIN}: webhook URL {raw!r} carries a query or fragment, which BYODP "
                f"does not use; use {ACCEPTED_FORMS}"
            )
        try:
            _ = parts.port  # raises for a malformed port
        except ValueError as exc:
            raise ConfigError(
                f"{PLUGIN}: webhook URL {raw!r} has an invalid port ({exc}); use {ACCEPTED_FORMS}"
            ) from None
        return WebhookEndpoint(
            url=raw, base_url=f"{scheme}://{parts.netloc}{parts.path}".rstrip("/")
        )
    raise ConfigError(
        f"{PLUGIN}: webhook URL {raw!r} has an unsupported scheme "
        f"{(parts.scheme or 'none')!r}; use {ACCEPTED_FORMS}"
    )


@dataclass(frozen=True)
class TlsSettings:
    """Client-side TLS material: a CA bundle and an optional client key pair.

    ``None`` everywhere means the system trust store and no client
    certificate.  Frozen and hashable: it is part of the connection-pool key.
    """

    ca_bundle: str | None = None
    client_cert: str | None = None
    client_key: str | None = None

    @property
    def is_default(self) -> bool:
        return self.ca_bundle is None and self.client_cert is None and self.client_key is None


def tls_from_context(context: ProviderContext) -> TlsSettings:
    """Read TLS settings: ``webhook.*`` settings first, then the environment."""
    values: dict[str, str | None] = {}
    for field_name, (setting, env_var) in TLS_SOURCES.items():
        value = context.options.setting(setting) or context.env.get(env_var) or None
        values[field_name] = value
    tls = TlsSettings(**values)
    if tls.client_key and not tls.client_cert:
        raise ConfigError(
            f"{PLUGIN}: a client key is set without a client certificate; set "
            f"webhook.client_cert or DRANET_CLOUD_WEBHOOK_CLIENT_CERT as well"
        )
    return tls


def build_ssl_context(tls: TlsSettings) -> ssl.SSLContext:
    """An SSL context: system trust unless a CA bundle is given, plus a client pair.

    A CA bundle replaces the system store: an operator who pins the webhook's
    CA does not want any public CA to be able to impersonate it.
    """
    try:
        context = ssl.create_default_context(cafile=tls.ca_bundle)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"{PLUGIN}: cannot load the webhook CA bundle {tls.ca_bundle!r} ({exc}); "
            f"fix webhook.ca_bundle / DRANET_CLOUD_WEBHOOK_CA_BUNDLE"
        ) from None
    if tls.client_cert:
        try:
            context.load_cert_chain(tls.client_cert, tls.client_key)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"{PLUGIN}: cannot load the webhook client certificate {tls.client_cert!r} "
                f"/ key {tls.client_key!r} ({exc}); fix webhook.client_cert and "
                f"webhook.client_key (or DRANET_CLOUD_WEBHOOK_CLIENT_CERT / _CLIENT_KEY)"
            ) from None
    return context


def request_timeout(context: ProviderContext) -> float:
    """Seconds one webhook request may take.

    ``webhook.timeout`` when set; otherwise the host's request timeout, but
    at least 5 s: that shared default (2 s) is sized for a link-local
    metadata server, while a webhook may be an IPAM service that talks to
    the API server before it answers.
    """
    fallback = max(DEFAULT_TIMEOUT, context.options.request_timeout)
    return _positive_float(context, TIMEOUT_SETTING, fallback)


def health_wait(context: ProviderContext) -> float:
    """How long start-up keeps polling ``/health`` while the webhook comes up."""
    return _positive_float(context, HEALTH_WAIT_SETTING, DEFAULT_HEALTH_WAIT)


def _positive_float(context: ProviderContext, key: str, default: float) -> float:
    raw = context.options.setting(key)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{PLUGIN}: setting {key}={raw!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(
            f"{PLUGIN}: setting {key}={raw!r} must be a positive, finite number of seconds"
        )
    return value
