"""A web page in place of metadata (a captive portal) is refused by the shared client."""

from __future__ import annotations

import pytest

from dranet_cloud.testing import Emulator, Faults, Request, Response
from dranet_cloud.toolkit.metadata import MetadataClient, MetadataNotADocument, resolve_endpoint


def handler(req: Request) -> Response:
    if req.path == "/plain-page":  # a portal that does not even say text/html
        return Response.text("  <!DOCTYPE html><html><body>log in</body></html>")
    if req.path == "/json":
        return Response.json({"region": "r1"})
    return Response.text("value-with-<angle>")


def test_a_web_page_is_never_the_document_asked_for() -> None:
    with Emulator(handler, name="portal", env_for=lambda url: {"X_ENDPOINT": url}) as emu:
        endpoint = resolve_endpoint(emu.env, "http://127.0.0.1:9", [("X_ENDPOINT", None)])
        with MetadataClient(endpoint, plugin="test", timeout=1.0) as client:
            assert client.get_json("/json") == {"region": "r1"}
            assert client.get_text("/value") == "value-with-<angle>"
            with pytest.raises(MetadataNotADocument) as info:
                client.get_text("/plain-page", deadline=1.0)
            assert f"GET {emu.url}/plain-page answered a body that is an HTML page" in str(
                info.value
            )
            emu.faults.load("html")
            with pytest.raises(MetadataNotADocument, match="answered Content-Type text/html"):
                client.get_json("/json", deadline=1.0)
            # Refused at once: a portal does not go away within a retry deadline.
            assert [r.path for r in emu.log].count("/json") == 2


def test_the_html_fault_round_trips_in_a_spec() -> None:
    faults = Faults.parse("html;path=/latest/")
    assert faults.html and faults.spec() == "html;path=/latest/"
    assert not Faults.parse("html=false").html
