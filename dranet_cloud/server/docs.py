"""The OpenAPI document of the BYODP endpoints, built with FastAPI from the wire models.

The endpoints themselves are served by :class:`~dranet_cloud.server.app.ByodpApp`
(a lean ASGI router: FastAPI's dependency machinery costs more than the whole
request otherwise).  FastAPI stays the source of the document, so
``/openapi.json`` keeps describing the real models, examples and status codes,
and it answers what the router does not know (unknown paths, wrong methods)
in Go's plain-text style.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Body, FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import PlainTextResponse, Response
from pydantic import RootModel
from starlette.exceptions import HTTPException

from dranet_cloud.wire.models import (
    Capabilities,
    DeviceAttribute,
    DeviceIdentifiers,
    NetworkConfig,
    WireModel,
)


class AttributeMapDoc(RootModel[dict[str, DeviceAttribute]]):
    """The ``/GetDeviceAttributes`` answer: qualified name -> DeviceAttribute (docs only)."""


class ProfileRequestDoc(WireModel):
    """``POST /GetProfileConfig`` and ``/ReleaseProfileConfig`` (docs only).

    gen2 DRANET (PR #282) sends the ResourceClaim as ``claim`` (its UID is
    ``claim.metadata.uid``), gen1 sends ``claim_uid``; at least one, and both
    must agree.  Releases carry ``claim_uid`` in both generations.
    """

    device: DeviceIdentifiers
    claim_uid: str | None = None
    claim: dict[str, Any] | None = None
    config: NetworkConfig | None = None


_TEXT_ERROR = {"content": {"text/plain": {"schema": {"type": "string"}}}}
_COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {
        "description": "malformed request (the body names the field or limit) or a role "
        "this server does not have",
        **_TEXT_ERROR,
    },
    413: {"description": "request body over --max-body-bytes", **_TEXT_ERROR},
    500: {"description": "temporary failure; the kubelet retries", **_TEXT_ERROR},
    503: {"description": "the server is saturated or its store is unhealthy", **_TEXT_ERROR},
}
_PROFILE_ERRORS: dict[int | str, dict[str, Any]] = {
    **_COMMON_ERRORS,
    404: {"description": "unknown profile", **_TEXT_ERROR},
    409: {
        "description": "conflict with current state (static address held by another "
        "claim, range exhausted)",
        **_TEXT_ERROR,
    },
}

_DEVICE_EXAMPLES = {
    "nic": {
        "summary": "a NIC with MAC and PCI address",
        "value": {
            "mac_address": "42:01:c0:a8:01:02",
            "pci_address": "0000:00:05.0",
            "name": "eth1",
        },
    },
    "name-only": {"summary": "only a name", "value": {"name": "eno1"}},
}
_PROFILE_EXAMPLES = {
    "gen2": {
        "summary": "gen2 DRANET: the whole ResourceClaim",
        "value": {
            "device": {"mac_address": "42:01:c0:a8:01:02", "name": "eth1"},
            "claim": {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "name": "nic-claim",
                    "namespace": "team-a",
                    "uid": "4f9d3c1e-7a51-4c8e-9d1b-2b6f0c9a7e11",
                },
                "status": {
                    "reservedFor": [
                        {
                            "resource": "pods",
                            "name": "trainer-0",
                            "uid": "9a8b7c6d-0000-4000-8000-000000000001",
                        }
                    ]
                },
            },
            "config": {"profile": "local-ipam", "interface": {"type": "IPVLAN"}},
        },
    },
    "local-ipam": {
        "summary": "ask local-ipam for an address",
        "value": {
            "device": {"mac_address": "42:01:c0:a8:01:02", "name": "eth1"},
            "claim_uid": "4f9d3c1e-7a51-4c8e-9d1b-2b6f0c9a7e11",
            "config": {"profile": "local-ipam", "interface": {}},
        },
    },
    "static": {
        "summary": "reserve a static address through local-ipam",
        "value": {
            "device": {"name": "eth1"},
            "claim_uid": "0b7e52a4-1d2f-4f0e-8f4c-5b3d8a9c6e20",
            "config": {"profile": "local-ipam", "interface": {"addresses": ["10.0.0.77/24"]}},
        },
    },
}

DeviceBody = Annotated[DeviceIdentifiers, Body(openapi_examples=_DEVICE_EXAMPLES)]
ProfileBody = Annotated[ProfileRequestDoc, Body(openapi_examples=_PROFILE_EXAMPLES)]


def _routed_elsewhere() -> Response:
    # ByodpApp answers these paths before FastAPI sees them.
    return PlainTextResponse("not served by the documentation app\n", status_code=500)


def documentation_app() -> FastAPI:
    """FastAPI app whose routes describe the BYODP endpoints and serve ``/openapi.json``."""
    api = FastAPI(
        title="dranet-cloud BYODP webhook",
        description="DRANET's Bring-Your-Own-DRANET-Provider protocol served by dranet-cloud.",
        version="1",
        separate_input_output_schemas=False,
        docs_url=None,
        redoc_url=None,
    )

    @api.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> Response:
        # Unknown paths and wrong methods: plain text like Go's mux, not FastAPI's JSON.
        return PlainTextResponse(
            f"{request.method} {request.url.path}: {exc.detail}\n",
            status_code=exc.status_code,
            headers={"X-Content-Type-Options": "nosniff", **(exc.headers or {})},
        )

    @api.get(
        "/health",
        responses={200: {"model": Capabilities}, 503: _COMMON_ERRORS[503]},
        summary="the roles this server really has (503 with the reason when unhealthy)",
    )
    def health() -> Response:
        return _routed_elsewhere()

    @api.post(
        "/GetDeviceAttributes",
        responses={200: {"model": AttributeMapDoc}, **_COMMON_ERRORS},
        summary="cloud role: attributes for a device's ResourceSlice entry",
    )
    def get_device_attributes(device: DeviceBody) -> Response:
        return _routed_elsewhere()

    @api.post(
        "/GetDeviceConfig",
        responses={200: {"model": NetworkConfig}, **_COMMON_ERRORS},
        summary="cloud role: the cloud's NetworkConfig for a device",
    )
    def get_device_config(device: DeviceBody) -> Response:
        return _routed_elsewhere()

    @api.post(
        "/GetProfileConfig",
        responses={200: {"model": NetworkConfig}, **_PROFILE_ERRORS},
        summary="profile role: the profile's NetworkConfig for a claim (idempotent)",
    )
    def get_profile_config(req: ProfileBody) -> Response:
        return _routed_elsewhere()

    @api.post(
        "/ReleaseProfileConfig",
        responses={
            200: {"description": "released (also when nothing was held)"},
            **_PROFILE_ERRORS,
        },
        summary="profile role: release what a claim holds (best effort)",
    )
    def release_profile_config(req: ProfileBody) -> Response:
        return _routed_elsewhere()

    def openapi() -> dict[str, Any]:
        """FastAPI's document without the 422 it never sends (validation answers 400)."""
        if api.openapi_schema is None:
            doc = get_openapi(
                title=api.title,
                version=api.version,
                description=api.description,
                routes=api.routes,
                separate_input_output_schemas=False,
            )
            for item in doc.get("paths", {}).values():
                for op in item.values():
                    op.get("responses", {}).pop("422", None)
            schemas = doc.get("components", {}).get("schemas", {})
            schemas.pop("HTTPValidationError", None)
            schemas.pop("ValidationError", None)
            api.openapi_schema = doc
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]
    return api
