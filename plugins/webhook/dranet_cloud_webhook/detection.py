"""The webhook's local evidence: a configured URL, found without any I/O.

Kept apart from :mod:`.endpoint` (URL parsing, TLS material, which imports
``ssl``) because auto-detection calls ``local_evidence`` on every node start
and every ``dranet-cloud detect``, and should import nothing beyond the
standard library and the core's context for it.
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
