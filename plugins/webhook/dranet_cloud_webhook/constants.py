"""The webhook plugin's name and where its URL comes from, with no imports.

A leaf module: local evidence (:mod:`.detection`, on every node start and
every ``dranet-cloud detect``) needs only :func:`configured_url`, and every
other module of the plugin needs the name, so neither may pull in ``ssl``,
httpx or pydantic, nor import a module that imports them back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dranet_cloud.context import ProviderContext

PLUGIN = "webhook"

# Where the URL may come from besides --webhook-url (what
# `dranet-cloud emulate webhook` hands out).
URL_ENV = "DRANET_CLOUD_WEBHOOK_URL"


def configured_url(context: ProviderContext) -> str | None:
    """The webhook URL the operator configured, or ``None``.

    ``--webhook-url`` (``context.options.webhook_url``) wins over
    ``DRANET_CLOUD_WEBHOOK_URL`` in the host's environment; the variable is
    what ``dranet-cloud emulate webhook`` hands out.
    """
    url = context.options.webhook_url or context.env.get(URL_ENV) or None
    return url.strip() if url and url.strip() else None
