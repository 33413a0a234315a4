"""URL forms, TLS settings and timeouts: configuration errors are caught up front."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from dranet_cloud_webhook.constants import configured_url
from dranet_cloud_webhook.endpoint import (
    TlsSettings,
    build_ssl_context,
    health_wait,
    parse_webhook_url,
    request_timeout,
    tls_from_context,
)

from dranet_cloud.contract.context import ProviderContext, ProviderOptions
from dranet_cloud.toolkit.errors import ConfigError


@pytest.mark.parametrize(
    ("url", "base", "uds"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080", None),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080", None),
        ("https://webhook.local:8443/byodp/", "https://webhook.local:8443/byodp", None),
        ("HTTP://localhost", "http://localhost", None),
        ("unix:///run/dranet/webhook.sock", "http://localhost", "/run/dranet/webhook.sock"),
        ("  unix:///tmp/x.sock ", "http://localhost", "/tmp/x.sock"),
    ],
)
def test_accepted_url_forms(url: str, base: str, uds: str | None) -> None:
    endpoint = parse_webhook_url(url)
    assert endpoint.base_url == base
    assert endpoint.uds == uds
    assert endpoint.url == url.strip()


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://127.0.0.1/x", "unsupported scheme 'ftp'"),
        ("127.0.0.1:8080", "unsupported scheme"),
        ("/run/webhook.sock", "unsupported scheme 'none'"),
        ("unix://run/webhook.sock", "not a valid unix socket URL"),
        ("unix:relative.sock", "not a valid unix socket URL"),
        ("http://", "has no host"),
        ("http://127.0.0.1:99999", "invalid port"),
        ("http://127.0.0.1:8080/?x=1", "query or fragment"),
        ("", "empty"),
    ],
)
def test_rejected_url_names_the_accepted_forms(url: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_webhook_url(url)
    message = str(info.value)
    assert reason in message
    assert "http://" in message and "https://" in message and "unix:///path/to.sock" in message
    assert info.value.exit_code == 2


def test_unix_url_describes_paths_with_the_socket() -> None:
    endpoint = parse_webhook_url("unix:///run/wh.sock")
    assert endpoint.describe("/health") == "unix:///run/wh.sock:/health"
    assert parse_webhook_url("http://h:1/p").describe("/health") == "http://h:1/p/health"


def test_url_option_wins_over_environment() -> None:
    ctx = ProviderContext(
        options=ProviderOptions(webhook_url="http://127.0.0.1:1"),
        env={"DRANET_CLOUD_WEBHOOK_URL": "http://127.0.0.1:2"},
    )
    assert configured_url(ctx) == "http://127.0.0.1:1"
    ctx = ProviderContext(env={"DRANET_CLOUD_WEBHOOK_URL": "unix:///x.sock"})
    assert configured_url(ctx) == "unix:///x.sock"
    assert configured_url(ProviderContext(env={"DRANET_CLOUD_WEBHOOK_URL": "  "})) is None


def test_tls_settings_come_from_settings_then_environment() -> None:
    ctx = ProviderContext(
        options=ProviderOptions(settings={"webhook.ca_bundle": "/etc/flag-ca.pem"}),
        env={
            "DRANET_CLOUD_WEBHOOK_CA_BUNDLE": "/etc/env-ca.pem",
            "DRANET_CLOUD_WEBHOOK_CLIENT_CERT": "/etc/env-cert.pem",
            "DRANET_CLOUD_WEBHOOK_CLIENT_KEY": "/etc/env-key.pem",
        },
    )
    assert tls_from_context(ctx) == TlsSettings(
        ca_bundle="/etc/flag-ca.pem",
        client_cert="/etc/env-cert.pem",
        client_key="/etc/env-key.pem",
    )
    assert tls_from_context(ProviderContext(env={})).is_default


def test_client_key_without_certificate_is_a_config_error() -> None:
    ctx = ProviderContext(env={"DRANET_CLOUD_WEBHOOK_CLIENT_KEY": "/etc/key.pem"})
    with pytest.raises(ConfigError, match="client key is set without a client certificate"):
        tls_from_context(ctx)


def test_unreadable_tls_material_names_the_file_and_the_setting(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.pem")
    with pytest.raises(ConfigError) as info:
        build_ssl_context(TlsSettings(ca_bundle=missing))
    assert missing in str(info.value) and "webhook.ca_bundle" in str(info.value)
    with pytest.raises(ConfigError) as info:
        build_ssl_context(TlsSettings(client_cert=missing))
    assert missing in str(info.value) and "webhook.client_cert" in str(info.value)


def test_system_trust_by_default() -> None:
    context = build_ssl_context(TlsSettings())
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname


def test_timeouts_are_configurable() -> None:
    assert request_timeout(ProviderContext()) == 5.0  # not the metadata servers' 2 s
    assert request_timeout(ProviderContext(options=ProviderOptions(request_timeout=8))) == 8
    assert health_wait(ProviderContext()) == 3.0
    ctx = ProviderContext(
        options=ProviderOptions(settings={"webhook.timeout": "0.75", "webhook.health_wait": "1"})
    )
    assert request_timeout(ctx) == 0.75
    assert health_wait(ctx) == 1.0
    for bad in ("soon", "0", "-1"):
        ctx = ProviderContext(options=ProviderOptions(settings={"webhook.timeout": bad}))
        with pytest.raises(ConfigError, match=r"webhook\.timeout"):
            request_timeout(ctx)
