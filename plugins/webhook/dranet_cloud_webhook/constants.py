"""The webhook plugin's name and where its URL comes from.

A leaf module: every other module of the plugin needs the name, and local
evidence (:mod:`.detection`) needs :func:`configured_url`, so it imports
no module of the plugin (none can import it back).
"""

from __future__ import annotations

from dranet_cloud.contract.context import ProviderContext

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
