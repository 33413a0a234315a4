"""Reading a plugin's metadata fixture: the built-in sample or an operator's file.

Every emulator takes ``--fixture FILE`` or falls back to the JSON it ships in
its package; the reading and the error messages are the same for all of them,
only the expected shape differs (each plugin checks that itself).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from dranet_cloud.toolkit.errors import ConfigError


def load_fixture_json(
    plugin: str, package: str, default_name: str, fixture: Path | None
) -> tuple[Any, str]:
    """Parse ``fixture`` (or ``<package>/fixtures/<default_name>``); return it and its origin.

    The origin ("built-in fixture x.json" / "fixture /path") is for the
    plugin's own shape errors.  Unreadable or non-JSON files are a
    ``ConfigError`` naming the plugin and the file.
    """
    if fixture is None:
        where = f"built-in fixture {default_name}"
        text = resources.files(package).joinpath("fixtures", default_name).read_text()
    else:
        where = f"fixture {fixture}"
        try:
            text = Path(fixture).read_text()
        except OSError as exc:
            raise ConfigError(f"{plugin} emulator: cannot read {where}: {exc}") from exc
    try:
        return json.loads(text), where
    except ValueError as exc:
        raise ConfigError(f"{plugin} emulator: {where} is not JSON: {exc}") from exc
