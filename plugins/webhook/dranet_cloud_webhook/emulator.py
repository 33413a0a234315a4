"""``dranet-cloud emulate webhook``: the example webhook on the emulator kit.

The webhook has no metadata server of its own; its "emulator" is the example
BYODP server's logic served by :class:`dranet_cloud.testing.Emulator`, which
adds the request log and the shared fault injection (delays, drops, forced
statuses, oversize bodies) on top of the example's own switches.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from dranet_cloud.testing import Emulator, Request, Response

from .constants import URL_ENV
from .example_server import Behaviour, ExampleWebhook


def behaviour_from_fixture(fixture: Path | None) -> Behaviour:
    """A :class:`Behaviour` from a JSON object of its fields (``{"mtu": 9000}``).

    Unknown keys are an error naming the accepted ones, so a typo in a demo
    fixture does not silently serve the defaults.
    """
    behaviour = Behaviour()
    if fixture is None:
        return behaviour
    doc = json.loads(fixture.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError(f"{fixture}: a webhook fixture is a JSON object of behaviour fields")
    known = {f.name for f in fields(Behaviour)}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise ValueError(
            f"{fixture}: unknown webhook fixture keys {unknown}; known: {sorted(known)}"
        )
    if "profiles" in doc and doc["profiles"] is not None:
        doc["profiles"] = frozenset(doc["profiles"])
    return replace(behaviour, **doc)


def handler_for(webhook: ExampleWebhook) -> Any:
    """Adapt the example's ``handle`` to the kit's ``Request -> Response``."""

    def handle(request: Request) -> Response:
        answer = webhook.handle(request.method, request.path, request.body)
        return Response(answer.status, answer.body, content_type=answer.content_type)

    return handle


def build_emulator(
    fixture: Path | None, listen: str, faults: str | None, webhook: ExampleWebhook | None = None
) -> Emulator:
    webhook = webhook or ExampleWebhook(behaviour_from_fixture(fixture))
    return Emulator(
        handler_for(webhook),
        name="webhook",
        listen=listen,
        faults=faults,
        env_for=lambda url: {URL_ENV: url},
    )
