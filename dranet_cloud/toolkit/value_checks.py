"""Is a metadata value the kind of thing it claims to be?  (Cheap: ``re`` only.)

Plugins publish a cloud's identifying values (region, zone, instance type)
as device attributes that claims select on.  A value that cannot be one (a
captive portal's text, a proxy's error served as ``text/plain``) must fail
the snapshot, naming the endpoint, rather than become an attribute.
"""

from __future__ import annotations

import re

__all__ = ["require_shape"]


def require_shape(value: str | None, key: str, meaning: str, pattern: re.Pattern[str]) -> None:
    """``ValueError`` when ``value`` (of metadata ``key``) cannot be ``meaning``.

    For identifying values a plugin publishes (region, zone, instance type):
    anything that answered in their place (a portal's text, a proxy's
    error) must fail the snapshot rather than become an attribute.  The
    caller names the endpoint.  ``None`` (the key is absent) passes.
    """
    if value is not None and not pattern.fullmatch(value):
        shown = value if len(value) <= 60 else value[:60] + "..."
        raise ValueError(f"{key} is {shown!r}, which cannot be {meaning}")
