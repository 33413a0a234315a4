"""Values GCE never answers for the machine type or zone fail the snapshot (issue 26)."""

from __future__ import annotations

from typing import Any

import pytest
from dranet_cloud_gce.snapshot import parse_instance


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("machineType", "projects/1/machineTypes/Sign in to continue"),
        ("zone", "projects/1/zones/<b>portal</b>"),
    ],
)
def test_a_value_that_cannot_be_a_machine_type_or_zone_is_refused(
    gce_tree: dict[str, Any], key: str, value: str
) -> None:
    gce_tree["instance"][key] = value
    with pytest.raises(ValueError, match=f"{key} is .*which cannot be"):
        parse_instance(gce_tree, endpoint="http://127.0.0.1:9")
