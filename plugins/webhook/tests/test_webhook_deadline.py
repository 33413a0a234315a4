"""A webhook that drips its answer is cut off at the call's deadline, not per read."""

from __future__ import annotations

import time

import pytest
from dranet_cloud_webhook.client import (
    WebhookUnavailable,
    close_pooled_clients,
    pooled_client,
    send,
)
from dranet_cloud_webhook.endpoint import TlsSettings, parse_webhook_url

from dranet_cloud.testing.drip import DrippingServer


@pytest.mark.parametrize("phase", ["headers", "body"])
def test_a_dripping_webhook_is_cut_off_within_its_timeout(phase: str) -> None:
    with DrippingServer(phase=phase, interval=0.2) as drip:
        endpoint = parse_webhook_url(drip.url)
        client = pooled_client(endpoint, TlsSettings())
        start = time.monotonic()
        try:
            with pytest.raises(WebhookUnavailable, match="timed out"):
                send(client, endpoint, "POST", "/GetProfileConfig", body=b"{}", timeout=1.0)
            # One byte every 0.2 s never trips a per-read timeout; the whole
            # call must still end by its 1 s deadline (+1 s of slack).
            assert time.monotonic() - start < 1.0 + 1.0
        finally:
            close_pooled_clients()
