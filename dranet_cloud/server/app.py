"""The BYODP webhook as a FastAPI application around a started :class:`ProviderHost`.

Paths, bodies and status codes are DRANET's (REFERENCE.md section 2), because
the client is DRANET's Go daemon, unchanged:

* ``GET /health`` -> ``{"cloudProvider": bool, "profileProvider": bool}``, the
  roles the host really has;
* ``POST /GetDeviceAttributes`` and ``POST /GetDeviceConfig`` (DeviceIdentifiers);
* ``POST /GetProfileConfig`` and ``POST /ReleaseProfileConfig`` (ProfileRequest).

Errors are plain text like Go's ``http.Error``: 400 for a malformed request
(naming the field; FastAPI's 422 is replaced) or a role this server lacks,
404/409 for denials, 413 for an oversized body and 500 only for temporary
failures the kubelet should retry.  Endpoints are plain ``def`` functions: the
host is synchronous and thread-safe, so FastAPI runs them in its threadpool.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, TypeVar

from fastapi import Body, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import RootModel, ValidationError
from starlette.exceptions import HTTPException

from ..errors import ConfigError, DranetCloudError, ProfileDenied, ProviderUnavailable
from ..host import ProviderHost
from ..ipam.requests import InvalidIpamRequest
from ..models import (
    Capabilities,
    DeviceAttribute,
    DeviceIdentifiers,
    NetworkConfig,
    ProfileRequest,
    WireModel,
    parse_peer_config,
)
from .middleware import WebhookMiddleware

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 1 << 20
_MAX_REPORTED_ERRORS = 5
T = TypeVar("T")


class AttributeMapDoc(RootModel[dict[str, DeviceAttribute]]):
    """The ``/GetDeviceAttributes`` answer: qualified name -> DeviceAttribute (docs only)."""


class ReleaseRequest(WireModel):
    """``POST /ReleaseProfileConfig``: a ProfileRequest whose config is checked leniently.

    DRANET sends a release once and never retries it, so a config this side
    finds invalid must not turn into a 400 that leaks the allocation: the
    release then goes ahead without the config (every profile provider
    releases by device and claim UID).
    """

    device: DeviceIdentifiers
    claim_uid: str
    config: dict[str, Any] | None = None


def _text(status: int, message: str, headers: Mapping[str, str] | None = None) -> PlainTextResponse:
    """An error body shaped like Go's ``http.Error``: the message and a newline."""
    return PlainTextResponse(
        message + "\n",
        status_code=status,
        headers={"X-Content-Type-Options": "nosniff", **(headers or {})},
    )


def describe_validation_errors(path: str, errors: Sequence[Any]) -> str:
    """One line naming every invalid field (``device.name: Input should be ...``)."""
    parts: list[str] = []
    for err in list(errors)[:_MAX_REPORTED_ERRORS]:
        loc = [str(p) for p in err.get("loc", ())]
        if loc and loc[0] == "body":
            loc = loc[1:]
        kind = err.get("type", "")
        if kind == "json_invalid":
            detail = (err.get("ctx") or {}).get("error", "")
            where = f" at byte {loc[0]}" if loc else ""
            parts.append(f"malformed JSON{where}: {detail}".rstrip(": "))
        elif kind == "missing" and not loc:
            parts.append("the body is missing; send a JSON document")
        else:
            field = ".".join(loc) or "(body)"
            msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
            parts.append(f"{field}: {msg}")
    if len(errors) > _MAX_REPORTED_ERRORS:
        parts.append(f"and {len(errors) - _MAX_REPORTED_ERRORS} more")
    return f"invalid request body for {path}: " + "; ".join(parts or ["rejected"])


def _no_role(role: str, path: str) -> PlainTextResponse:
    if role == "cloud":
        fix = (
            "start `dranet-cloud serve` with a cloud plugin (--cloud-provider-hint NAME), or drop "
            "--cloud-provider-hint=webhook from DRANET and keep only --profile-provider=webhook"
        )
    else:
        fix = (
            "start `dranet-cloud serve` with --ipam-range CIDR (the local-ipam profile) or a "
            "--profile-provider plugin, or drop --profile-provider=webhook from DRANET"
        )
    return _text(
        400,
        f"POST {path}: this server has no {role} provider role (GET /health reports "
        f"{role}Provider=false); {fix}",
    )


def _call(path: str, what: str, fn: Callable[[], T]) -> T | Response:
    """Run a host call, turning its errors into BYODP status codes."""
    try:
        return fn()
    except ProfileDenied as exc:
        status = exc.status if 400 <= exc.status < 600 else 400
        log.info("POST %s denied (%d) for %s: %s", path, status, what, exc.message)
        return _text(status, exc.message)
    except InvalidIpamRequest as exc:
        return _text(400, str(exc))
    except (ProviderUnavailable, ConfigError, DranetCloudError) as exc:
        log.warning("POST %s for %s failed (temporary, the kubelet retries): %s", path, what, exc)
        return _text(500, str(exc))
    except Exception as exc:
        log.exception("POST %s for %s: unexpected error", path, what)
        return _text(500, f"POST {path} for {what}: internal error ({type(exc).__name__}: {exc})")


_TEXT_ERROR = {"content": {"text/plain": {"schema": {"type": "string"}}}}
_COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {
        "description": "malformed request (the body names the field) or a role this "
        "server does not have",
        **_TEXT_ERROR,
    },
    413: {"description": "request body over --max-body-bytes", **_TEXT_ERROR},
    500: {"description": "temporary failure; the kubelet retries", **_TEXT_ERROR},
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
ProfileBody = Annotated[ProfileRequest, Body(openapi_examples=_PROFILE_EXAMPLES)]
ReleaseBody = Annotated[ReleaseRequest, Body(openapi_examples=_PROFILE_EXAMPLES)]


def create_app(
    host: ProviderHost, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, access_log: bool = True
) -> FastAPI:
    """The ASGI application serving ``host``, which must be started.

    :class:`WebhookMiddleware` sits in front of every route, so the body cap
    and the access log also cover requests FastAPI rejects.
    """
    host.capabilities()  # raises at once when host.start() was not called
    api = FastAPI(
        title="dranet-cloud BYODP webhook",
        description="DRANET's Bring-Your-Own-DRANET-Provider protocol served by dranet-cloud.",
        version="1",
        separate_input_output_schemas=False,
        docs_url=None,
        redoc_url=None,
    )

    @api.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        return _text(400, describe_validation_errors(request.url.path, exc.errors()))

    @api.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> Response:
        # Unknown paths and wrong methods: plain text like Go's mux, not FastAPI's JSON.
        return _text(
            exc.status_code, f"{request.method} {request.url.path}: {exc.detail}", exc.headers
        )

    @api.get(
        "/health",
        responses={200: {"model": Capabilities}},
        summary="the roles this server really has",
    )
    def health() -> Response:
        return JSONResponse(host.capabilities().to_wire())

    @api.post(
        "/GetDeviceAttributes",
        responses={200: {"model": AttributeMapDoc}, **_COMMON_ERRORS},
        summary="cloud role: attributes for a device's ResourceSlice entry",
    )
    def get_device_attributes(device: DeviceBody) -> Response:
        path = "/GetDeviceAttributes"
        if not host.capabilities().cloud_provider:
            return _no_role("cloud", path)
        result = _call(path, f"device {device.label()}", lambda: host.device_attributes(device))
        if isinstance(result, Response):
            return result
        return JSONResponse({k: v.to_wire() for k, v in result.items()})

    @api.post(
        "/GetDeviceConfig",
        responses={200: {"model": NetworkConfig}, **_COMMON_ERRORS},
        summary="cloud role: the cloud's NetworkConfig for a device",
    )
    def get_device_config(device: DeviceBody) -> Response:
        path = "/GetDeviceConfig"
        if not host.capabilities().cloud_provider:
            return _no_role("cloud", path)
        result = _call(path, f"device {device.label()}", lambda: host.device_config(device))
        if isinstance(result, Response):
            return result
        return JSONResponse((result or NetworkConfig()).to_wire())

    @api.post(
        "/GetProfileConfig",
        responses={200: {"model": NetworkConfig}, **_PROFILE_ERRORS},
        summary="profile role: the profile's NetworkConfig for a claim (idempotent)",
    )
    def get_profile_config(req: ProfileBody) -> Response:
        path = "/GetProfileConfig"
        if not host.capabilities().profile_provider:
            return _no_role("profile", path)
        config = req.config or NetworkConfig()
        claim = req.claim_ref  # gen1 claim_uid or gen2 claim, checked when parsed
        result = _call(
            path,
            f"device {req.device.label()} claim {claim.uid}",
            lambda: host.profile_config(req.device, claim.uid, config, claim=claim),
        )
        if isinstance(result, Response):
            return result
        return JSONResponse((result or NetworkConfig()).to_wire())

    @api.post(
        "/ReleaseProfileConfig",
        responses={
            200: {"description": "released (also when nothing was held)"},
            **_PROFILE_ERRORS,
        },
        summary="profile role: release what a claim holds (best effort)",
    )
    def release_profile_config(req: ReleaseBody) -> Response:
        path = "/ReleaseProfileConfig"
        if not host.capabilities().profile_provider:
            return _no_role("profile", path)
        if not req.claim_uid:
            return _text(400, f"invalid request body for {path}: claim_uid is empty")
        what = f"device {req.device.label()} claim {req.claim_uid}"
        config: NetworkConfig | None = None
        if req.config is not None:
            try:
                config = parse_peer_config(req.config)
            except ValidationError as exc:
                log.warning(
                    "POST %s for %s: config is invalid (%s); releasing by device and claim UID",
                    path,
                    what,
                    describe_validation_errors(path, exc.errors()),
                )
        released = _call(path, what, lambda: host.release(req.device, req.claim_uid, config))
        if isinstance(released, Response):
            return released
        if not released:
            return _text(
                500,
                f"POST {path} for {what}: the provider could not release it "
                "(see the server log); reclaim it with `dranet-cloud ipam gc` or --gc-interval",
            )
        return Response(status_code=200)

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
    api.add_middleware(WebhookMiddleware, max_body_bytes=max_body_bytes, access_log=access_log)
    return api
