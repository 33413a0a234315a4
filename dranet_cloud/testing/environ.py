"""An environment for subprocesses in tests that cannot point at a real endpoint.

The in-process socket guard does not follow a subprocess, so a developer's
own ``GCE_METADATA_HOST`` or ``DRANET_CLOUD_WEBHOOK_URL`` must not leak into
the CLI processes a test starts.
"""

from __future__ import annotations

import os

# Variables that choose an endpoint, a host root or a provider (a developer's
# KUBECONFIG would point `ipam gc --kubernetes` at a real cluster).
_SCRUBBED_PREFIXES = (
    "DRANET_CLOUD_",
    "GCE_METADATA",
    "AWS_EC2_METADATA",
    "KUBECONFIG",
    "KUBERNETES_SERVICE_",
)


def isolated_environ(**extra: str) -> dict[str, str]:
    """``os.environ`` without endpoint-selecting variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_PREFIXES)}
    env.update(extra)
    return env
