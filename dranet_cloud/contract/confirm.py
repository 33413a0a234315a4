"""The rule every plugin's ``confirm_environment`` follows, as one function.

Part of the contract: ``None`` and an exception mean different things to the
host's detection, and :func:`confirm_probe` is where a plugin's one probe is
turned into the answer the hook promises.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from dranet_cloud.toolkit.metadata import MetadataError, MetadataSpoofed, MetadataUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

NOT_THIS_ENVIRONMENT = "metadata answered, but not as this environment"


class NotThisCloud(Exception):
    """Raised by a confirmation probe: the server answered, but not as this cloud's does.

    For answers that are well-formed HTTP but carry the wrong content (an
    instance id of the wrong shape, a listing without the expected entry);
    :func:`confirm_probe` logs the message and turns it into ``None``.  It
    never leaves :func:`confirm_probe`.
    """


def confirm_probe(plugin: str, probe: Callable[[], T], *, warn: bool = False) -> T | None:
    """Run a plugin's one confirmation probe under the rule every ``confirm`` shares.

    The rule, for the ``confirm_environment`` hook:

    * **Nothing answered: raise.**  ``MetadataUnavailable`` (connection
      refused, timed out, only 5xx until the deadline) propagates; its
      message names the endpoint and the override variable, and the host
      records it as the reason the plugin was not chosen.
    * **The answer proves an impostor: raise.**  ``MetadataSpoofed`` (a
      response header the genuine server always sends is missing, GCE's
      ``Metadata-Flavor``) propagates too: something answers in the metadata
      server's place, and the operator must read that in the detection result.
    * **Answered, but not this cloud: log and return None.**  Any other
      ``MetadataError`` (a 4xx, a refused token, a web page, an oversized
      body) and the probe's own :class:`NotThisCloud` (a well-formed answer
      with the wrong content) are logged, at INFO (the host already warns
      about evidence that went unconfirmed) or at WARNING with ``warn``
      (for evidence that is configuration, which the host reports quietly),
      and the probe answers ``None``: the hook's "not this environment".

    Why this rule: ``None`` and an exception mean different things to
    detection (``dranet_cloud.host.detection.detect``): ``None`` is a definite
    "no", an exception is "could not tell".  An HTTP 404 or a captive
    portal's page is a definite answer from something that is not this cloud;
    a silent endpoint or an impostor is not.  DRANET's probes answer a bare
    yes/no (``OnAlibaba`` in pkg/cloudprovider/alibaba/alibaba.go is "HTTP
    200 to the instance-id GET"); the "could not tell" branch is ours, so an
    operator learns why a node with a cloud's DMI was not taken for it.
    Other exceptions (a bad override URL's ``ConfigError``, a bug) propagate
    unchanged.

    ``probe`` returns the description of what answered (it names the endpoint),
    or what the plugin still has to judge before it can describe it (the
    webhook's declared capabilities, where "answered, but without the cloud
    role" is no one's fault and is logged at INFO by the plugin).
    """
    try:
        return probe()
    except (MetadataUnavailable, MetadataSpoofed):
        raise
    except (MetadataError, NotThisCloud) as exc:
        say = log.warning if warn else log.info
        say("%s: not confirmed: %s", plugin, exc)
        return None
